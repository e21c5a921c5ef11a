// SM-id probe: each block records the SM it ran on. Compiled by nvcc into a fatbin that
// smid.c embeds and loads through the driver's library API (no CUDA runtime involved).

__device__ __forceinline__ unsigned long long sgld_global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

extern "C" __global__ void sgld_record_smid(int* out, unsigned long long spin_ns) {
  if (threadIdx.x != 0) return;
  unsigned int smid;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  // Keep the block resident for a while so later blocks must spread to other SMs.
  const unsigned long long start = sgld_global_ns();
  while (sgld_global_ns() - start < spin_ns) {
  }
  out[blockIdx.x] = static_cast<int>(smid);
}
