/*
 * sgl_duet_kernel.h -- C ABI of libsgl_duet_kernel.so, the SM-partitioning core of sglang-duet.
 *
 * The library gives a process two or more CUDA streams that run on disjoint sets of streaming
 * multiprocessors (SMs), so that a decode batch and a prefill batch can execute at the same time
 * without competing for SMs. Two mechanisms are offered:
 *
 *   - green contexts (CUDA driver >= 12.4, compute capability >= 6.0; the project targets
 *     sm_80 and sm_90): sgld_green_pair_create() splits the device's SM resource ONCE into a
 *     decode group and the remainder, so both sides are disjoint by construction;
 *   - libsmctrl (installed by the user, never shipped here): sgld_smctrl_open() loads it and
 *     sgld_smctrl_set_stream_mask() writes a 128-bit TPC mask on a stream.
 *
 * The CUDA driver (libcuda.so.1) is opened with dlopen() on first use and every entry point is
 * resolved with cuGetProcAddress(); the library is never linked against libcuda, so it loads and
 * answers queries (with an error code) on machines without a driver or GPU.
 *
 * Conventions:
 *   - every function returns 0 on success or a negative SGLD_E_* code; the human-readable reason
 *     of the last failure on the calling thread is returned by sgld_last_error();
 *   - counts are in SMs unless the name says TPC (a TPC is 2 SMs on Volta..Hopper);
 *   - streams are raw CUstream handles passed as void*; the caller wraps them (for PyTorch with
 *     torch.cuda.ExternalStream) and must not use them after the owning object is destroyed.
 */
#ifndef SGL_DUET_KERNEL_H
#define SGL_DUET_KERNEL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SGLD_API __attribute__((visibility("default")))
#else
#define SGLD_API
#endif

/* Bumped whenever a signature or struct below changes; the Python loader checks it. */
#define SGLD_ABI_VERSION 1

enum sgld_status {
  SGLD_OK = 0,
  SGLD_E_NO_DRIVER = -1,       /* libcuda.so.1 could not be opened or cuInit failed      */
  SGLD_E_DRIVER_TOO_OLD = -2,  /* the running driver lacks a needed entry point/version  */
  SGLD_E_CUDA = -3,            /* a driver call failed; sgld_last_error() names it        */
  SGLD_E_INVALID = -4,         /* bad argument (size out of range, NULL pointer, ...)     */
  SGLD_E_GRANTED = -5,         /* the driver granted fewer SMs than requested             */
  SGLD_E_NOT_BUILT = -6,       /* feature compiled out (e.g. smid kernel without nvcc)    */
  SGLD_E_NO_LIBSMCTRL = -7,    /* libsmctrl not loaded / symbol missing                   */
};

/* Library metadata. */
SGLD_API int sgld_abi_version(void);
/* Message describing the last failure on this thread ("" if none). Never NULL. */
SGLD_API const char* sgld_last_error(void);

/* ---- driver ---------------------------------------------------------------------------- */

/* Opens libcuda.so.1 and calls cuInit(0). Idempotent; the result of the first call is cached. */
SGLD_API int sgld_driver_open(void);
/* CUDA version of the running driver, e.g. 12040 for 12.4 (cuDriverGetVersion). */
SGLD_API int sgld_driver_version(int* version);
SGLD_API int sgld_device_count(int* count);
/* Compute capability and number of SMs of device `dev` (CUDA ordinal). */
SGLD_API int sgld_device_info(int dev, int* cc_major, int* cc_minor, int* num_sms);

/* ---- plain streams (primary context) -------------------------------------------------- */

/* Creates a non-blocking stream in the primary context of `dev` (retaining it). */
SGLD_API int sgld_stream_create(int dev, void** stream);
/* Destroys a stream made by sgld_stream_create and releases the primary context. */
SGLD_API int sgld_stream_destroy(int dev, void* stream);
SGLD_API int sgld_stream_synchronize(void* stream);

/* ---- green contexts -------------------------------------------------------------------- */

/* Where sgld_green_granularity() got its numbers. */
enum sgld_granularity_source {
  SGLD_GRAN_DRIVER = 1, /* 13.0+ fields minSmPartitionSize/smCoscheduledAlignment, confirmed */
  SGLD_GRAN_PROBE = 2,  /* measured by trial splits (no green context is created)            */
  SGLD_GRAN_TABLE = 3,  /* NVIDIA's per-architecture guideline (sm_90: 8 / 8)                */
};

/*
 * Smallest SM group a split can produce (`min_sms`) and the step in which larger groups grow
 * (`align_sms`), for split flags `flags` (0 or CU_DEV_SM_RESOURCE_SPLIT_* bits).
 * `total_sms` receives the device resource's SM count, `source` an sgld_granularity_source.
 * Needs driver >= 12.4.
 */
SGLD_API int sgld_green_granularity(int dev, unsigned flags, int* min_sms, int* align_sms,
                                    int* total_sms, int* source);

/*
 * One disjoint (decode, prefill) partition: a green context and a stream for each side.
 * decode_stream runs only on the decode group's `decode_sms` SMs, prefill_stream only on the
 * remaining `prefill_sms` SMs. `priv` is owned by the library.
 */
typedef struct sgld_green_pair {
  void* decode_stream;
  void* prefill_stream;
  int decode_sms;
  int prefill_sms;
  void* priv;
} sgld_green_pair;

/*
 * Splits the SMs of `dev` ONCE into a group of at least `decode_sms` SMs and the remainder, and
 * creates a green context and a non-blocking stream on each. Fails with SGLD_E_GRANTED if the
 * decode group has fewer SMs than asked or the remainder has fewer than `min_prefill_sms`.
 */
SGLD_API int sgld_green_pair_create(int dev, int decode_sms, int min_prefill_sms, unsigned flags,
                                    sgld_green_pair* out);
/* Destroys the streams and green contexts of a pair (synchronizing them first). */
SGLD_API int sgld_green_pair_destroy(sgld_green_pair* pair);

/* ---- libsmctrl -------------------------------------------------------------------------- */

/*
 * dlopen()s libsmctrl from `path` (NULL: "libsmctrl.so" on the library search path) and
 * resolves libsmctrl_set_stream_mask_ext (128-bit) and libsmctrl_set_stream_mask (64-bit).
 */
SGLD_API int sgld_smctrl_open(const char* path);
/* 1 if libsmctrl_set_stream_mask_ext was found, 0 if only the 64-bit setter exists. */
SGLD_API int sgld_smctrl_has_ext(void);
/*
 * Sets the TPC mask of `stream` to (hi << 64) | lo. A SET bit DISABLES that TPC: kernels
 * launched on the stream never run on it. Bit i is TPC i as libsmctrl numbers them (on Hopper
 * these are physical, pre-floorsweeping TPC ids). hi must be 0 without the _ext setter.
 */
SGLD_API int sgld_smctrl_set_stream_mask(void* stream, uint64_t lo, uint64_t hi);

/* ---- SM-id probe (tests and benchmarks) ----------------------------------------------- */

/* 1 if the %smid kernel was compiled into the library (needs nvcc at build time). */
SGLD_API int sgld_smid_available(void);
/*
 * Launches `nblocks` blocks of 32 threads on `stream`; block b writes its SM id to
 * ((int*)out)[b] after spinning `spin_ns` nanoseconds, with `smem_bytes` (<= 48 KiB) of dynamic
 * shared memory to limit blocks per SM. `out` is a device pointer. Asynchronous.
 */
SGLD_API int sgld_smid_record(void* stream, uint64_t out, int nblocks, uint64_t spin_ns,
                              unsigned smem_bytes);
/*
 * Captures the same launch into a CUDA graph on `capture_stream`, then launches the graph on
 * `launch_stream` and synchronizes it: shows on which SMs a replayed graph runs.
 */
SGLD_API int sgld_smid_record_graph(void* capture_stream, void* launch_stream, uint64_t out,
                                    int nblocks, uint64_t spin_ns, unsigned smem_bytes);

#ifdef __cplusplus
}
#endif

#endif /* SGL_DUET_KERNEL_H */
