// The row-normalisation kernels of RMSNorm, Mochi's gated residual RMSNorm and AdaLN (RMS or
// LayerNorm statistics) for rows of a [rows, hidden] view, shared by norm.cu (RMSNorm, gated
// residual) and adaln.cu (AdaLN): two units, so that the build compiles the two op families'
// device code in parallel (as one unit, its sm_90 pass was the build's longest). One template
// covers all four: load the row once into registers as
// 16-byte vectors, reduce the statistics in fp32 (warp shuffles, plus shared memory when a row
// spans several warps), then apply the op's epilogue and store. Rows whose size or alignment
// does not fit 16-byte vectors take a scalar two-pass kernel.
#pragma once

#include "../ltx_kernels.h"
#include "common.cuh"

#include <algorithm>
#include <string>
#include <type_traits>

// Tuning (bench/NOTES.md has the measurements behind these choices, H200, bf16 H = 3072):
// block-per-row kernels of plain RMSNorm and the gated residual keep <= 256 threads per row
// with registers capped for 6 resident blocks; AdaLN does best with <= 128 threads per row and
// 10 resident blocks. Loading the per-row operands before the reduction costs more in
// occupancy than it saves in latency, so it is off.
#ifndef LTX_NORM_PREFETCH
#define LTX_NORM_PREFETCH 0
#endif
#ifndef LTX_LAYER_ONEPASS  // LayerNorm statistics: one shifted (sum, sumsq) reduction
#define LTX_LAYER_ONEPASS 1
#endif

namespace ltx {
namespace {

// rows < 2^31 (checked on the host), so 32-bit division suffices.
__device__ __forceinline__ int64_t row_offset(const RowMap& m, int64_t r) {
  if (m.inner == 1) return r * m.outer_stride;
  const uint32_t rr = static_cast<uint32_t>(r);
  const uint32_t inner = static_cast<uint32_t>(m.inner);
  const uint32_t q = rr / inner;
  return static_cast<int64_t>(q) * m.outer_stride + static_cast<int64_t>(rr - q * inner) * m.inner_stride;
}

template <int G>
__device__ __forceinline__ float reduce(float v, float2* scratch) {
  if constexpr (G > 0) {
    return group_sum<G>(v);
  } else {
    return block_sum(v, reinterpret_cast<float*>(scratch));
  }
}

template <int G>
__device__ __forceinline__ float2 reduce2(float2 v, float2* scratch) {
  if constexpr (G > 0) {
    return make_float2(group_sum<G>(v.x), group_sum<G>(v.y));
  } else {
    return block_sum2(v, scratch);
  }
}

// Epilogue of the fused kinds: `y` is the normalized, weighted value; (a, b) are
// (residual, gate) or (scale, shift).
template <NormKind K, typename T>
__device__ __forceinline__ float epilogue(float y, float a, float b) {
  if constexpr (K == NormKind::GatedResidual) {
    return fmaf(tanh_fast<!std::is_same_v<T, float>>(b), y, a);
  } else {
    return fmaf(y, 1.0f + a, b);
  }
}

// G > 0: groups of G lanes own one row each (G <= 32). G == 0: the block owns one row.
// Each thread keeps VPT 16-byte vectors of its row in registers between the two phases. The
// weight and the per-row operands (residual, gate, scale, shift) do not depend on the
// statistics: for VPT <= 4 their loads are issued together with x's, before the reduction, so
// a row costs one memory latency instead of two.
struct NormTuning {
  int max_threads;  // block-per-row kernels (VPT < 8): threads per row at most
  int min_blocks;   // __launch_bounds__ min resident blocks (caps registers)
};
constexpr NormTuning tuning(NormKind k) {
  return (k == NormKind::Rms || k == NormKind::GatedResidual) ? NormTuning{256, 6}
                                                              : NormTuning{128, 10};
}

// Block size bound per configuration: warp-group kernels launch 256 threads, block-per-row
// kernels at most tuning(K).max_threads (512 with 8 vectors per thread).
constexpr int kMaxThreads(NormKind k, int vpt, int g) {
  return g > 0 ? 256 : (vpt < 8 ? tuning(k).max_threads : 512);
}
// Resident threads per SM of the arch being compiled (sm_75: 1024); bounds the min-blocks hint
// so that ptxas never has to ignore it.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
constexpr int kThreadsPerSm = 1024;
#else
constexpr int kThreadsPerSm = 2048;
#endif
constexpr int kMinBlocks(NormKind k, int vpt, int g) {
  if (g > 0 || vpt == 8) return 1;
  // The gated kind holds x and the residual: 4 vectors each do not fit the 6-block cap.
  const int want = k == NormKind::GatedResidual && vpt == 4 ? 4 : tuning(k).min_blocks;
  const int fit = kThreadsPerSm / kMaxThreads(k, vpt, g);
  return want < fit ? want : fit;
}

template <typename T, NormKind K, int VPT, int G>
__global__ void __launch_bounds__(kMaxThreads(K, VPT, G), kMinBlocks(K, VPT, G))
    norm_vec_kernel(const NormParams p) {
  constexpr int N = kVec<T>;
  constexpr bool kPrefetch = LTX_NORM_PREFETCH && VPT <= 4;
  constexpr bool kTwoOperands = K != NormKind::Rms;  // (a, b) = (residual, gate) or (scale, shift)
  __shared__ float2 scratch[32];
  const int nvec = static_cast<int>(p.hidden / N);
  int64_t row;
  int lane;
  int nthreads;
  if constexpr (G > 0) {
    row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / G) + threadIdx.x / G;
    lane = threadIdx.x % G;
    nthreads = G;
  } else {
    row = blockIdx.x;
    lane = threadIdx.x;
    nthreads = blockDim.x;
  }
  // Lanes past the last row still take part in the shuffles; they load and store nothing.
  const bool valid = row < p.rows;
  const uint4 zero = make_uint4(0u, 0u, 0u, 0u);

  const T* xr = static_cast<const T*>(p.x.ptr) + (valid ? row_offset(p.x, row) : 0);
  const T* wr = static_cast<const T*>(p.weight);
  const T* ar = nullptr;
  const T* br = nullptr;
  if (valid) {
    if constexpr (K == NormKind::GatedResidual) {
      ar = static_cast<const T*>(p.residual.ptr) + row_offset(p.residual, row);
      br = static_cast<const T*>(p.gate.ptr) + row_offset(p.gate, row);
    } else if constexpr (kTwoOperands) {
      ar = static_cast<const T*>(p.scale.ptr) + row_offset(p.scale, row);
      br = static_cast<const T*>(p.shift.ptr) + row_offset(p.shift, row);
    }
  }

  uint4 xv[VPT];
  uint4 wv[kPrefetch ? VPT : 1];
  uint4 av[kTwoOperands ? VPT : 1];  // the residual is always kept; scale only with kPrefetch
  uint4 bv[kTwoOperands && kPrefetch ? VPT : 1];
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int v = lane + i * nthreads;
    const bool in = valid && v < nvec;
    xv[i] = in ? stream16(xr + v * N) : zero;
    if constexpr (kPrefetch) {
      wv[i] = (in && wr != nullptr) ? load16(wr + v * N) : zero;
    }
    if constexpr (K == NormKind::GatedResidual) {
      av[i] = in ? stream16(ar + v * N) : zero;  // residual: read once
    } else if constexpr (kTwoOperands && kPrefetch) {
      av[i] = in ? load16(ar + v * N) : zero;
    }
    if constexpr (kTwoOperands && kPrefetch) {
      bv[i] = in ? load16(br + v * N) : zero;
    }
  }

  const float inv_h = 1.0f / static_cast<float>(p.hidden);
  float mean = 0.0f;
  float rstd;
  if constexpr (K == NormKind::AdaLnLayer && !LTX_LAYER_ONEPASS) {
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      float f[N];
      unpack<T>(xv[i], f);
#pragma unroll
      for (int j = 0; j < N; ++j) acc += f[j];
    }
    mean = reduce<G>(acc, scratch) * inv_h;
    float sq = 0.0f;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      if (lane + i * nthreads < nvec) {
        float f[N];
        unpack<T>(xv[i], f);
#pragma unroll
        for (int j = 0; j < N; ++j) sq += (f[j] - mean) * (f[j] - mean);
      }
    }
    rstd = rsqrtf(reduce<G>(sq, scratch) * inv_h + p.eps);
  } else if constexpr (K == NormKind::AdaLnLayer) {
    // One reduction of (sum d, sum d^2) with d = x - x[0]: shifting by a value of the row keeps
    // E[d^2] - E[d]^2 free of the cancellation that E[x^2] - E[x]^2 has for large means.
    const float ref = valid ? to_float(xr[0]) : 0.0f;
    float2 acc = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      if (lane + i * nthreads < nvec) {
        float f[N];
        unpack<T>(xv[i], f);
#pragma unroll
        for (int j = 0; j < N; ++j) {
          const float dv = f[j] - ref;
          acc.x += dv;
          acc.y += dv * dv;
        }
      }
    }
    acc = reduce2<G>(acc, scratch);
    const float dmean = acc.x * inv_h;
    mean = ref + dmean;
    rstd = rsqrtf(fmaxf(acc.y * inv_h - dmean * dmean, 0.0f) + p.eps);
  } else {
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      float f[N];
      unpack<T>(xv[i], f);
#pragma unroll
      for (int j = 0; j < N; ++j) acc += f[j] * f[j];
    }
    acc = reduce<G>(acc, scratch);
    rstd = rsqrtf(acc * inv_h + p.eps);
  }
  if (!valid) return;

  T* outr = static_cast<T*>(p.out) + row * p.hidden;
  const float nshift = -mean * rstd;  // (x - mean) * rstd == fma(x, rstd, nshift)
  // Separate loops with and without a weight: no multiply by 1 per element.
  auto finish = [&](auto has_w) {
    constexpr bool kHasW = decltype(has_w)::value;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int v = lane + i * nthreads;
      if (v < nvec) {
        float f[N], y[N];
        [[maybe_unused]] float w[N], a[N], b[N];
        unpack<T>(xv[i], f);
        if constexpr (kHasW) unpack<T>(kPrefetch ? wv[i] : load16(wr + v * N), w);
        if constexpr (kTwoOperands) {
          if constexpr (kPrefetch) {
            unpack<T>(av[i], a);
            unpack<T>(bv[i], b);
          } else {
            unpack<T>(K == NormKind::GatedResidual ? av[i] : load16(ar + v * N), a);
            unpack<T>(load16(br + v * N), b);
          }
        }
#pragma unroll
        for (int j = 0; j < N; ++j) {
          float n = fmaf(f[j], rstd, nshift);
          if constexpr (kHasW) n *= w[j];
          if constexpr (kTwoOperands) {
            y[j] = epilogue<K, T>(n, a[j], b[j]);
          } else {
            y[j] = n;
          }
        }
        store16(outr + v * N, pack<T>(y));
      }
    }
  };
  if (wr != nullptr) {
    finish(std::true_type{});
  } else {
    finish(std::false_type{});
  }
}

// Any hidden size or alignment: one block per row, two passes over the row (the second pass
// re-reads from cache), one element per access.
template <typename T, NormKind K>
__global__ void __launch_bounds__(256) norm_scalar_kernel(const NormParams p) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int64_t h = p.hidden;
  const float inv_h = 1.0f / static_cast<float>(h);
  const T* xr = static_cast<const T*>(p.x.ptr) + row_offset(p.x, row);
  float acc = 0.0f;
  for (int64_t i = threadIdx.x; i < h; i += blockDim.x) {
    const float f = to_float(xr[i]);
    acc += (K == NormKind::AdaLnLayer) ? f : f * f;
  }
  acc = block_sum(acc, scratch);
  float mean = 0.0f;
  float rstd;
  if constexpr (K == NormKind::AdaLnLayer) {
    mean = acc * inv_h;
    float sq = 0.0f;
    for (int64_t i = threadIdx.x; i < h; i += blockDim.x) {
      const float d = to_float(xr[i]) - mean;
      sq += d * d;
    }
    sq = block_sum(sq, scratch);
    rstd = rsqrtf(sq * inv_h + p.eps);
  } else {
    rstd = rsqrtf(acc * inv_h + p.eps);
  }
  T* outr = static_cast<T*>(p.out) + row * h;
  const T* wr = static_cast<const T*>(p.weight);
  const T* ar = nullptr;
  const T* br = nullptr;
  if constexpr (K == NormKind::GatedResidual) {
    ar = static_cast<const T*>(p.residual.ptr) + row_offset(p.residual, row);
    br = static_cast<const T*>(p.gate.ptr) + row_offset(p.gate, row);
  } else if constexpr (K == NormKind::AdaLnRms || K == NormKind::AdaLnLayer) {
    ar = static_cast<const T*>(p.scale.ptr) + row_offset(p.scale, row);
    br = static_cast<const T*>(p.shift.ptr) + row_offset(p.shift, row);
  }
  for (int64_t i = threadIdx.x; i < h; i += blockDim.x) {
    float y = (to_float(xr[i]) - mean) * rstd;
    if (wr != nullptr) y *= to_float(wr[i]);
    if constexpr (K != NormKind::Rms) y = epilogue<K, T>(y, to_float(ar[i]), to_float(br[i]));
    outr[i] = from_float<T>(y);
  }
}

template <typename T, NormKind K, int VPT, int G>
void launch_vec(const NormParams& p, int threads, cudaStream_t stream) {
  int64_t blocks;
  if constexpr (G > 0) {
    blocks = (p.rows + threads / G - 1) / (threads / G);
  } else {
    blocks = p.rows;
  }
  norm_vec_kernel<T, K, VPT, G><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(p);
}

// Launch configuration from the hidden size (in 16-byte vectors): rows of up to 16 vectors
// share a warp (8 or 16 lanes each, e.g. head_dim 64/128 QK-norm), rows of up to 128 vectors
// take a warp, wider rows one block with the fewest of 1, 2, 4 vectors per thread that keeps
// the block within tuning(K).max_threads (plain RMSNorm: at least 2), else 8 per thread (up to
// 4096 vectors, e.g. 32768 bf16, 512 threads); the scalar kernel beyond.
template <typename T, NormKind K>
void launch_norm_typed(const NormParams& p, cudaStream_t stream) {
  constexpr int N = kVec<T>;
  bool vec = p.hidden % N == 0 && aligned16(p.out) && rows_vectorizable(p.x, N) &&
             (p.weight == nullptr || aligned16(p.weight));
  if constexpr (K == NormKind::GatedResidual) {
    vec = vec && rows_vectorizable(p.residual, N) && rows_vectorizable(p.gate, N);
  } else if constexpr (K != NormKind::Rms) {
    vec = vec && rows_vectorizable(p.scale, N) && rows_vectorizable(p.shift, N);
  }
  const int64_t nvec = p.hidden / N;
  if (vec && nvec <= 4096) {
    if (nvec <= 8) return launch_vec<T, K, 1, 8>(p, 256, stream);
    if (nvec <= 16) return launch_vec<T, K, 1, 16>(p, 256, stream);
    if (nvec <= 32) return launch_vec<T, K, 1, 32>(p, 256, stream);
    if (nvec <= 128) return launch_vec<T, K, 4, 32>(p, 256, stream);
    auto threads_for = [&](int vpt) {
      return static_cast<int>(((nvec + vpt - 1) / vpt + 31) / 32 * 32);
    };
    constexpr int kT = tuning(K).max_threads;
    // Plain RMSNorm rows of 129-256 vectors (LTX-Video's 2048 bf16) take two per thread:
    // H200, bench.py's CUDA graphs (hot and cold L2), 7-8% faster than one per thread at 4x1024
    // and 2x4992 rows of 2048 bf16 and not slower at 1x or 2x1024 (bench/NOTES.md, session 24).
    if (K == NormKind::Rms && nvec > 128 && nvec <= 256) {
      return launch_vec<T, K, 2, 0>(p, threads_for(2), stream);
    }
    if (nvec <= kT) return launch_vec<T, K, 1, 0>(p, threads_for(1), stream);
    if (nvec <= 2 * kT) return launch_vec<T, K, 2, 0>(p, threads_for(2), stream);
    if (nvec <= 4 * kT) return launch_vec<T, K, 4, 0>(p, threads_for(4), stream);
    return launch_vec<T, K, 8, 0>(p, threads_for(8), stream);
  }
  const int threads = p.hidden >= 256 ? 256 : static_cast<int>((p.hidden + 31) / 32 * 32);
  norm_scalar_kernel<T, K><<<static_cast<unsigned>(p.rows), threads, 0, stream>>>(p);
}

const char* op_name(NormKind k) {
  switch (k) {
    case NormKind::Rms:
      return "rms_norm";
    case NormKind::GatedResidual:
      return "fused_residual_gated_rms_norm";
    default:
      return "adaln";
  }
}

// The checks and the dtype dispatch around the kernels of the kinds `Ks` (one op family).
template <NormKind... Ks>
Status launch_norm_family(const NormParams& p) {
  if (p.rows == 0 || p.hidden == 0) return {};
  const char* op = op_name(p.kind);
  if (p.rows >= (int64_t{1} << 31)) {
    return fail(std::string("ltx_kernels.") + op + ": more than 2^31 rows are not supported");
  }
  const cudaStream_t stream = p.stream;
  const bool dispatched = LTX_DISPATCH(p.dtype, [&] {
    ((p.kind == Ks ? launch_norm_typed<scalar_t, Ks>(p, stream) : void()), ...);
  });
  if (!dispatched) return unsupported_dtype(op, p.dtype);
  return check_launch(op, p.dtype, p.device_index);
}

}  // namespace

// AdaLN (RMS or LayerNorm statistics), compiled in adaln.cu.
Status launch_adaln(const NormParams& p);

}  // namespace ltx
