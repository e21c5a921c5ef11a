/* Opening the CUDA driver at run time, error bookkeeping and device queries. */
#include "driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef CUresult (*get_proc_fn)(const char*, void**, int, cuuint64_t,
                                CUdriverProcAddressQueryResult*);
typedef CUresult (*init_fn)(unsigned int);
typedef CUresult (*version_fn)(int*);

static __thread char t_error[1024];

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static sgld_driver g_drv;
static int g_status = SGLD_OK;
static char g_status_msg[1024];

int sgld_fail(int code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t_error, sizeof t_error, fmt, ap);
  va_end(ap);
  return code;
}

int sgld_fail_cuda(const sgld_driver* drv, CUresult rc, const char* what) {
  const char* name = NULL;
  const char* desc = NULL;
  if (drv && drv->cuGetErrorName) drv->cuGetErrorName(rc, &name);
  if (drv && drv->cuGetErrorString) drv->cuGetErrorString(rc, &desc);
  return sgld_fail(SGLD_E_CUDA, "%s failed: %s (%d): %s", what, name ? name : "CUDA_ERROR",
                   (int)rc, desc ? desc : "no description");
}

static void open_driver(void) {
  /* NOTE: RTLD_NOLOAD first, so a driver PyTorch already loaded is shared, not re-opened. */
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  if (lib == NULL) lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (lib == NULL) {
    const char* why = dlerror();
    g_status = SGLD_E_NO_DRIVER;
    snprintf(g_status_msg, sizeof g_status_msg, "no CUDA driver: dlopen(libcuda.so.1) failed: %s",
             why ? why : "unknown reason");
    return;
  }
  /* cuGetProcAddress_v2 exists from CUDA 12.0 on; the green-context API needs 12.4 anyway. */
  get_proc_fn get_proc = (get_proc_fn)dlsym(lib, "cuGetProcAddress_v2");
  init_fn init = (init_fn)dlsym(lib, "cuInit");
  version_fn get_version = (version_fn)dlsym(lib, "cuDriverGetVersion");
  int version = 0;
  if (get_proc == NULL || init == NULL || get_version == NULL ||
      get_version(&version) != CUDA_SUCCESS) {
    g_status = SGLD_E_DRIVER_TOO_OLD;
    snprintf(g_status_msg, sizeof g_status_msg,
             "CUDA driver too old: libcuda.so.1 has no cuGetProcAddress_v2 (needs CUDA >= 12.0)");
    return;
  }
  /* Each entry point is asked for at the version listed beside it in driver.h: the ABI whose
   * prototype the caller uses. Asking at the header's or the driver's version instead returns
   * the newest ABI, e.g. the 3-argument cuStreamGetCtx_v2 from 12.5 on, which a 2-argument call
   * would corrupt. A driver older than the listed version lacks that ABI: the entry stays NULL. */
#define SGLD_RESOLVE(name, ver)                                                          \
  {                                                                                      \
    CUdriverProcAddressQueryResult found;                                                \
    void* fn = NULL;                                                                     \
    if (version < (ver) ||                                                               \
        get_proc(#name, &fn, (ver), CU_GET_PROC_ADDRESS_DEFAULT, &found) !=              \
            CUDA_SUCCESS ||                                                              \
        found != CU_GET_PROC_ADDRESS_SUCCESS)                                            \
      fn = NULL;                                                                         \
    g_drv.name = (__typeof__(g_drv.name))fn;                                             \
  }
  SGLD_DRIVER_FUNCS(SGLD_RESOLVE)
#undef SGLD_RESOLVE
  CUresult rc = init(0);
  if (rc != CUDA_SUCCESS) {
    const char* name = NULL;
    if (g_drv.cuGetErrorName) g_drv.cuGetErrorName(rc, &name);
    g_status = SGLD_E_NO_DRIVER;
    snprintf(g_status_msg, sizeof g_status_msg, "cuInit(0) failed: %s (%d)",
             name ? name : "CUDA_ERROR", (int)rc);
    return;
  }
  g_drv.version = version;
}

int sgld_driver_get(const sgld_driver** drv) {
  pthread_once(&g_once, open_driver);
  if (g_status != SGLD_OK) return sgld_fail(g_status, "%s", g_status_msg);
  *drv = &g_drv;
  return SGLD_OK;
}

SGLD_API int sgld_abi_version(void) { return SGLD_ABI_VERSION; }

SGLD_API const char* sgld_last_error(void) { return t_error; }

SGLD_API int sgld_driver_open(void) {
  const sgld_driver* drv;
  return sgld_driver_get(&drv);
}

SGLD_API int sgld_driver_version(int* version) {
  const sgld_driver* drv;
  int rc = sgld_driver_get(&drv);
  if (rc != SGLD_OK) return rc;
  if (version == NULL) return sgld_fail(SGLD_E_INVALID, "version is NULL");
  *version = drv->version;
  return SGLD_OK;
}

SGLD_API int sgld_device_count(int* count) {
  const sgld_driver* drv;
  int rc = sgld_driver_get(&drv);
  if (rc != SGLD_OK) return rc;
  if (count == NULL) return sgld_fail(SGLD_E_INVALID, "count is NULL");
  SGLD_CHECK(drv, drv->cuDeviceGetCount(count));
  return SGLD_OK;
}

SGLD_API int sgld_device_info(int dev, int* cc_major, int* cc_minor, int* num_sms) {
  const sgld_driver* drv;
  int rc = sgld_driver_get(&drv);
  if (rc != SGLD_OK) return rc;
  if (!cc_major || !cc_minor || !num_sms) return sgld_fail(SGLD_E_INVALID, "NULL output");
  CUdevice d;
  SGLD_CHECK(drv, drv->cuDeviceGet(&d, dev));
  SGLD_CHECK(drv, drv->cuDeviceGetAttribute(cc_major,
                                            CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d));
  SGLD_CHECK(drv, drv->cuDeviceGetAttribute(cc_minor,
                                            CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d));
  SGLD_CHECK(drv, drv->cuDeviceGetAttribute(num_sms,
                                            CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d));
  return SGLD_OK;
}
