// Device helpers shared by the block-level fusions (block.cu: q/k norm + RoPE; residual.cu:
// residual updates).
#pragma once

#include "../ltx_kernels.h"
#include "common.cuh"

namespace ltx {
namespace {

// Row r of a RowMap (ltx_kernels.h); r < 2^31 is checked on the host.
__device__ __forceinline__ int64_t row_at(const RowMap& m, uint32_t r) {
  if (m.inner == 1) return static_cast<int64_t>(r) * m.outer_stride;
  const uint32_t inner = static_cast<uint32_t>(m.inner);
  const uint32_t q = r / inner;
  return static_cast<int64_t>(q) * m.outer_stride + static_cast<int64_t>(r - q * inner) * m.inner_stride;
}

// R independent block-wide sums in one barrier round; `scratch` holds >= 32 * R floats. Used
// once per kernel, so the scratch needs no barrier before it is written.
template <int R>
__device__ __forceinline__ void block_sum_n(float (&v)[R], float* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int nwarps = (blockDim.x + 31) >> 5;
#pragma unroll
  for (int i = 0; i < R; ++i) v[i] = group_sum<32>(v[i]);
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < R; ++i) scratch[warp * R + i] = v[i];
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < R; ++i) {
    float s = 0.0f;
    for (int w = 0; w < nwarps; ++w) s += scratch[w * R + i];
    v[i] = s;
  }
}

// Rounds f to T and back, as a separate op writing T would.
template <typename T>
__device__ __forceinline__ float round_to(float f) {
  return to_float(from_float<T>(f));
}

}  // namespace
}  // namespace ltx
