/* Launching the embedded %smid kernel on a stream, directly or through a captured CUDA graph. */
#include <pthread.h>
#include <stddef.h>

#include "driver.h"

#if SGLD_HAVE_SMID_KERNEL
extern const unsigned char sgld_smid_fatbin[];
#endif

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static CUkernel g_kernel;
static CUresult g_load_rc = CUDA_ERROR_NOT_INITIALIZED;

static void load_kernel(void) {
#if SGLD_HAVE_SMID_KERNEL
  const sgld_driver* drv;
  if (sgld_driver_get(&drv) != SGLD_OK || !drv->cuLibraryLoadData || !drv->cuLibraryGetKernel)
    return;
  CUlibrary lib;
  g_load_rc = drv->cuLibraryLoadData(&lib, sgld_smid_fatbin, NULL, NULL, 0, NULL, NULL, 0);
  if (g_load_rc == CUDA_SUCCESS) g_load_rc = drv->cuLibraryGetKernel(&g_kernel, lib,
                                                                     "sgld_record_smid");
#endif
}

SGLD_API int sgld_smid_available(void) { return SGLD_HAVE_SMID_KERNEL; }

/* Launches on `stream` with that stream's context current (a green context's, if any). */
static int launch(const sgld_driver* drv, CUstream stream, uint64_t out, int nblocks,
                  uint64_t spin_ns, unsigned smem_bytes) {
  if (!SGLD_HAVE_SMID_KERNEL)
    return sgld_fail(SGLD_E_NOT_BUILT, "smid kernel not compiled in (nvcc missing at build)");
  if (nblocks <= 0 || out == 0 || smem_bytes > 48 * 1024)
    return sgld_fail(SGLD_E_INVALID, "bad launch: nblocks=%d out=%llu smem=%u", nblocks,
                     (unsigned long long)out, smem_bytes);
  SGLD_REQUIRE(drv, cuKernelGetFunction);
  SGLD_REQUIRE(drv, cuStreamGetCtx);
  pthread_once(&g_once, load_kernel);
  if (g_load_rc != CUDA_SUCCESS) return sgld_fail_cuda(drv, g_load_rc, "loading smid kernel");
  CUcontext ctx, popped;
  SGLD_CHECK(drv, drv->cuStreamGetCtx(stream, &ctx));
  SGLD_CHECK(drv, drv->cuCtxPushCurrent(ctx));
  CUfunction fn;
  CUresult cr = drv->cuKernelGetFunction(&fn, g_kernel);
  if (cr == CUDA_SUCCESS) {
    int* out_ptr = (int*)(uintptr_t)out;
    unsigned long long spin = spin_ns;
    void* args[] = {&out_ptr, &spin};
    cr = drv->cuLaunchKernel(fn, (unsigned)nblocks, 1, 1, 32, 1, 1, smem_bytes, stream, args,
                             NULL);
  }
  drv->cuCtxPopCurrent(&popped);
  if (cr != CUDA_SUCCESS) return sgld_fail_cuda(drv, cr, "launching smid kernel");
  return SGLD_OK;
}

SGLD_API int sgld_smid_record(void* stream, uint64_t out, int nblocks, uint64_t spin_ns,
                              unsigned smem_bytes) {
  const sgld_driver* drv;
  int rc = sgld_driver_get(&drv);
  if (rc != SGLD_OK) return rc;
  return launch(drv, (CUstream)stream, out, nblocks, spin_ns, smem_bytes);
}

SGLD_API int sgld_smid_record_graph(void* capture_stream, void* launch_stream, uint64_t out,
                                    int nblocks, uint64_t spin_ns, unsigned smem_bytes) {
  const sgld_driver* drv;
  int rc = sgld_driver_get(&drv);
  if (rc != SGLD_OK) return rc;
  CUstream cap = (CUstream)capture_stream;
  CUgraph graph = NULL;
  CUgraphExec exec = NULL;
  /* Load the module outside capture; lazy loading inside a capture is not allowed everywhere. */
  if ((rc = launch(drv, cap, out, nblocks, 0, smem_bytes)) != SGLD_OK) return rc;
  SGLD_CHECK(drv, drv->cuStreamSynchronize(cap));
  SGLD_CHECK(drv, drv->cuStreamBeginCapture(cap, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  rc = launch(drv, cap, out, nblocks, spin_ns, smem_bytes);
  CUresult cr = drv->cuStreamEndCapture(cap, &graph);
  if (rc != SGLD_OK) goto done;
  if (cr != CUDA_SUCCESS) {
    rc = sgld_fail_cuda(drv, cr, "cuStreamEndCapture");
    goto done;
  }
  /* Instantiate and launch with the LAUNCH stream's context current (e.g. the primary one). */
  CUcontext ctx, popped;
  if ((cr = drv->cuStreamGetCtx((CUstream)launch_stream, &ctx)) != CUDA_SUCCESS ||
      (cr = drv->cuCtxPushCurrent(ctx)) != CUDA_SUCCESS) {
    rc = sgld_fail_cuda(drv, cr, "context of the launch stream");
    goto done;
  }
  if ((cr = drv->cuGraphInstantiateWithFlags(&exec, graph, 0)) != CUDA_SUCCESS ||
      (cr = drv->cuGraphLaunch(exec, (CUstream)launch_stream)) != CUDA_SUCCESS ||
      (cr = drv->cuStreamSynchronize((CUstream)launch_stream)) != CUDA_SUCCESS)
    rc = sgld_fail_cuda(drv, cr, "instantiating/launching the smid graph");
  drv->cuCtxPopCurrent(&popped);
done:
  if (exec) drv->cuGraphExecDestroy(exec);
  if (graph) drv->cuGraphDestroy(graph);
  return rc;
}
