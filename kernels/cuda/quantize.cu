// Row-wise FP8 (e4m3) quantization of activations for FP8 matrix products (QuantParams in
// ltx_kernels.h), optionally through gelu_tanh first: the feed-forward's GELU and the
// quantization of its [tokens, 4 * hidden] output in one pass, which torch.compile otherwise
// writes as a reduction that reads the row twice.
#include "block_common.cuh"

namespace ltx {
namespace {

constexpr int kQuantMaxThreads = 256;
constexpr int kQuantRowThreads = 128;
constexpr int kQuantWarpRows = 4;  // rows (warps) per block of the warp-per-row kernel

// v = x, or gelu_tanh(x) rounded to T as the gelu_tanh op writes it, over one 16-byte vector.
template <typename T, bool GELU>
__device__ __forceinline__ uint4 activate(uint4 v) {
  if constexpr (GELU) {
    constexpr int N = kVec<T>;
    float f[N];
    unpack<T>(v, f);
#pragma unroll
    for (int j = 0; j < N; ++j) f[j] = gelu_tanh_f(f[j]);
    return pack<T>(f);
  } else {
    return v;
  }
}

// Rows of up to 32 * VPT vectors (LTX's 2048 in bf16: VPT 8): a warp per row, VPT 16-byte
// vectors per lane in registers, the amax by shuffles alone; kQuantWarpRows rows per block.
template <typename T, int VPT, bool GELU>
__global__ void __launch_bounds__(32 * kQuantWarpRows) quantize_warp_kernel(const QuantParams p) {
  constexpr int N = kVec<T>;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kQuantWarpRows + threadIdx.x / 32;
  if (row >= p.rows) return;  // the whole warp
  const int lane = threadIdx.x & 31;
  const int nvec = static_cast<int>(p.hidden / N);
  const T* xr = static_cast<const T*>(p.x.ptr) + row_at(p.x, static_cast<uint32_t>(row));
  uint4 v[VPT];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int c = lane + i * 32;
    if (c < nvec) v[i] = stream16_once(xr + c * N);
  }
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int c = lane + i * 32;
    if (c < nvec) {
      v[i] = activate<T, GELU>(v[i]);
      float f[N];
      unpack<T>(v[i], f);
#pragma unroll
      for (int j = 0; j < N; ++j) amax = amax_step(amax, f[j]);
    }
  }
  const float scale = fp8_scale(warp_amax(amax));
  const float inv = fp8_inverse(scale);
  if (lane == 0) p.scale[row] = scale;
  uint8_t* out = p.values + row * p.hidden;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int c = lane + i * 32;
    if (c < nvec) {
      float f[N];
      unpack<T>(v[i], f);
      store_e4m3<N>(out + c * N, f, inv);
    }
  }
}

// Wider rows: one block per row, VPT 16-byte vectors per thread kept in registers across the
// reduction.
template <typename T, int VPT, bool GELU>
__global__ void __launch_bounds__(kQuantMaxThreads) quantize_vec_kernel(const QuantParams p) {
  constexpr int N = kVec<T>;
  __shared__ float scratch[32];
  const uint32_t row = blockIdx.x;
  const int nvec = static_cast<int>(p.hidden / N);
  const T* xr = static_cast<const T*>(p.x.ptr) + row_at(p.x, row);
  uint4 v[VPT];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int c = threadIdx.x + i * blockDim.x;
    if (c < nvec) v[i] = stream16_once(xr + c * N);
  }
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int c = threadIdx.x + i * blockDim.x;
    if (c < nvec) {
      v[i] = activate<T, GELU>(v[i]);
      float f[N];
      unpack<T>(v[i], f);
#pragma unroll
      for (int j = 0; j < N; ++j) amax = amax_step(amax, f[j]);
    }
  }
  const float scale = fp8_scale(block_amax(amax, scratch));
  const float inv = fp8_inverse(scale);
  if (threadIdx.x == 0) p.scale[row] = scale;
  uint8_t* out = p.values + static_cast<int64_t>(row) * p.hidden;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int c = threadIdx.x + i * blockDim.x;
    if (c < nvec) {
      float f[N];
      unpack<T>(v[i], f);
      store_e4m3<N>(out + c * N, f, inv);
    }
  }
}

// Any size or alignment: one block per row, the row read twice (GELU recomputed).
template <typename T, bool GELU>
__global__ void __launch_bounds__(kQuantMaxThreads) quantize_scalar_kernel(const QuantParams p) {
  __shared__ float scratch[32];
  const uint32_t row = blockIdx.x;
  const T* xr = static_cast<const T*>(p.x.ptr) + row_at(p.x, row);
  auto value = [&](int64_t i) {
    const float f = to_float(xr[i]);
    return GELU ? to_float(from_float<T>(gelu_tanh_f(f))) : f;
  };
  float amax = 0.0f;
  for (int64_t i = threadIdx.x; i < p.hidden; i += blockDim.x) amax = amax_step(amax, value(i));
  const float scale = fp8_scale(block_amax(amax, scratch));
  const float inv = fp8_inverse(scale);
  if (threadIdx.x == 0) p.scale[row] = scale;
  uint8_t* out = p.values + static_cast<int64_t>(row) * p.hidden;
  for (int64_t i = threadIdx.x; i < p.hidden; i += blockDim.x) out[i] = to_e4m3(value(i), inv);
}

template <typename T, bool GELU>
void launch_quantize_typed(const QuantParams& p, cudaStream_t stream) {
  constexpr int N = kVec<T>;
  const int64_t nvec = p.hidden / N;
  const unsigned rows = static_cast<unsigned>(p.rows);
  const bool vec = p.hidden % N == 0 && rows_vectorizable(p.x, N) && aligned16(p.values);
  auto threads_for = [&](int vpt) { return static_cast<int>(((nvec + vpt - 1) / vpt + 31) / 32 * 32); };
  const unsigned warp_blocks = static_cast<unsigned>((p.rows + kQuantWarpRows - 1) / kQuantWarpRows);
  constexpr int kWarpThreads = 32 * kQuantWarpRows;
  if (vec && nvec <= 32) {
    quantize_warp_kernel<T, 1, GELU><<<warp_blocks, kWarpThreads, 0, stream>>>(p);
  } else if (vec && nvec <= 64) {
    quantize_warp_kernel<T, 2, GELU><<<warp_blocks, kWarpThreads, 0, stream>>>(p);
  } else if (vec && nvec <= 128) {
    quantize_warp_kernel<T, 4, GELU><<<warp_blocks, kWarpThreads, 0, stream>>>(p);
  } else if (vec && nvec <= 256) {
    quantize_warp_kernel<T, 8, GELU><<<warp_blocks, kWarpThreads, 0, stream>>>(p);
  } else if (vec && nvec <= 4 * kQuantRowThreads) {
    quantize_vec_kernel<T, 4, GELU><<<rows, threads_for(4), 0, stream>>>(p);
  } else if (vec && nvec <= 8 * kQuantMaxThreads) {
    quantize_vec_kernel<T, 8, GELU><<<rows, threads_for(8), 0, stream>>>(p);
  } else {
    quantize_scalar_kernel<T, GELU><<<rows, kQuantMaxThreads, 0, stream>>>(p);
  }
}

}  // namespace

Status launch_quantize(const QuantParams& p) {
  const char* op = p.gelu ? "gelu_quantize_fp8" : "quantize_fp8";
  if (p.rows == 0 || p.hidden == 0) return {};
  if (p.rows >= (int64_t{1} << 31)) {
    return fail(std::string("ltx_kernels.") + op + ": more than 2^31 rows are not supported");
  }
  const cudaStream_t stream = p.stream;
  const bool dispatched = LTX_DISPATCH(p.dtype, [&] {
    if (p.gelu) {
      launch_quantize_typed<scalar_t, true>(p, stream);
    } else {
      launch_quantize_typed<scalar_t, false>(p, stream);
    }
  });
  if (!dispatched) return unsupported_dtype(op, p.dtype);
  return check_launch(op, p.dtype, p.device_index);
}

}  // namespace ltx
