/* Internal: the CUDA driver entry points the library uses, resolved at run time. */
#ifndef SGLD_DRIVER_H
#define SGLD_DRIVER_H

#include <cuda.h> /* types and enums only; libcuda is never linked */

#include "sgl_duet_kernel.h"

/* X(name, ABI version): the CUDA version whose prototype of `name` this library calls, i.e. the
 * `_vNNNNN` suffix of its PFN_ typedef in cudaTypedefs.h. driver.c asks cuGetProcAddress for
 * exactly this version (a newer one can return a different signature: cuStreamGetCtx at >= 12050
 * is the 3-argument cuStreamGetCtx_v2). test/kernel/test_fake_driver.py checks the column
 * against cudaTypedefs.h. */
#define SGLD_DRIVER_FUNCS(X)                  \
  X(cuDriverGetVersion, 2020)                 \
  X(cuGetErrorName, 6000)                     \
  X(cuGetErrorString, 6000)                   \
  X(cuDeviceGetCount, 2000)                   \
  X(cuDeviceGet, 2000)                        \
  X(cuDeviceGetAttribute, 2000)               \
  X(cuDevicePrimaryCtxRetain, 7000)           \
  X(cuDevicePrimaryCtxRelease, 11000)         \
  X(cuCtxPushCurrent, 4000)                   \
  X(cuCtxPopCurrent, 4000)                    \
  X(cuStreamCreate, 2000)                     \
  X(cuStreamDestroy, 4000)                    \
  X(cuStreamSynchronize, 2000)                \
  X(cuStreamGetCtx, 9020)                     \
  X(cuStreamBeginCapture, 10010)              \
  X(cuStreamEndCapture, 10000)                \
  X(cuGraphInstantiateWithFlags, 11040)       \
  X(cuGraphLaunch, 10000)                     \
  X(cuGraphExecDestroy, 10000)                \
  X(cuGraphDestroy, 10000)                    \
  X(cuLibraryLoadData, 12000)                 \
  X(cuLibraryGetKernel, 12000)                \
  X(cuKernelGetFunction, 12000)               \
  X(cuLaunchKernel, 4000)                     \
  X(cuDeviceGetDevResource, 12040)            \
  X(cuDevSmResourceSplitByCount, 12040)       \
  X(cuDevResourceGenerateDesc, 12040)         \
  X(cuGreenCtxCreate, 12040)                  \
  X(cuGreenCtxDestroy, 12040)                 \
  X(cuCtxFromGreenCtx, 12040)                 \
  X(cuGreenCtxStreamCreate, 12050)

typedef struct sgld_driver {
#define SGLD_DECLARE(name, ver) __typeof__(&name) name;
  SGLD_DRIVER_FUNCS(SGLD_DECLARE)
#undef SGLD_DECLARE
  int version; /* cuDriverGetVersion */
} sgld_driver;

/* Opens the driver if needed; on success *drv points at the resolved table. */
int sgld_driver_get(const sgld_driver** drv);

/* Records a formatted message as this thread's last error and returns `code`. */
int sgld_fail(int code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
/* Records "<what>: <CUDA error name> (<code>): <description>" and returns SGLD_E_CUDA. */
int sgld_fail_cuda(const sgld_driver* drv, CUresult rc, const char* what);
/* Fails with SGLD_E_DRIVER_TOO_OLD if entry point `fn` was not resolved. */
#define SGLD_REQUIRE(drv, fn)                                                                   \
  do {                                                                                          \
    if ((drv)->fn == NULL)                                                                      \
      return sgld_fail(SGLD_E_DRIVER_TOO_OLD, "CUDA driver %d lacks " #fn, (drv)->version);     \
  } while (0)
/* Evaluates a driver call and returns its failure through sgld_fail_cuda. */
#define SGLD_CHECK(drv, call)                                                                   \
  do {                                                                                          \
    CUresult sgld_rc_ = (call);                                                                 \
    if (sgld_rc_ != CUDA_SUCCESS) return sgld_fail_cuda((drv), sgld_rc_, #call);               \
  } while (0)

#endif /* SGLD_DRIVER_H */
