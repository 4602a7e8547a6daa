// Rotary embedding (interleaved pairs, LTX-Video convention) and the GELU-tanh activations.
// Row-shaped ops map `TPR` lanes (a power of two) to each row so that index arithmetic is done
// once per row, not per element; every access is a 16-byte vector where sizes and alignment
// allow, with scalar kernels for the rest.
#include "../ltx_kernels.h"
#include "common.cuh"

#include <algorithm>
#include <type_traits>

namespace ltx {
namespace {

#ifndef LTX_PW_UNROLL  // 16-byte vectors per thread in the flat rope/geglu kernels
#define LTX_PW_UNROLL 1
#endif
#ifndef LTX_GELU_UNROLL  // 16-byte vectors per thread in the flat gelu kernel
#define LTX_GELU_UNROLL 1
#endif

constexpr int kThreads = 256;
constexpr int kRowThreads = 1024;  // geglu_row_kernel: one block per 1024-vector chunk of a row
constexpr int kUnroll = LTX_PW_UNROLL;
constexpr int kGeluUnroll = LTX_GELU_UNROLL;
constexpr int64_t kFlatLimit = int64_t{1} << 31;  // FastDiv's dividend range

int lanes_per_row(int64_t vecs_per_row) {
  int tpr = 1;
  while (tpr < vecs_per_row && tpr < kThreads) tpr *= 2;
  return tpr;
}

unsigned blocks_for_rows(int64_t rows, int tpr) {
  const int64_t rpb = kThreads / tpr;
  return static_cast<unsigned>((rows + rpb - 1) / rpb);
}

// ---- rotary embedding ----------------------------------------------------------------------
// out[2i]   = x[2i]   * cos[2i]   - x[2i+1] * sin[2i]
// out[2i+1] = x[2i+1] * cos[2i+1] + x[2i]   * sin[2i+1]
// Flat over the output's 16-byte vectors (e < 2^31): kUnroll per thread, loads first.
struct RopeDivs {
  FastDiv width_vecs;  // vectors per row
  FastDiv seq;
  FastDiv table_width;
};

template <typename T, typename C>
__global__ void __launch_bounds__(kThreads) rope_vec_kernel(const RopeParams p, const RopeDivs dv,
                                                            uint32_t total) {
  constexpr int N = kVec<T>;
  const uint32_t base = blockIdx.x * (kThreads * kUnroll) + threadIdx.x;
  const uint32_t tw = static_cast<uint32_t>(p.table_width);
  uint4 xv[kUnroll];
  float c[kUnroll][N], sn[kUnroll][N];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const uint32_t e = base + u * kThreads;
    if (e < total) {
      const uint32_t row = fdiv(dv.width_vecs, e);
      const uint32_t col = (e - row * dv.width_vecs.d) * N;
      const uint32_t b = fdiv(dv.seq, row);
      const uint32_t s = row - b * dv.seq.d;
      const uint32_t tcol = col < tw ? col : col - fdiv(dv.table_width, col) * tw;
      const int64_t toff = (static_cast<int64_t>(p.table_batch == 1 ? 0 : b) * p.seq + s) * tw + tcol;
      xv[u] = stream16(static_cast<const T*>(p.x) + b * p.x_batch_stride + s * p.x_seq_stride + col);
      load_table<C, N>(static_cast<const C*>(p.cos) + toff, c[u]);
      load_table<C, N>(static_cast<const C*>(p.sin) + toff, sn[u]);
    }
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const uint32_t e = base + u * kThreads;
    if (e < total) {
      float f[N], y[N];
      unpack<T>(xv[u], f);
#pragma unroll
      for (int j = 0; j < N; j += 2) {
        y[j] = f[j] * c[u][j] - f[j + 1] * sn[u][j];
        y[j + 1] = f[j + 1] * c[u][j + 1] + f[j] * sn[u][j + 1];
      }
      store16(static_cast<T*>(p.out) + static_cast<int64_t>(e) * N, pack<T>(y));
    }
  }
}

// The LTX layout: x contiguous and the table the same shape as x ([batch, seq, width]), so
// output vector e reads x and the table at the same element offset and no index math is
// needed. The table is read once, so it streams past L1 like x.
template <typename T, typename C>
__global__ void __launch_bounds__(kThreads) rope_same_layout_kernel(const RopeParams p,
                                                                    uint32_t total) {
  constexpr int N = kVec<T>;
  const uint32_t e = blockIdx.x * kThreads + threadIdx.x;
  if (e >= total) return;
  const int64_t off = static_cast<int64_t>(e) * N;
  float f[N], c[N], sn[N], y[N];
  unpack<T>(stream16_once(static_cast<const T*>(p.x) + off), f);
  load_table<C, N, true>(static_cast<const C*>(p.cos) + off, c);
  load_table<C, N, true>(static_cast<const C*>(p.sin) + off, sn);
#pragma unroll
  for (int j = 0; j < N; j += 2) {
    y[j] = f[j] * c[j] - f[j + 1] * sn[j];
    y[j + 1] = f[j + 1] * c[j + 1] + f[j] * sn[j + 1];
  }
  store16(static_cast<T*>(p.out) + off, pack<T>(y));
}

template <typename T, typename C>
__global__ void __launch_bounds__(kThreads) rope_scalar_kernel(const RopeParams p, int tpr) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kThreads / tpr) + threadIdx.x / tpr;
  if (row >= p.batch * p.seq) return;
  const int64_t b = row / p.seq;
  const int64_t s = row - b * p.seq;
  const T* xr = static_cast<const T*>(p.x) + b * p.x_batch_stride + s * p.x_seq_stride;
  T* outr = static_cast<T*>(p.out) + row * p.width;
  const int64_t toff = ((p.table_batch == 1 ? 0 : b) * p.seq + s) * p.table_width;
  const C* cr = static_cast<const C*>(p.cos) + toff;
  const C* sr = static_cast<const C*>(p.sin) + toff;
  for (int64_t i = threadIdx.x % tpr; i < p.width / 2; i += tpr) {
    const int64_t col = 2 * i;
    const int64_t tcol = col % p.table_width;
    const float x0 = to_float(xr[col]);
    const float x1 = to_float(xr[col + 1]);
    outr[col] = from_float<T>(x0 * to_float(cr[tcol]) - x1 * to_float(sr[tcol]));
    outr[col + 1] = from_float<T>(x1 * to_float(cr[tcol + 1]) + x0 * to_float(sr[tcol + 1]));
  }
}

template <typename T, typename C>
void launch_rope_typed(const RopeParams& p, cudaStream_t stream) {
  constexpr int N = kVec<T>;
  const int64_t rows = p.batch * p.seq;
  const bool vec = p.width % N == 0 && p.table_width % N == 0 && aligned16(p.x) &&
                   aligned16(p.out) && aligned16(p.cos) && aligned16(p.sin) &&
                   p.x_batch_stride % N == 0 && p.x_seq_stride % N == 0;
  const int64_t total = rows * (p.width / N);
  const bool same_layout = p.x_seq_stride == p.width && p.x_batch_stride == p.seq * p.width &&
                           p.table_width == p.width && (p.table_batch == p.batch || p.batch == 1);
  if (vec && same_layout && total < kFlatLimit) {
    const int64_t blocks = (total + kThreads - 1) / kThreads;
    rope_same_layout_kernel<T, C><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        p, static_cast<uint32_t>(total));
  } else if (vec && total < kFlatLimit) {
    RopeDivs dv;
    dv.width_vecs = make_fastdiv(static_cast<uint32_t>(p.width / N));
    dv.seq = make_fastdiv(static_cast<uint32_t>(p.seq));
    dv.table_width = make_fastdiv(static_cast<uint32_t>(p.table_width));
    const int64_t blocks = (total + kThreads * kUnroll - 1) / (kThreads * kUnroll);
    rope_vec_kernel<T, C><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        p, dv, static_cast<uint32_t>(total));
  } else {
    const int tpr = lanes_per_row(p.width / 2);
    rope_scalar_kernel<T, C><<<blocks_for_rows(rows, tpr), kThreads, 0, stream>>>(p, tpr);
  }
}

// ---- activations ---------------------------------------------------------------------------
// gelu_tanh over a flat contiguous range: kGeluUnroll 16-byte vectors per thread, scalar tail.
template <typename T>
__global__ void __launch_bounds__(kThreads) gelu_vec_kernel(const T* __restrict__ x,
                                                            T* __restrict__ out, int64_t n) {
  constexpr int N = kVec<T>;
  const int64_t nvec = n / N;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * (kGeluUnroll * kThreads) + threadIdx.x;
  uint4 v[kGeluUnroll];
#pragma unroll
  for (int u = 0; u < kGeluUnroll; ++u) {
    const int64_t i = base + u * kThreads;
    if (i < nvec) v[u] = stream16_once(x + i * N);
  }
#pragma unroll
  for (int u = 0; u < kGeluUnroll; ++u) {
    const int64_t i = base + u * kThreads;
    if (i < nvec) {
      float f[N];
      unpack<T>(v[u], f);
#pragma unroll
      for (int j = 0; j < N; ++j) f[j] = gelu_tanh_f(f[j]);
      store16(out + i * N, pack<T>(f));
    }
  }
  // Tail (n % N elements): the first threads of the grid.
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (t < n - nvec * N) {
    const int64_t i = nvec * N + t;
    out[i] = from_float<T>(gelu_tanh_f(to_float(x[i])));
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) gelu_scalar_kernel(const T* __restrict__ x,
                                                               T* __restrict__ out, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    out[i] = from_float<T>(gelu_tanh_f(to_float(x[i])));
  }
}

__device__ __forceinline__ int64_t row_offset(const RowMap& m, int64_t r) {
  if (m.inner == 1) return r * m.outer_stride;
  if (r < kFlatLimit && m.inner < kFlatLimit) {
    const uint32_t rr = static_cast<uint32_t>(r);
    const uint32_t inner = static_cast<uint32_t>(m.inner);
    const uint32_t q = rr / inner;
    return static_cast<int64_t>(q) * m.outer_stride +
           static_cast<int64_t>(rr - q * inner) * m.inner_stride;
  }
  return (r / m.inner) * m.outer_stride + (r % m.inner) * m.inner_stride;
}

// out[r, j] = x[r, j] * gelu_tanh(x[r, d + j]), flat over the output's vectors (< 2^31),
// kUnroll per thread with loads first.
template <typename T>
__global__ void __launch_bounds__(kThreads) geglu_vec_kernel(const ActParams p, const FastDiv dvecs,
                                                             uint32_t total) {
  constexpr int N = kVec<T>;
  const uint32_t base = blockIdx.x * (kThreads * kUnroll) + threadIdx.x;
  uint4 av[kUnroll], gv[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const uint32_t e = base + u * kThreads;
    if (e < total) {
      const uint32_t row = fdiv(dvecs, e);
      const uint32_t col = (e - row * dvecs.d) * N;
      const T* xr = static_cast<const T*>(p.x.ptr) + row_offset(p.x, row) + col;
      av[u] = stream16(xr);
      gv[u] = stream16(xr + p.width);
    }
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const uint32_t e = base + u * kThreads;
    if (e < total) {
      float a[N], g[N];
      unpack<T>(av[u], a);
      unpack<T>(gv[u], g);
#pragma unroll
      for (int j = 0; j < N; ++j) a[j] *= gelu_tanh_f(g[j]);
      store16(static_cast<T*>(p.out) + static_cast<int64_t>(e) * N, pack<T>(a));
    }
  }
}

// Wide rows (>= kRowThreads output vectors): each block takes one 1024-vector chunk of one
// row, so the row index is one division per block rather than per thread.
template <typename T>
__global__ void __launch_bounds__(kRowThreads) geglu_row_kernel(const ActParams p,
                                                                uint32_t chunks_per_row) {
  constexpr int N = kVec<T>;
  const uint32_t row = blockIdx.x / chunks_per_row;
  const uint32_t col = ((blockIdx.x - row * chunks_per_row) * kRowThreads + threadIdx.x) * N;
  if (col >= p.width) return;
  const T* xr = static_cast<const T*>(p.x.ptr) + row_offset(p.x, row) + col;
  const uint4 av = stream16_once(xr);
  const uint4 gv = stream16_once(xr + p.width);
  float a[N], g[N];
  unpack<T>(av, a);
  unpack<T>(gv, g);
#pragma unroll
  for (int j = 0; j < N; ++j) a[j] *= gelu_tanh_f(g[j]);
  store16(static_cast<T*>(p.out) + static_cast<int64_t>(row) * p.width + col, pack<T>(a));
}

template <typename T>
__global__ void __launch_bounds__(kThreads) geglu_scalar_kernel(const ActParams p, int tpr) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kThreads / tpr) + threadIdx.x / tpr;
  if (row >= p.rows) return;
  const T* xr = static_cast<const T*>(p.x.ptr) + row_offset(p.x, row);
  T* outr = static_cast<T*>(p.out) + row * p.width;
  for (int64_t j = threadIdx.x % tpr; j < p.width; j += tpr) {
    outr[j] = from_float<T>(to_float(xr[j]) * gelu_tanh_f(to_float(xr[p.width + j])));
  }
}

// Returns the error of a failed SM count query (nothing was launched then).
template <typename T>
cudaError_t launch_activation_typed(const ActParams& p, cudaStream_t stream) {
  constexpr int N = kVec<T>;
  if (p.kind == ActKind::GeluTanh) {
    // The binding passes a flat contiguous range: rows == 1.
    const T* x = static_cast<const T*>(p.x.ptr);
    T* out = static_cast<T*>(p.out);
    const int64_t n = p.width;
    if (aligned16(x) && aligned16(out)) {
      const int64_t nvec = n / N;
      const int64_t blocks = std::max<int64_t>((nvec + kGeluUnroll * kThreads - 1) / (kGeluUnroll * kThreads), 1);
      gelu_vec_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(x, out, n);
    } else {
      int sms = 0;
      if (const cudaError_t err = sm_count(p.device_index, sms); err != cudaSuccess) return err;
      const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, int64_t{32} * sms);
      gelu_scalar_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(x, out, n);
    }
    return cudaSuccess;
  }
  const bool vec = p.width % N == 0 && aligned16(p.x.ptr) && aligned16(p.out) &&
                   p.x.outer_stride % N == 0 && p.x.inner_stride % N == 0;
  const int64_t total = p.rows * (p.width / N);
  const int64_t row_vecs = p.width / N;
  if (vec && row_vecs >= kRowThreads && total < kFlatLimit) {
    const int64_t chunks = (row_vecs + kRowThreads - 1) / kRowThreads;
    geglu_row_kernel<T><<<static_cast<unsigned>(p.rows * chunks), kRowThreads, 0, stream>>>(
        p, static_cast<uint32_t>(chunks));
  } else if (vec && total < kFlatLimit) {
    const int64_t blocks = (total + kThreads * kUnroll - 1) / (kThreads * kUnroll);
    geglu_vec_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        p, make_fastdiv(static_cast<uint32_t>(p.width / N)), static_cast<uint32_t>(total));
  } else {
    const int tpr = lanes_per_row(p.width);
    geglu_scalar_kernel<T><<<blocks_for_rows(p.rows, tpr), kThreads, 0, stream>>>(p, tpr);
  }
  return cudaSuccess;
}

}  // namespace

Status launch_rope(const RopeParams& p) {
  if (p.batch == 0 || p.seq == 0 || p.width == 0) return {};
  const cudaStream_t stream = p.stream;
  const bool fp32_table = p.table_dtype == Dtype::Float32;
  if (!fp32_table && p.table_dtype != p.dtype) {
    return fail("ltx_kernels.rope_3d: cos/sin must be float32 or the dtype of x");
  }
  const bool dispatched = LTX_DISPATCH(p.dtype, [&] {
    if (fp32_table) {
      launch_rope_typed<scalar_t, float>(p, stream);
    } else {
      launch_rope_typed<scalar_t, scalar_t>(p, stream);
    }
  });
  if (!dispatched) return unsupported_dtype("rope_3d", p.dtype);
  return check_launch("rope_3d", p.dtype, p.device_index);
}

Status launch_activation(const ActParams& p) {
  const char* op = p.kind == ActKind::Geglu ? "geglu" : "gelu_tanh";
  if (p.rows == 0 || p.width == 0) return {};
  const cudaStream_t stream = p.stream;
  cudaError_t err = cudaSuccess;
  const bool dispatched =
      LTX_DISPATCH(p.dtype, [&] { err = launch_activation_typed<scalar_t>(p, stream); });
  if (!dispatched) return unsupported_dtype(op, p.dtype);
  if (err != cudaSuccess) return Status{{}, static_cast<int>(err)};
  return check_launch(op, p.dtype, p.device_index);
}

}  // namespace ltx
