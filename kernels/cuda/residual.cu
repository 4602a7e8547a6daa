// Residual updates of LTX-Video-style transformer blocks: h + y * gate (flat), optionally
// followed by AdaLN-RMS of the result with both outputs written (block per row), the norm
// optionally quantized to FP8 per row (QuantParams in ltx_kernels.h). Split from
// block.cu (q/k norm + RoPE) so the two units compile side by side.
// Every access is a 16-byte vector where sizes and alignment allow; scalar kernels cover the rest.
#include "block_common.cuh"

#include <string>

namespace ltx {
namespace {

constexpr int kFlatThreads = 256;
constexpr int kResidualRowThreads = 128;  // block-per-row AdaLN: bench/NOTES.md step 7
constexpr int64_t kFlatLimit = int64_t{1} << 31;

// ---- residual updates ----------------------------------------------------------------------
template <typename T>
__device__ __forceinline__ float residual_value(float h, float y, float g, bool has_gate) {
  return has_gate ? fmaf(y, g, h) : h + y;
}

// Gated: flat over the output's 16-byte vectors (< 2^31).
template <typename T>
__global__ void __launch_bounds__(kFlatThreads) residual_flat_kernel(const ResidualParams p,
                                                                     const FastDiv row_vecs,
                                                                     uint32_t total) {
  constexpr int N = kVec<T>;
  const uint32_t e = blockIdx.x * kFlatThreads + threadIdx.x;
  if (e >= total) return;
  const uint32_t row = fdiv(row_vecs, e);
  const uint32_t col = (e - row * row_vecs.d) * N;
  const bool has_gate = p.gate.ptr != nullptr;
  float h[N], y[N], g[N];
  unpack<T>(stream16_once(static_cast<const T*>(p.h.ptr) + row_at(p.h, row) + col), h);
  unpack<T>(stream16_once(static_cast<const T*>(p.y.ptr) + row_at(p.y, row) + col), y);
  if (has_gate) unpack<T>(load16(static_cast<const T*>(p.gate.ptr) + row_at(p.gate, row) + col), g);
#pragma unroll
  for (int j = 0; j < N; ++j) h[j] = residual_value<T>(h[j], y[j], has_gate ? g[j] : 1.0f, has_gate);
  store16(static_cast<T*>(p.h_out) + static_cast<int64_t>(e) * N, pack<T>(h));
}

// AdaLn: one block per row, VPT vectors per thread kept in registers across the reduction
// (VPT 8: up to 256 threads, so that the register cap leaves room for three rows of 8).
constexpr int residual_max_threads(int vpt) { return vpt < 8 ? kResidualRowThreads : 256; }

// FP8: the norm is written as e4m3 values and a scale per row (p.norm_fp8), kept packed in
// registers (y's, read by then) until the row's amax is known.
template <typename T, int VPT, bool FP8>
__global__ void __launch_bounds__(residual_max_threads(VPT)) residual_adaln_kernel(const ResidualParams p) {
  constexpr int N = kVec<T>;
  __shared__ float scratch[32];
  const uint32_t row = blockIdx.x;
  const int nvec = static_cast<int>(p.hidden / N);
  const int lane = threadIdx.x;
  const int nthreads = blockDim.x;
  const bool has_gate = p.gate.ptr != nullptr;
  const T* hr = static_cast<const T*>(p.h.ptr) + row_at(p.h, row);
  const T* yr = static_cast<const T*>(p.y.ptr) + row_at(p.y, row);
  const T* gr = has_gate ? static_cast<const T*>(p.gate.ptr) + row_at(p.gate, row) : nullptr;
  T* hout = static_cast<T*>(p.h_out) + static_cast<int64_t>(row) * p.hidden;

  uint4 hv[VPT], yv[VPT], gv[VPT];
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int v = lane + i * nthreads;
    if (v < nvec) {
      hv[i] = stream16(hr + v * N);
      yv[i] = stream16(yr + v * N);
      if (has_gate) gv[i] = load16(gr + v * N);
    }
  }
  float ss[1] = {0.0f};
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int v = lane + i * nthreads;
    if (v < nvec) {
      float h[N], y[N], g[N];
      unpack<T>(hv[i], h);
      unpack<T>(yv[i], y);
      if (has_gate) unpack<T>(gv[i], g);
#pragma unroll
      for (int j = 0; j < N; ++j) h[j] = residual_value<T>(h[j], y[j], has_gate ? g[j] : 1.0f, has_gate);
      hv[i] = pack<T>(h);  // rounded: the statistics are those of the stored h_out
      store16(hout + v * N, hv[i]);
      unpack<T>(hv[i], h);
#pragma unroll
      for (int j = 0; j < N; ++j) ss[0] = fmaf(h[j], h[j], ss[0]);
    }
  }
  block_sum_n<1>(ss, scratch);
  const float rstd = rsqrtf(ss[0] / static_cast<float>(p.hidden) + p.eps);
  const T* w = static_cast<const T*>(p.weight);
  const T* scr = static_cast<const T*>(p.scale.ptr) + row_at(p.scale, row);
  const T* shr = static_cast<const T*>(p.shift.ptr) + row_at(p.shift, row);
  T* nout = static_cast<T*>(p.norm_out) + static_cast<int64_t>(row) * p.hidden;
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int v = lane + i * nthreads;
    if (v < nvec) {
      float h[N], sc[N], sh[N], wf[N];
      unpack<T>(hv[i], h);
      unpack<T>(load16(scr + v * N), sc);
      unpack<T>(load16(shr + v * N), sh);
      if (w != nullptr) unpack<T>(load16(w + v * N), wf);
#pragma unroll
      for (int j = 0; j < N; ++j) {
        float n = h[j] * rstd;
        if (w != nullptr) n *= wf[j];
        h[j] = fmaf(n, 1.0f + sc[j], sh[j]);
      }
      if constexpr (FP8) {
        yv[i] = pack<T>(h);  // rounded: the norm as the bf16/fp16 op would write it
        unpack<T>(yv[i], h);
#pragma unroll
        for (int j = 0; j < N; ++j) amax = amax_step(amax, h[j]);
      } else {
        store16(nout + v * N, pack<T>(h));
      }
    }
  }
  if constexpr (FP8) {
    const float qscale = fp8_scale(block_amax(amax, scratch));
    const float inv = fp8_inverse(qscale);
    if (lane == 0) p.norm_fp8_scale[row] = qscale;
    uint8_t* q = p.norm_fp8 + static_cast<int64_t>(row) * p.hidden;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int v = lane + i * nthreads;
      if (v < nvec) {
        float n[N];
        unpack<T>(yv[i], n);
        store_e4m3<N>(q + v * N, n, inv);
      }
    }
  }
}

// Any size or alignment: block per row (grid-stride over rows for the gated kind). The AdaLn
// kind's second pass re-reads h_out, which holds the rounded values the statistics used.
template <typename T>
__global__ void __launch_bounds__(256) residual_scalar_kernel(const ResidualParams p) {
  __shared__ float scratch[32];
  const uint32_t row = blockIdx.x;
  const bool has_gate = p.gate.ptr != nullptr;
  const T* hr = static_cast<const T*>(p.h.ptr) + row_at(p.h, row);
  const T* yr = static_cast<const T*>(p.y.ptr) + row_at(p.y, row);
  const T* gr = has_gate ? static_cast<const T*>(p.gate.ptr) + row_at(p.gate, row) : nullptr;
  T* hout = static_cast<T*>(p.h_out) + static_cast<int64_t>(row) * p.hidden;
  float acc = 0.0f;
  for (int64_t i = threadIdx.x; i < p.hidden; i += blockDim.x) {
    const float v = round_to<T>(residual_value<T>(to_float(hr[i]), to_float(yr[i]),
                                                  has_gate ? to_float(gr[i]) : 1.0f, has_gate));
    hout[i] = from_float<T>(v);
    acc += v * v;
  }
  if (p.kind != ResidualKind::AdaLn) return;
  const float rstd = rsqrtf(block_sum(acc, scratch) / static_cast<float>(p.hidden) + p.eps);
  const T* w = static_cast<const T*>(p.weight);
  const T* scr = static_cast<const T*>(p.scale.ptr) + row_at(p.scale, row);
  const T* shr = static_cast<const T*>(p.shift.ptr) + row_at(p.shift, row);
  auto norm_at = [&](int64_t i) {
    float n = to_float(hout[i]) * rstd;  // this thread wrote hout[i] above
    if (w != nullptr) n *= to_float(w[i]);
    return from_float<T>(fmaf(n, 1.0f + to_float(scr[i]), to_float(shr[i])));
  };
  if (p.norm_fp8 == nullptr) {
    T* nout = static_cast<T*>(p.norm_out) + static_cast<int64_t>(row) * p.hidden;
    for (int64_t i = threadIdx.x; i < p.hidden; i += blockDim.x) nout[i] = norm_at(i);
    return;
  }
  float amax = 0.0f;
  for (int64_t i = threadIdx.x; i < p.hidden; i += blockDim.x) amax = amax_step(amax, to_float(norm_at(i)));
  const float qscale = fp8_scale(block_amax(amax, scratch));
  const float inv = fp8_inverse(qscale);
  if (threadIdx.x == 0) p.norm_fp8_scale[row] = qscale;
  uint8_t* q = p.norm_fp8 + static_cast<int64_t>(row) * p.hidden;
  for (int64_t i = threadIdx.x; i < p.hidden; i += blockDim.x) q[i] = to_e4m3(to_float(norm_at(i)), inv);
}

template <typename T, bool FP8>
void launch_residual_adaln(const ResidualParams& p, bool vec, cudaStream_t stream) {
  const int64_t nvec = p.hidden / kVec<T>;
  auto threads_for = [&](int vpt) { return static_cast<int>(((nvec + vpt - 1) / vpt + 31) / 32 * 32); };
  const unsigned rows = static_cast<unsigned>(p.rows);
  if (vec && nvec <= kResidualRowThreads) {
    residual_adaln_kernel<T, 1, FP8><<<rows, threads_for(1), 0, stream>>>(p);
  } else if (vec && nvec <= 2 * kResidualRowThreads) {
    residual_adaln_kernel<T, 2, FP8><<<rows, threads_for(2), 0, stream>>>(p);
  } else if (vec && nvec <= 4 * kResidualRowThreads) {
    residual_adaln_kernel<T, 4, FP8><<<rows, threads_for(4), 0, stream>>>(p);
  } else if (vec && nvec <= 8 * residual_max_threads(8)) {
    residual_adaln_kernel<T, 8, FP8><<<rows, threads_for(8), 0, stream>>>(p);
  } else {
    residual_scalar_kernel<T><<<rows, 256, 0, stream>>>(p);
  }
}

template <typename T>
void launch_residual_typed(const ResidualParams& p, cudaStream_t stream) {
  constexpr int N = kVec<T>;
  const int64_t nvec = p.hidden / N;
  bool vec = p.hidden % N == 0 && aligned16(p.h_out) && rows_vectorizable(p.h, N) &&
             rows_vectorizable(p.y, N) && rows_vectorizable(p.gate, N);
  if (p.kind == ResidualKind::Gated) {
    const int64_t total = p.rows * nvec;
    if (vec && total < kFlatLimit) {
      const int64_t blocks = (total + kFlatThreads - 1) / kFlatThreads;
      residual_flat_kernel<T><<<static_cast<unsigned>(blocks), kFlatThreads, 0, stream>>>(
          p, make_fastdiv(static_cast<uint32_t>(nvec)), static_cast<uint32_t>(total));
    } else {
      residual_scalar_kernel<T><<<static_cast<unsigned>(p.rows), 256, 0, stream>>>(p);
    }
    return;
  }
  const bool fp8 = p.norm_fp8 != nullptr;
  vec = vec && aligned16(fp8 ? static_cast<const void*>(p.norm_fp8) : p.norm_out) &&
        rows_vectorizable(p.scale, N) && rows_vectorizable(p.shift, N) &&
        (p.weight == nullptr || aligned16(p.weight));
  if (fp8) {
    launch_residual_adaln<T, true>(p, vec, stream);
  } else {
    launch_residual_adaln<T, false>(p, vec, stream);
  }
}

}  // namespace

Status launch_residual(const ResidualParams& p) {
  const char* op = p.kind == ResidualKind::AdaLn ? "residual_adaln" : "gated_residual";
  if (p.rows == 0 || p.hidden == 0) return {};
  if (p.rows >= (int64_t{1} << 31)) {
    return fail(std::string("ltx_kernels.") + op + ": more than 2^31 rows are not supported");
  }
  const cudaStream_t stream = p.stream;
  const bool dispatched =
      LTX_DISPATCH(p.dtype, [&] { launch_residual_typed<scalar_t>(p, stream); });
  if (!dispatched) return unsupported_dtype(op, p.dtype);
  return check_launch(op, p.dtype, p.device_index);
}

}  // namespace ltx
