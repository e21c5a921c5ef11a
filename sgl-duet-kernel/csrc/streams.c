/* Plain non-blocking streams in a device's primary context (used by the libsmctrl backend). */
#include "driver.h"

SGLD_API int sgld_stream_create(int dev, void** stream) {
  const sgld_driver* drv;
  int rc = sgld_driver_get(&drv);
  if (rc != SGLD_OK) return rc;
  if (stream == NULL) return sgld_fail(SGLD_E_INVALID, "stream is NULL");
  CUdevice d;
  CUcontext ctx;
  CUstream s = NULL;
  SGLD_CHECK(drv, drv->cuDeviceGet(&d, dev));
  SGLD_CHECK(drv, drv->cuDevicePrimaryCtxRetain(&ctx, d));
  CUresult cr = drv->cuCtxPushCurrent(ctx);
  if (cr == CUDA_SUCCESS) {
    cr = drv->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    CUcontext popped;
    drv->cuCtxPopCurrent(&popped);
  }
  if (cr != CUDA_SUCCESS) {
    drv->cuDevicePrimaryCtxRelease(d);
    return sgld_fail_cuda(drv, cr, "cuStreamCreate");
  }
  *stream = s;
  return SGLD_OK;
}

SGLD_API int sgld_stream_destroy(int dev, void* stream) {
  const sgld_driver* drv;
  int rc = sgld_driver_get(&drv);
  if (rc != SGLD_OK) return rc;
  CUdevice d;
  SGLD_CHECK(drv, drv->cuDeviceGet(&d, dev));
  SGLD_CHECK(drv, drv->cuStreamSynchronize((CUstream)stream));
  SGLD_CHECK(drv, drv->cuStreamDestroy((CUstream)stream));
  SGLD_CHECK(drv, drv->cuDevicePrimaryCtxRelease(d));
  return SGLD_OK;
}

SGLD_API int sgld_stream_synchronize(void* stream) {
  const sgld_driver* drv;
  int rc = sgld_driver_get(&drv);
  if (rc != SGLD_OK) return rc;
  SGLD_CHECK(drv, drv->cuStreamSynchronize((CUstream)stream));
  return SGLD_OK;
}
