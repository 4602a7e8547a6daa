// Variant sweep for the streaming ops (gelu_tanh, geglu, rope with a full-width fp32 table),
// bf16 only, sm_90: a grid of launch shapes and cache policies, loaded by sweep.py through
// ctypes and timed side by side with torch.compile in one process. Not part of the build:
// the winners are carried into kernels/cuda/pointwise.cu.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -shared -Xcompiler -fPIC -cudart static \
//        -o pointwise_sweep.so pointwise_sweep.cu bulk_sweep.cu
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <utility>

namespace {

// ---- knobs -----------------------------------------------------------------------------------
// op (0 gelu, 1 geglu, 2 rope), T threads/block, V 16-byte vectors per thread (loads first),
// H load policy, S store policy, M mapping:
//   gelu/rope  M0: thread vectors strided by T        M1: V adjacent vectors per thread
//   geglu      M0: flat, row by a fast division        M1: block = a chunk of one row
//   rope       M2: flat with the general (batch, seq, table column) index math
struct Cfg {
  int op, t, v, h, s, m;
};
const char* kHNames[] = {"ldg", "cs", "nc.noL1", "nc.noL1.L2pf256", "nc.noL1.evfirst"};
const char* kSNames[] = {"st", "st.cs", "st.evfirst"};
constexpr Cfg kCfgs[] = {
#define LTX_T(OP, V, H, S, M) {OP, 64, V, H, S, M}, {OP, 128, V, H, S, M}, {OP, 256, V, H, S, M}, \
                              {OP, 512, V, H, S, M}, {OP, 1024, V, H, S, M},
#define LTX_HS(OP, V, M) LTX_T(OP, V, 1, 1, M) LTX_T(OP, V, 2, 1, M) LTX_T(OP, V, 3, 1, M) \
                         LTX_T(OP, V, 1, 2, M) LTX_T(OP, V, 2, 2, M) LTX_T(OP, V, 3, 2, M) \
                         LTX_T(OP, V, 0, 0, M) LTX_T(OP, V, 4, 1, M)
    LTX_HS(0, 1, 0) LTX_HS(0, 2, 0) LTX_HS(0, 2, 1)
    LTX_HS(1, 1, 0) LTX_HS(1, 1, 1) LTX_HS(1, 2, 0) LTX_HS(1, 2, 1)
    LTX_HS(2, 1, 0) LTX_HS(2, 2, 0) LTX_HS(2, 2, 1) LTX_HS(2, 1, 2)
#undef LTX_HS
#undef LTX_T
};
constexpr int kConfigs = sizeof(kCfgs) / sizeof(kCfgs[0]);

struct FastDiv {
  uint32_t d = 1, m = 1, s = 0;
};
FastDiv make_fastdiv(uint32_t d) {
  FastDiv f;
  f.d = d;
  while ((uint64_t{1} << f.s) < d) ++f.s;
  f.m = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << f.s) - d)) / d + 1);
  return f;
}
__device__ __forceinline__ uint32_t fdiv(const FastDiv& f, uint32_t n) {
  return (__umulhi(n, f.m) + n) >> f.s;
}

__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}

template <int H>
__device__ __forceinline__ uint4 ld16(const void* p) {
  uint4 v;
  if constexpr (H == 0) {
    v = __ldg(reinterpret_cast<const uint4*>(p));
  } else if constexpr (H == 1) {
    v = __ldcs(reinterpret_cast<const uint4*>(p));
  } else if constexpr (H == 2) {
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  } else if constexpr (H == 3) {
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  } else {
    const uint64_t pol = evict_first_policy();
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(pol));
  }
  return v;
}

template <int S>
__device__ __forceinline__ void st16(void* p, uint4 v) {
  if constexpr (S == 0) {
    *reinterpret_cast<uint4*>(p) = v;
  } else if constexpr (S == 1) {
    __stcs(reinterpret_cast<uint4*>(p), v);
  } else {
    const uint64_t pol = evict_first_policy();
    asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1,%2,%3,%4}, %5;" ::"l"(p), "r"(v.x),
                 "r"(v.y), "r"(v.z), "r"(v.w), "l"(pol)
                 : "memory");
  }
}

__device__ __forceinline__ void unpack8(const uint4& r, float (&f)[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&r);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 v = __bfloat1622float2(h[i]);
    f[2 * i] = v.x;
    f[2 * i + 1] = v.y;
  }
}
__device__ __forceinline__ uint4 pack8(const float (&f)[8]) {
  uint4 r;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&r);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return r;
}
__device__ __forceinline__ float gelu_tanh_f(float x) {
  const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  return x / (1.0f + __expf(-2.0f * u));
}

struct Args {
  const void* x;
  const void* cos;
  const void* sin;
  void* out;
  uint32_t nvec;  // output vectors
  uint32_t dvec;  // output vectors per row (geglu; rope M2)
  uint32_t cpr;   // geglu M1: blocks per row
  uint32_t seq, tw;  // rope M2: sequence length, table width (elements)
  FastDiv fd_dvec, fd_seq, fd_tw;
};

// Output vector handled by unroll step u of this thread, for chunk c (M0/M1 of gelu and rope).
template <int T, int V, int M>
__device__ __forceinline__ uint32_t vec_index(uint32_t c, int u) {
  if constexpr (M == 1) return (c * T + threadIdx.x) * V + u;
  return c * (T * V) + u * T + threadIdx.x;
}

template <int OP, int T, int V, int H, int S, int M>
__device__ __forceinline__ void do_chunk(const Args& a, uint32_t c) {
  if constexpr (OP == 0) {  // gelu_tanh
    uint4 xv[V];
#pragma unroll
    for (int u = 0; u < V; ++u) {
      const uint32_t e = vec_index<T, V, M>(c, u);
      if (e < a.nvec) xv[u] = ld16<H>(static_cast<const uint4*>(a.x) + e);
    }
#pragma unroll
    for (int u = 0; u < V; ++u) {
      const uint32_t e = vec_index<T, V, M>(c, u);
      if (e < a.nvec) {
        float f[8];
        unpack8(xv[u], f);
#pragma unroll
        for (int j = 0; j < 8; ++j) f[j] = gelu_tanh_f(f[j]);
        st16<S>(static_cast<uint4*>(a.out) + e, pack8(f));
      }
    }
  } else if constexpr (OP == 1) {  // geglu: x [rows, 2*dvec] vectors -> out [rows, dvec]
    uint4 av[V], gv[V];
    uint32_t oi[V];
    bool ok[V];
    uint32_t row = 0, col0 = 0;
    if constexpr (M == 1) {
      row = c / a.cpr;  // uniform across the block
      col0 = (c - row * a.cpr) * (T * V) + threadIdx.x;
    }
#pragma unroll
    for (int u = 0; u < V; ++u) {
      uint32_t in;
      if constexpr (M == 1) {
        const uint32_t col = col0 + u * T;
        ok[u] = col < a.dvec;
        oi[u] = row * a.dvec + col;
        in = oi[u] + row * a.dvec;
      } else {
        oi[u] = c * (T * V) + u * T + threadIdx.x;
        ok[u] = oi[u] < a.nvec;
        in = oi[u] + fdiv(a.fd_dvec, oi[u]) * a.dvec;
      }
      if (ok[u]) {
        const uint4* xr = static_cast<const uint4*>(a.x) + in;
        av[u] = ld16<H>(xr);
        gv[u] = ld16<H>(xr + a.dvec);
      }
    }
#pragma unroll
    for (int u = 0; u < V; ++u) {
      if (ok[u]) {
        float f[8], g[8];
        unpack8(av[u], f);
        unpack8(gv[u], g);
#pragma unroll
        for (int j = 0; j < 8; ++j) f[j] *= gelu_tanh_f(g[j]);
        st16<S>(static_cast<uint4*>(a.out) + oi[u], pack8(f));
      }
    }
  } else {  // rope; M0/M1: table with the layout of x; M2: general index math
    uint4 xv[V], cv[V][2], sv[V][2];
#pragma unroll
    for (int u = 0; u < V; ++u) {
      const uint32_t e = vec_index<T, V, (M == 1 ? 1 : 0)>(c, u);
      if (e < a.nvec) {
        uint32_t t4 = 2 * e;  // table offset in float4s
        if constexpr (M == 2) {
          const uint32_t row = fdiv(a.fd_dvec, e);
          const uint32_t col = (e - row * a.dvec) * 8;
          const uint32_t b = fdiv(a.fd_seq, row);
          const uint32_t s = row - b * a.seq;
          const uint32_t tcol = col < a.tw ? col : col - fdiv(a.fd_tw, col) * a.tw;
          t4 = ((b * a.seq + s) * a.tw + tcol) / 4;
        }
        xv[u] = ld16<H>(static_cast<const uint4*>(a.x) + e);
        cv[u][0] = ld16<H>(static_cast<const uint4*>(a.cos) + t4);
        cv[u][1] = ld16<H>(static_cast<const uint4*>(a.cos) + t4 + 1);
        sv[u][0] = ld16<H>(static_cast<const uint4*>(a.sin) + t4);
        sv[u][1] = ld16<H>(static_cast<const uint4*>(a.sin) + t4 + 1);
      }
    }
#pragma unroll
    for (int u = 0; u < V; ++u) {
      const uint32_t e = vec_index<T, V, (M == 1 ? 1 : 0)>(c, u);
      if (e < a.nvec) {
        float f[8], y[8];
        unpack8(xv[u], f);
        const float* cc = reinterpret_cast<const float*>(cv[u]);
        const float* ss = reinterpret_cast<const float*>(sv[u]);
#pragma unroll
        for (int j = 0; j < 8; j += 2) {
          y[j] = f[j] * cc[j] - f[j + 1] * ss[j];
          y[j + 1] = f[j + 1] * cc[j + 1] + f[j] * ss[j + 1];
        }
        st16<S>(static_cast<uint4*>(a.out) + e, pack8(y));
      }
    }
  }
}

template <int OP, int T, int V, int H, int S, int M>
__global__ void __launch_bounds__(T) sweep_kernel(const Args a) {
  do_chunk<OP, T, V, H, S, M>(a, blockIdx.x);
}

template <int ID>
int launch_one(Args a, cudaStream_t stream) {
  constexpr Cfg c = kCfgs[ID];
  uint32_t blocks = (a.nvec + c.t * c.v - 1) / (c.t * c.v);
  if constexpr (c.op == 1 && c.m == 1) {
    a.cpr = (a.dvec + c.t * c.v - 1) / (c.t * c.v);
    blocks = (a.nvec / a.dvec) * a.cpr;
  }
  sweep_kernel<c.op, c.t, c.v, c.h, c.s, c.m><<<blocks, c.t, 0, stream>>>(a);
  return static_cast<int>(cudaGetLastError());
}

using LaunchFn = int (*)(Args, cudaStream_t);
template <int... Is>
constexpr std::array<LaunchFn, sizeof...(Is)> make_table(std::integer_sequence<int, Is...>) {
  return {&launch_one<Is>...};
}

}  // namespace

extern "C" {
int sweep_configs() { return kConfigs; }

int sweep_op(int id) { return kCfgs[id].op; }

void sweep_name(int id, char* buf, int len) {
  const Cfg& c = kCfgs[id];
  static const char* kM[3][3] = {{"strided", "adjacent", ""},
                                 {"flat", "rowblock", ""},
                                 {"strided", "adjacent", "general"}};
  snprintf(buf, len, "T%d V%d %s %s %s", c.t, c.v, kHNames[c.h], kSNames[c.s], kM[c.op][c.m]);
}

// x, cos, sin, out: device pointers; nvec: output vectors; dvec: output vectors per row;
// seq, tw: rope's sequence length and table width (M2).
int sweep_launch(int id, const void* x, const void* cos, const void* sin, void* out, unsigned nvec,
                 unsigned dvec, unsigned seq, unsigned tw, void* stream) {
  static const auto table = make_table(std::make_integer_sequence<int, kConfigs>{});
  if (id < 0 || id >= kConfigs) return -1;
  Args a{x, cos, sin, out, nvec, dvec, 0, seq, tw, {}, {}, {}};
  if (dvec) a.fd_dvec = make_fastdiv(dvec);
  if (seq) a.fd_seq = make_fastdiv(seq);
  if (tw) a.fd_tw = make_fastdiv(tw);
  return table[id](a, static_cast<cudaStream_t>(stream));
}
}
