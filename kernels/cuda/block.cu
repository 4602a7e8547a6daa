// Block-level fusion for LTX-Video-style transformer blocks:
// - qk_norm_rope: q and k RMS-normalized across heads, then rotated (interleaved-pair RoPE with
//   full-width tables), one block per token reading that token's table row once for the q and
//   k rows of up to two batch entries; or, in grid mode, with cos/sin computed from the token's
//   (frame, row, col) position (no table read).
// The residual updates are their own unit (residual.cu), so the two compile side by side.
// Every access is a 16-byte vector where sizes and alignment allow; scalar kernels cover the rest.
#include "block_common.cuh"

#include <type_traits>

namespace ltx {
namespace {

// ---- q/k RMSNorm + RoPE ------------------------------------------------------------------
// Block (s, chunk): token s, batch entries 2 * chunk and 2 * chunk + 1. Row slot r: tensor
// r & 1 (q, k), batch entry r >> 1. Each thread owns VPT vectors of every row.
// At most 512 threads: four rows of VPT vectors plus the table stay in registers.
constexpr int kQkMaxThreads = 512;

// The table "type" of grid mode (QkNormRopeParams): cos/sin computed from the token's position.
struct GridTable {};
template <typename C>
inline constexpr bool kGrid = std::is_same_v<C, GridTable>;

// 2 * coord - 1 of token s on the three axes (frame, row, col).
__device__ __forceinline__ float3 grid_coords(const QkNormRopeParams& p, int64_t s) {
  const int64_t hw = p.grid_h * p.grid_w;
  const int64_t f = s / hw;
  const int64_t r = s - f * hw;
  const int64_t h = r / p.grid_w;
  return make_float3(__ldg(p.axis_f + f), __ldg(p.axis_h + h), __ldg(p.axis_w + (r - h * p.grid_w)));
}

// cos/sin of channels ch0 .. ch0 + K - 1 (ch0 even). The angle is the one fp32 product torch
// computes (__fmul_rn: no contraction), and sincosf is the accurate libdevice routine (this
// file is built without fast math), so the values match the fp32 tables to an ulp.
template <int K>
__device__ __forceinline__ void grid_cos_sin(const QkNormRopeParams& p, int ch0, const float3 u,
                                             float (&c)[K], float (&sn)[K]) {
  const int pad = static_cast<int>(p.width % 6);
#pragma unroll
  for (int j = 0; j < K; j += 2) {
    const int ch = ch0 + j;
    float cv = 1.0f, sv = 0.0f;
    if (ch >= pad) {
      const int pair = (ch - pad) >> 1;
      const int band = pair / 3;
      const int axis = pair - 3 * band;
      const float coord = axis == 0 ? u.x : (axis == 1 ? u.y : u.z);
      sincosf(__fmul_rn(__ldg(p.freqs + band), coord), &sv, &cv);
    }
    c[j] = cv;
    c[j + 1] = cv;
    sn[j] = sv;
    sn[j + 1] = sv;
  }
}

template <typename T, typename C, int VPT>
__global__ void __launch_bounds__(kQkMaxThreads) qk_norm_rope_kernel(const QkNormRopeParams p) {
  constexpr int N = kVec<T>;
  constexpr int R = 4;
  __shared__ float scratch[32 * R];
  const int64_t s = blockIdx.x;
  const int64_t b0 = static_cast<int64_t>(blockIdx.y) * 2;
  const int nrows = p.batch - b0 >= 2 ? 4 : 2;
  const int nvec = static_cast<int>(p.width / N);
  const int lane = threadIdx.x;
  const int nthreads = blockDim.x;
  const bool shared_table = p.table_batch == 1;

  auto row_in = [&](int r) {
    const int64_t b = b0 + (r >> 1);
    return (r & 1) ? static_cast<const T*>(p.k) + b * p.k_batch_stride + s * p.k_seq_stride
                   : static_cast<const T*>(p.q) + b * p.q_batch_stride + s * p.q_seq_stride;
  };
  auto table_row = [&](const void* t, int64_t b) {
    return static_cast<const C*>(t) + ((shared_table ? 0 : b) * p.seq + s) * p.width;
  };

  uint4 xv[R][VPT];
  float c[VPT][N], sn[VPT][N];
  const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const T* xr = r < nrows ? row_in(r) : nullptr;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int v = lane + i * nthreads;
      xv[r][i] = (r < nrows && v < nvec) ? stream16(xr + v * N) : zero;
    }
  }
  if constexpr (kGrid<C>) {
    const float3 u = grid_coords(p, s);
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int v = lane + i * nthreads;
      if (v < nvec) grid_cos_sin<N>(p, v * N, u, c[i], sn[i]);
    }
  } else {
    const C* cr = table_row(p.cos, b0);
    const C* sr = table_row(p.sin, b0);
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int v = lane + i * nthreads;
      if (v < nvec) {
        load_table<C, N, true>(cr + v * N, c[i]);
        load_table<C, N, true>(sr + v * N, sn[i]);
      }
    }
  }

  float ss[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    ss[r] = 0.0f;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      float f[N];
      unpack<T>(xv[r][i], f);
#pragma unroll
      for (int j = 0; j < N; ++j) ss[r] = fmaf(f[j], f[j], ss[r]);
    }
  }
  block_sum_n<R>(ss, scratch);
  const float inv_w = 1.0f / static_cast<float>(p.width);

#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r >= nrows) break;
    const int64_t b = b0 + (r >> 1);
    if constexpr (!kGrid<C>) {
      if (r == 2 && !shared_table) {  // the second batch entry has its own table row
        const C* cr = table_row(p.cos, b);
        const C* sr = table_row(p.sin, b);
#pragma unroll
        for (int i = 0; i < VPT; ++i) {
          const int v = lane + i * nthreads;
          if (v < nvec) {
            load_table<C, N, true>(cr + v * N, c[i]);
            load_table<C, N, true>(sr + v * N, sn[i]);
          }
        }
      }
    }
    const float rstd = rsqrtf(ss[r] * inv_w + p.eps);
    const T* w = static_cast<const T*>((r & 1) ? p.k_weight : p.q_weight);
    T* out = static_cast<T*>((r & 1) ? p.k_out : p.q_out) + (b * p.seq + s) * p.width;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int v = lane + i * nthreads;
      if (v < nvec) {
        float f[N], y[N];
        unpack<T>(xv[r][i], f);
        if (w != nullptr) {
          float wf[N];
          unpack<T>(load16(w + v * N), wf);
#pragma unroll
          for (int j = 0; j < N; ++j) f[j] = round_to<T>(f[j] * rstd * wf[j]);
        } else {
#pragma unroll
          for (int j = 0; j < N; ++j) f[j] = round_to<T>(f[j] * rstd);
        }
#pragma unroll
        for (int j = 0; j < N; j += 2) {
          y[j] = f[j] * c[i][j] - f[j + 1] * sn[i][j];
          y[j + 1] = f[j + 1] * c[i][j + 1] + f[j] * sn[i][j + 1];
        }
        store16(out + v * N, pack<T>(y));
      }
    }
  }
}

// Any width or alignment: block per (token, batch entry, q or k), two passes over the row.
template <typename T, typename C>
__global__ void __launch_bounds__(256) qk_norm_rope_scalar_kernel(const QkNormRopeParams p) {
  __shared__ float scratch[32];
  const int64_t s = blockIdx.x;
  const int64_t b = blockIdx.y >> 1;
  const bool is_k = blockIdx.y & 1;
  const T* x = is_k ? static_cast<const T*>(p.k) + b * p.k_batch_stride + s * p.k_seq_stride
                    : static_cast<const T*>(p.q) + b * p.q_batch_stride + s * p.q_seq_stride;
  const T* w = static_cast<const T*>(is_k ? p.k_weight : p.q_weight);
  T* out = static_cast<T*>(is_k ? p.k_out : p.q_out) + (b * p.seq + s) * p.width;
  float acc = 0.0f;
  for (int64_t i = threadIdx.x; i < p.width; i += blockDim.x) {
    const float f = to_float(x[i]);
    acc += f * f;
  }
  const float rstd = rsqrtf(block_sum(acc, scratch) / static_cast<float>(p.width) + p.eps);
  for (int64_t i = 2 * threadIdx.x; i < p.width; i += 2 * blockDim.x) {
    float n0 = to_float(x[i]) * rstd;
    float n1 = to_float(x[i + 1]) * rstd;
    if (w != nullptr) {
      n0 *= to_float(w[i]);
      n1 *= to_float(w[i + 1]);
    }
    n0 = round_to<T>(n0);
    n1 = round_to<T>(n1);
    float c[2], sn[2];
    if constexpr (kGrid<C>) {
      grid_cos_sin<2>(p, static_cast<int>(i), grid_coords(p, s), c, sn);
    } else {
      const int64_t t = ((p.table_batch == 1 ? 0 : b) * p.seq + s) * p.width + i;
      const C* cr = static_cast<const C*>(p.cos);
      const C* sr = static_cast<const C*>(p.sin);
      c[0] = to_float(cr[t]);
      c[1] = to_float(cr[t + 1]);
      sn[0] = to_float(sr[t]);
      sn[1] = to_float(sr[t + 1]);
    }
    out[i] = from_float<T>(n0 * c[0] - n1 * sn[0]);
    out[i + 1] = from_float<T>(n1 * c[1] + n0 * sn[1]);
  }
}

template <typename T, typename C>
void launch_qk_typed(const QkNormRopeParams& p, cudaStream_t stream) {
  constexpr int N = kVec<T>;
  const int64_t nvec = p.width / N;
  const bool vec = p.width % N == 0 && aligned16(p.q) && aligned16(p.k) && aligned16(p.q_out) &&
                   aligned16(p.k_out) && (kGrid<C> || (aligned16(p.cos) && aligned16(p.sin))) &&
                   (p.q_weight == nullptr || aligned16(p.q_weight)) &&
                   (p.k_weight == nullptr || aligned16(p.k_weight)) && p.q_batch_stride % N == 0 &&
                   p.q_seq_stride % N == 0 && p.k_batch_stride % N == 0 && p.k_seq_stride % N == 0;
  const dim3 grid(static_cast<unsigned>(p.seq), static_cast<unsigned>((p.batch + 1) / 2));
  auto threads_for = [&](int vpt) { return static_cast<int>(((nvec + vpt - 1) / vpt + 31) / 32 * 32); };
  if (vec && nvec <= kQkMaxThreads) {
    qk_norm_rope_kernel<T, C, 1><<<grid, threads_for(1), 0, stream>>>(p);
  } else if (vec && nvec <= 2 * kQkMaxThreads) {
    qk_norm_rope_kernel<T, C, 2><<<grid, threads_for(2), 0, stream>>>(p);
  } else {
    const dim3 sgrid(static_cast<unsigned>(p.seq), static_cast<unsigned>(2 * p.batch));
    qk_norm_rope_scalar_kernel<T, C><<<sgrid, 256, 0, stream>>>(p);
  }
}

}  // namespace

Status launch_qk_norm_rope(const QkNormRopeParams& p) {
  if (p.batch == 0 || p.seq == 0 || p.width == 0) return {};
  if (p.seq >= (int64_t{1} << 31) || p.batch >= (int64_t{1} << 16)) {
    return fail("ltx_kernels.qk_norm_rope: at most 2^31 tokens and 2^16 batch entries");
  }
  const cudaStream_t stream = p.stream;
  const bool fp32_table = p.table_dtype == Dtype::Float32;
  const bool grid = p.cos == nullptr;
  const bool dispatched = LTX_DISPATCH(p.dtype, [&] {
    if (grid) {
      launch_qk_typed<scalar_t, GridTable>(p, stream);
    } else if (fp32_table) {
      launch_qk_typed<scalar_t, float>(p, stream);
    } else {
      launch_qk_typed<scalar_t, scalar_t>(p, stream);
    }
  });
  if (!dispatched) return unsupported_dtype("qk_norm_rope", p.dtype);
  return check_launch("qk_norm_rope", p.dtype, p.device_index);
}

}  // namespace ltx
