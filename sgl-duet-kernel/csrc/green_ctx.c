/* Green-context partitions: granularity query and one-shot (decode, prefill) splits. */
#include <stdlib.h>
#include <string.h>

#include "driver.h"

typedef struct green_priv {
  CUgreenCtx ctx[2]; /* [0] decode, [1] prefill */
  CUstream stream[2];
} green_priv;

static int need_green(const sgld_driver** drv) {
  int rc = sgld_driver_get(drv);
  if (rc != SGLD_OK) return rc;
  if ((*drv)->version < 12040)
    return sgld_fail(SGLD_E_DRIVER_TOO_OLD,
                     "green contexts need a CUDA 12.4+ driver; this driver is CUDA %d.%d",
                     (*drv)->version / 1000, (*drv)->version % 1000 / 10);
  SGLD_REQUIRE(*drv, cuDeviceGetDevResource);
  SGLD_REQUIRE(*drv, cuDevSmResourceSplitByCount);
  SGLD_REQUIRE(*drv, cuDevResourceGenerateDesc);
  SGLD_REQUIRE(*drv, cuGreenCtxCreate);
  SGLD_REQUIRE(*drv, cuGreenCtxDestroy);
  return SGLD_OK;
}

static int device_sm_resource(const sgld_driver* drv, int dev, CUdevice* d, CUdevResource* res) {
  memset(res, 0, sizeof *res); /* fields a 12.x driver does not fill must read as 0 */
  SGLD_CHECK(drv, drv->cuDeviceGet(d, dev));
  SGLD_CHECK(drv, drv->cuDeviceGetDevResource(*d, res, CU_DEV_RESOURCE_TYPE_SM));
  return SGLD_OK;
}

/* SM count of the single group a split with `min_count` would produce, or -1. */
static int trial_split(const sgld_driver* drv, const CUdevResource* full, unsigned flags,
                       unsigned min_count) {
  CUdevResource group, rest;
  unsigned n = 1;
  memset(&group, 0, sizeof group);
  memset(&rest, 0, sizeof rest);
  if (drv->cuDevSmResourceSplitByCount(&group, &n, full, &rest, flags, min_count) !=
          CUDA_SUCCESS ||
      n != 1)
    return -1;
  return (int)group.sm.smCount;
}

static void table_granularity(int cc_major, int* min_sms, int* align_sms) {
  /* NVIDIA's guideline in the green-context docs of CUDA 12.4 - 13.0. */
  if (cc_major >= 9) {
    *min_sms = 8, *align_sms = 8;
  } else if (cc_major == 8) {
    *min_sms = 4, *align_sms = 2;
  } else {
    *min_sms = 2, *align_sms = 2;
  }
}

SGLD_API int sgld_green_granularity(int dev, unsigned flags, int* min_sms, int* align_sms,
                                    int* total_sms, int* source) {
  const sgld_driver* drv;
  int rc = need_green(&drv);
  if (rc != SGLD_OK) return rc;
  if (!min_sms || !align_sms || !total_sms || !source)
    return sgld_fail(SGLD_E_INVALID, "NULL output");
  CUdevice d;
  CUdevResource full;
  if ((rc = device_sm_resource(drv, dev, &d, &full)) != SGLD_OK) return rc;
  *total_sms = (int)full.sm.smCount;
  /* Always probe: the smallest group, then how far one more SM rounds up (creates nothing). A
   * 13.x driver also reports minSmPartitionSize/smCoscheduledAlignment, but the alignment need
   * not be the step a split really rounds to (132 SMs is no multiple of 8), so the fields are
   * only trusted where the probe confirms them, or where no probe split succeeds. */
  int smallest = trial_split(drv, &full, flags, 1);
  int next = smallest > 0 ? trial_split(drv, &full, flags, (unsigned)smallest + 1) : -1;
  int fields = flags == 0 && drv->version >= 13000 && full.sm.minSmPartitionSize > 0 &&
               full.sm.smCoscheduledAlignment > 0;
  if (smallest > 0 && next > smallest) {
    *min_sms = smallest;
    *align_sms = next - smallest;
    *source = fields && (unsigned)smallest == full.sm.minSmPartitionSize &&
                      (unsigned)(next - smallest) == full.sm.smCoscheduledAlignment
                  ? SGLD_GRAN_DRIVER
                  : SGLD_GRAN_PROBE;
    return SGLD_OK;
  }
  if (fields) {
    *min_sms = (int)full.sm.minSmPartitionSize;
    *align_sms = (int)full.sm.smCoscheduledAlignment;
    *source = SGLD_GRAN_DRIVER;
    return SGLD_OK;
  }
  int major = 0;
  SGLD_CHECK(drv, drv->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                            d));
  table_granularity(major, min_sms, align_sms);
  *source = SGLD_GRAN_TABLE;
  return SGLD_OK;
}

static CUresult make_side(const sgld_driver* drv, CUdevice d, CUdevResource* res, CUgreenCtx* ctx,
                          CUstream* stream, const char** what) {
  CUdevResourceDesc desc;
  CUresult cr;
  *what = "cuDevResourceGenerateDesc";
  if ((cr = drv->cuDevResourceGenerateDesc(&desc, res, 1)) != CUDA_SUCCESS) return cr;
  *what = "cuGreenCtxCreate";
  if ((cr = drv->cuGreenCtxCreate(ctx, desc, d, CU_GREEN_CTX_DEFAULT_STREAM)) != CUDA_SUCCESS)
    return cr;
  if (drv->cuGreenCtxStreamCreate) {
    *what = "cuGreenCtxStreamCreate";
    return drv->cuGreenCtxStreamCreate(stream, *ctx, CU_STREAM_NON_BLOCKING, 0);
  }
  /* 12.4 driver: make the green context current and create an ordinary stream in it. */
  CUcontext plain, popped;
  *what = "cuCtxFromGreenCtx";
  if ((cr = drv->cuCtxFromGreenCtx(&plain, *ctx)) != CUDA_SUCCESS) return cr;
  *what = "cuCtxPushCurrent";
  if ((cr = drv->cuCtxPushCurrent(plain)) != CUDA_SUCCESS) return cr;
  *what = "cuStreamCreate";
  cr = drv->cuStreamCreate(stream, CU_STREAM_NON_BLOCKING);
  drv->cuCtxPopCurrent(&popped);
  return cr;
}

static void destroy_priv(const sgld_driver* drv, green_priv* p) {
  for (int i = 0; i < 2; ++i) {
    if (p->stream[i]) {
      drv->cuStreamSynchronize(p->stream[i]);
      drv->cuStreamDestroy(p->stream[i]);
    }
    if (p->ctx[i]) drv->cuGreenCtxDestroy(p->ctx[i]);
  }
  free(p);
}

SGLD_API int sgld_green_pair_create(int dev, int decode_sms, int min_prefill_sms, unsigned flags,
                                    sgld_green_pair* out) {
  const sgld_driver* drv;
  int rc = need_green(&drv);
  if (rc != SGLD_OK) return rc;
  if (out == NULL) return sgld_fail(SGLD_E_INVALID, "out is NULL");
  memset(out, 0, sizeof *out);
  CUdevice d;
  CUdevResource full, side[2];
  if ((rc = device_sm_resource(drv, dev, &d, &full)) != SGLD_OK) return rc;
  if (decode_sms <= 0 || decode_sms >= (int)full.sm.smCount)
    return sgld_fail(SGLD_E_INVALID, "decode_sms=%d outside (0, %u)", decode_sms,
                     full.sm.smCount);
  /* ONE split: group = decode, remainder = prefill; siblings of one split are disjoint. */
  unsigned n = 1;
  memset(side, 0, sizeof side);
  SGLD_CHECK(drv, drv->cuDevSmResourceSplitByCount(&side[0], &n, &full, &side[1], flags,
                                                   (unsigned)decode_sms));
  int got_d = n == 1 ? (int)side[0].sm.smCount : 0;
  int got_p = n == 1 ? (int)side[1].sm.smCount : 0;
  if (got_d < decode_sms || got_p < min_prefill_sms || got_p <= 0)
    return sgld_fail(SGLD_E_GRANTED,
                     "green-context split of %u SMs granted decode=%d prefill=%d SMs, asked "
                     "decode>=%d prefill>=%d",
                     full.sm.smCount, got_d, got_p, decode_sms, min_prefill_sms);
  green_priv* p = calloc(1, sizeof *p);
  if (p == NULL) return sgld_fail(SGLD_E_INVALID, "out of host memory");
  for (int i = 0; i < 2; ++i) {
    const char* what = "";
    CUresult cr = make_side(drv, d, &side[i], &p->ctx[i], &p->stream[i], &what);
    if (cr != CUDA_SUCCESS) {
      rc = sgld_fail_cuda(drv, cr, what);
      destroy_priv(drv, p);
      return rc;
    }
  }
  out->decode_stream = p->stream[0];
  out->prefill_stream = p->stream[1];
  out->decode_sms = got_d;
  out->prefill_sms = got_p;
  out->priv = p;
  return SGLD_OK;
}

SGLD_API int sgld_green_pair_destroy(sgld_green_pair* pair) {
  const sgld_driver* drv;
  int rc = sgld_driver_get(&drv);
  if (rc != SGLD_OK) return rc;
  if (pair == NULL || pair->priv == NULL) return SGLD_OK;
  destroy_priv(drv, (green_priv*)pair->priv);
  memset(pair, 0, sizeof *pair);
  return SGLD_OK;
}
