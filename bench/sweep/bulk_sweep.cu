// Bulk-copy (TMA, cp.async.bulk) variants of gelu_tanh and geglu for the sweep: a persistent
// grid; each block streams tiles of CH bytes through S shared-memory stages (global -> shared
// by the copy engine, completing on an mbarrier; compute shared -> shared; shared -> global by
// the copy engine). sm_90 only. Compiled into the same .so as pointwise_sweep.cu.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <utility>

namespace {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  } while (!done);
}
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}
__device__ __forceinline__ void bulk_store(void* dst, const void* src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst),
               "r"(smem_addr(src)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void fence_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

__device__ __forceinline__ float gelu_tanh_f(float x) {
  const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  return x / (1.0f + __expf(-2.0f * u));
}

struct BulkArgs {
  const char* x;
  char* out;
  uint32_t tiles;          // total tiles
  uint32_t tiles_per_row;  // geglu
  uint64_t row_bytes;      // geglu: output row bytes (= each input half)
};

// OP 0: gelu (1 input), 1: geglu (2 inputs). CH bytes per tile, S stages, T threads.
template <int OP, int CH, int S, int T>
__global__ void __launch_bounds__(T) bulk_kernel(const BulkArgs a) {
  constexpr int NIN = OP == 0 ? 1 : 2;
  extern __shared__ __align__(128) char smem[];
  __shared__ __align__(8) uint64_t bars[S];
  char* in_buf = smem;                       // [S][NIN][CH]
  char* out_buf = smem + S * NIN * CH;       // [S][CH]
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) mbar_init(&bars[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  auto src_of = [&](uint32_t t, int which) -> const char* {
    if constexpr (OP == 0) {
      return a.x + static_cast<uint64_t>(t) * CH;
    } else {
      const uint32_t row = t / a.tiles_per_row;
      const uint32_t c = t - row * a.tiles_per_row;
      return a.x + row * 2 * a.row_bytes + which * a.row_bytes + static_cast<uint64_t>(c) * CH;
    }
  };
  auto dst_of = [&](uint32_t t) -> char* {
    if constexpr (OP == 0) {
      return a.out + static_cast<uint64_t>(t) * CH;
    } else {
      const uint32_t row = t / a.tiles_per_row;
      const uint32_t c = t - row * a.tiles_per_row;
      return a.out + row * a.row_bytes + static_cast<uint64_t>(c) * CH;
    }
  };
  auto issue = [&](uint32_t k, int s) {  // k-th tile of this block into stage s
    const uint32_t t = blockIdx.x + k * gridDim.x;
    if (t >= a.tiles) return;
    mbar_expect_tx(&bars[s], NIN * CH);
#pragma unroll
    for (int i = 0; i < NIN; ++i) bulk_load(in_buf + (s * NIN + i) * CH, src_of(t, i), CH, &bars[s]);
  };

  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < S; ++s) issue(s, s);
  }
  for (uint32_t k = 0;; ++k) {
    const uint32_t t = blockIdx.x + k * gridDim.x;
    if (t >= a.tiles) break;
    const int s = k % S;
    mbar_wait(&bars[s], (k / S) & 1);
    if (threadIdx.x == 0) bulk_wait_read<S - 1>();  // the store that last used out_buf[s] has read it
    __syncthreads();
    const uint4* in0 = reinterpret_cast<const uint4*>(in_buf + (s * NIN) * CH);
    uint4* o = reinterpret_cast<uint4*>(out_buf + s * CH);
#pragma unroll
    for (int i = threadIdx.x; i < CH / 16; i += T) {
      const uint4 v = in0[i];
      const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
      uint4 r;
      __nv_bfloat162* rh = reinterpret_cast<__nv_bfloat162*>(&r);
      if constexpr (OP == 0) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 f = __bfloat1622float2(h[j]);
          rh[j] = __floats2bfloat162_rn(gelu_tanh_f(f.x), gelu_tanh_f(f.y));
        }
      } else {
        const uint4 gv = reinterpret_cast<const uint4*>(in_buf + (s * NIN + 1) * CH)[i];
        const __nv_bfloat162* gh = reinterpret_cast<const __nv_bfloat162*>(&gv);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 f = __bfloat1622float2(h[j]);
          const float2 g = __bfloat1622float2(gh[j]);
          rh[j] = __floats2bfloat162_rn(f.x * gelu_tanh_f(g.x), f.y * gelu_tanh_f(g.y));
        }
      }
      o[i] = r;
    }
    fence_async_smem();
    __syncthreads();
    if (threadIdx.x == 0) {
      bulk_store(dst_of(t), out_buf + s * CH, CH);
      bulk_commit();
      issue(k + S, s);  // in_buf[s] is consumed (barrier above)
    }
  }
  if (threadIdx.x == 0) bulk_wait_read<0>();
}

struct BulkCfg {
  int op, ch, s, t;
};
constexpr BulkCfg kBulk[] = {
#define LTX_B(OP)                                                                                  \
  {OP, 4096, 2, 128}, {OP, 4096, 4, 128}, {OP, 8192, 2, 128}, {OP, 8192, 3, 128}, {OP, 8192, 4, 128}, \
      {OP, 16384, 2, 128}, {OP, 16384, 3, 128}, {OP, 4096, 4, 256}, {OP, 8192, 3, 256},          \
      {OP, 8192, 4, 256}, {OP, 16384, 2, 256}, {OP, 16384, 3, 256}, {OP, 2048, 8, 128},           \
      {OP, 4096, 8, 128},
    LTX_B(0) LTX_B(1)
#undef LTX_B
};
constexpr int kBulkConfigs = sizeof(kBulk) / sizeof(kBulk[0]);

template <int ID>
int bulk_launch_one(BulkArgs a, uint64_t in_bytes, uint64_t row_bytes, cudaStream_t stream) {
  constexpr BulkCfg c = kBulk[ID];
  constexpr int NIN = c.op == 0 ? 1 : 2;
  auto kern = bulk_kernel<c.op, c.ch, c.s, c.t>;
  const int smem = c.s * (NIN + 1) * c.ch;
  cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (c.op == 0) {
    if (in_bytes % c.ch) return -2;
    a.tiles = static_cast<uint32_t>(in_bytes / c.ch);
  } else {
    if (row_bytes % c.ch) return -2;
    a.row_bytes = row_bytes;
    a.tiles_per_row = static_cast<uint32_t>(row_bytes / c.ch);
    a.tiles = static_cast<uint32_t>(in_bytes / (2 * row_bytes)) * a.tiles_per_row;
  }
  int per_sm = 0, sms = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, c.t, smem);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  if (per_sm < 1) return -3;
  uint32_t blocks = static_cast<uint32_t>(per_sm * sms);
  if (blocks > a.tiles) blocks = a.tiles;
  kern<<<blocks, c.t, smem, stream>>>(a);
  return static_cast<int>(cudaGetLastError());
}

using BulkFn = int (*)(BulkArgs, uint64_t, uint64_t, cudaStream_t);
template <int... Is>
constexpr std::array<BulkFn, sizeof...(Is)> make_bulk_table(std::integer_sequence<int, Is...>) {
  return {&bulk_launch_one<Is>...};
}

}  // namespace

extern "C" {
int bulk_configs() { return kBulkConfigs; }
int bulk_op(int id) { return kBulk[id].op; }
void bulk_name(int id, char* buf, int len) {
  snprintf(buf, len, "bulk CH%d S%d T%d", kBulk[id].ch, kBulk[id].s, kBulk[id].t);
}
// in_bytes: bytes of x; row_bytes: geglu output row bytes.
int bulk_launch(int id, const void* x, void* out, unsigned long long in_bytes,
                unsigned long long row_bytes, void* stream) {
  static const auto table = make_bulk_table(std::make_integer_sequence<int, kBulkConfigs>{});
  if (id < 0 || id >= kBulkConfigs) return -1;
  BulkArgs a{static_cast<const char*>(x), static_cast<char*>(out), 0, 0, 0};
  return table[id](a, in_bytes, row_bytes, static_cast<cudaStream_t>(stream));
}
}
