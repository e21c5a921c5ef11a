/*
 * A fake libcuda.so.1 for CPU tests of libsgl_duet_kernel's driver plumbing: symbol lookup via
 * cuGetProcAddress, green-context splits and their grant checks, object lifetimes. Behaviour is
 * set by environment variables:
 *   FAKE_CUDA_VERSION  driver version (default 13000)       FAKE_SMS   SM count (default 132)
 *   FAKE_SHORT         SMs the split withholds from a group  FAKE_CC    major compute capability
 *   FAKE_NO_FIELDS     1: report no granularity fields (a 12.x driver)
 *   FAKE_STEP          SMs a coscheduled split really rounds to (default 8; also its minimum)
 *   FAKE_REPORT_ALIGN  smCoscheduledAlignment the driver reports (default: FAKE_STEP)
 * fake_live() returns the number of live green contexts + streams; fake_requested() the entry
 * points asked for, as "name@version"; fake_abi_calls() which cuStreamGetCtx ABI was called.
 * Like the real driver, cuGetProcAddress honours the version: cuStreamGetCtx asked at >= 12050
 * is the 3-argument cuStreamGetCtx_v2.
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int env_int(const char* name, int dflt) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : dflt;
}

static int g_live;
static char g_requested[8192];
static char g_abi_calls[256];
int fake_live(void) { return g_live; }
const char* fake_requested(void) { return g_requested; }
const char* fake_abi_calls(void) { return g_abi_calls; }

CUresult cuInit(unsigned int flags) { return CUDA_SUCCESS; }
CUresult cuDriverGetVersion(int* v) {
  *v = env_int("FAKE_CUDA_VERSION", 13000);
  return CUDA_SUCCESS;
}
CUresult cuGetErrorName(CUresult rc, const char** s) {
  *s = rc == CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION ? "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION"
                                                       : "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}
CUresult cuGetErrorString(CUresult rc, const char** s) {
  *s = "fake driver error";
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetCount(int* n) {
  *n = 1;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGet(CUdevice* d, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *d = 0;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d) {
  if (a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) *v = env_int("FAKE_CC", 9);
  else if (a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR) *v = 0;
  else if (a == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) *v = env_int("FAKE_SMS", 132);
  else return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetDevResource(CUdevice d, CUdevResource* r, CUdevResourceType t) {
  r->type = CU_DEV_RESOURCE_TYPE_SM;
  r->sm.smCount = (unsigned)env_int("FAKE_SMS", 132);
  if (!env_int("FAKE_NO_FIELDS", 0)) {
    r->sm.minSmPartitionSize = (unsigned)env_int("FAKE_STEP", 8);
    r->sm.smCoscheduledAlignment = (unsigned)env_int("FAKE_REPORT_ALIGN",
                                                     env_int("FAKE_STEP", 8));
  }
  return CUDA_SUCCESS;
}
CUresult cuDevSmResourceSplitByCount(CUdevResource* result, unsigned* nb, const CUdevResource* in,
                                     CUdevResource* rest, unsigned flags, unsigned min_count) {
  unsigned lo = flags & CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING
                    ? 2
                    : (unsigned)env_int("FAKE_STEP", 8);
  unsigned size = min_count < lo ? lo : (min_count + lo - 1) / lo * lo;
  if (size > in->sm.smCount) return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
  if (result == NULL) {
    *nb = in->sm.smCount / size;
    return CUDA_SUCCESS;
  }
  unsigned given = size - (unsigned)env_int("FAKE_SHORT", 0);
  memset(&result[0], 0, sizeof result[0]);
  result[0].type = CU_DEV_RESOURCE_TYPE_SM;
  result[0].sm.smCount = given;
  *nb = 1;
  if (rest) {
    memset(rest, 0, sizeof *rest);
    rest->type = CU_DEV_RESOURCE_TYPE_SM;
    rest->sm.smCount = in->sm.smCount - size;
  }
  return CUDA_SUCCESS;
}
CUresult cuDevResourceGenerateDesc(CUdevResourceDesc* desc, CUdevResource* r, unsigned n) {
  *desc = (CUdevResourceDesc)r;
  return CUDA_SUCCESS;
}
CUresult cuGreenCtxCreate(CUgreenCtx* ctx, CUdevResourceDesc desc, CUdevice d, unsigned flags) {
  if (!(flags & CU_GREEN_CTX_DEFAULT_STREAM)) return CUDA_ERROR_INVALID_VALUE;
  *ctx = (CUgreenCtx)malloc(8);
  ++g_live;
  return CUDA_SUCCESS;
}
CUresult cuGreenCtxDestroy(CUgreenCtx ctx) {
  free(ctx);
  --g_live;
  return CUDA_SUCCESS;
}
CUresult cuGreenCtxStreamCreate(CUstream* s, CUgreenCtx ctx, unsigned flags, int prio) {
  if (flags != CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
  *s = (CUstream)malloc(8);
  ++g_live;
  return CUDA_SUCCESS;
}
CUresult cuStreamCreate(CUstream* s, unsigned flags) {
  *s = (CUstream)malloc(8);
  ++g_live;
  return CUDA_SUCCESS;
}
CUresult cuStreamDestroy(CUstream s) {
  free(s);
  --g_live;
  return CUDA_SUCCESS;
}
CUresult cuStreamSynchronize(CUstream s) { return CUDA_SUCCESS; }
CUresult cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d) {
  *c = (CUcontext)&g_live;
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease(CUdevice d) { return CUDA_SUCCESS; }
CUresult cuCtxPushCurrent(CUcontext c) { return CUDA_SUCCESS; }
CUresult cuCtxPopCurrent(CUcontext* c) { return CUDA_SUCCESS; }
/* The two ABIs of cuStreamGetCtx: which one the library called is recorded. */
CUresult cuStreamGetCtx(CUstream s, CUcontext* c) {
  strcat(g_abi_calls, "v1 ");
  *c = (CUcontext)&g_live;
  return CUDA_SUCCESS;
}
CUresult cuStreamGetCtx_v2(CUstream s, CUcontext* c, CUgreenCtx* g) {
  strcat(g_abi_calls, "v2 ");
  *c = (CUcontext)&g_live;
  *g = NULL;
  return CUDA_SUCCESS;
}
static int g_dummy_kernel;
CUresult cuLibraryLoadData(CUlibrary* lib, const void* code, CUjit_option* jo, void** jv,
                           unsigned nj, CUlibraryOption* lo, void** lv, unsigned nl) {
  *lib = (CUlibrary)&g_dummy_kernel;
  return CUDA_SUCCESS;
}
CUresult cuLibraryGetKernel(CUkernel* k, CUlibrary lib, const char* name) {
  *k = (CUkernel)&g_dummy_kernel;
  return CUDA_SUCCESS;
}
CUresult cuKernelGetFunction(CUfunction* f, CUkernel k) {
  *f = (CUfunction)&g_dummy_kernel;
  return CUDA_SUCCESS;
}
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned smem, CUstream s, void** args,
                        void** extra) {
  return CUDA_SUCCESS;
}

#define ENTRY(name) {#name, (void*)&name}
static const struct {
  const char* name;
  void* fn;
} k_table[] = {
    ENTRY(cuDriverGetVersion), ENTRY(cuGetErrorName), ENTRY(cuGetErrorString),
    ENTRY(cuDeviceGetCount), ENTRY(cuDeviceGet), ENTRY(cuDeviceGetAttribute),
    ENTRY(cuDeviceGetDevResource), ENTRY(cuDevSmResourceSplitByCount),
    ENTRY(cuDevResourceGenerateDesc), ENTRY(cuGreenCtxCreate), ENTRY(cuGreenCtxDestroy),
    ENTRY(cuGreenCtxStreamCreate), ENTRY(cuStreamCreate), ENTRY(cuStreamDestroy),
    ENTRY(cuStreamSynchronize), ENTRY(cuDevicePrimaryCtxRetain),
    ENTRY(cuDevicePrimaryCtxRelease), {"cuCtxPushCurrent", (void*)&cuCtxPushCurrent},
    {"cuCtxPopCurrent", (void*)&cuCtxPopCurrent}, ENTRY(cuStreamGetCtx),
    ENTRY(cuLibraryLoadData), ENTRY(cuLibraryGetKernel), ENTRY(cuKernelGetFunction),
    ENTRY(cuLaunchKernel),
};

/* Keyed by the BASE name (no _v2 suffix), as the real driver is. */
CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags,
                          CUdriverProcAddressQueryResult* status) {
  char entry[128];
  snprintf(entry, sizeof entry, "%s@%d ", symbol, version);
  strncat(g_requested, entry, sizeof g_requested - strlen(g_requested) - 1);
  if (strcmp(symbol, "cuStreamGetCtx") == 0 && version >= 12050) {
    *pfn = (void*)&cuStreamGetCtx_v2;
    if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
  }
  for (size_t i = 0; i < sizeof k_table / sizeof k_table[0]; ++i) {
    if (strcmp(k_table[i].name, symbol) == 0) {
      *pfn = k_table[i].fn;
      if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
  }
  *pfn = NULL;
  if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}
