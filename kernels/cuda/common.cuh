// Shared device helpers: 16-byte packed vectors, fp32 conversions, reductions, launch checks.
// torch builds extensions with -D__CUDA_NO_HALF_OPERATORS__ (and friends), so every half/bf16
// conversion below is explicit.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "../ltx_kernels.h"
#include "kbuild_dtypes.h"

namespace ltx {

// ---- conversions -----------------------------------------------------------------------
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// ---- 16-byte vectors ---------------------------------------------------------------------
// A uint4 holds kVec<T> elements; unpack/pack convert the whole vector to/from fp32.
template <typename T>
inline constexpr int kVec = 16 / static_cast<int>(sizeof(T));

template <typename T>
__device__ __forceinline__ void unpack(const uint4& r, float (&f)[kVec<T>]);
template <typename T>
__device__ __forceinline__ uint4 pack(const float (&f)[kVec<T>]);

template <>
__device__ __forceinline__ void unpack<float>(const uint4& r, float (&f)[4]) {
  f[0] = __uint_as_float(r.x);
  f[1] = __uint_as_float(r.y);
  f[2] = __uint_as_float(r.z);
  f[3] = __uint_as_float(r.w);
}
template <>
__device__ __forceinline__ uint4 pack<float>(const float (&f)[4]) {
  return make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]),
                    __float_as_uint(f[3]));
}

template <>
__device__ __forceinline__ void unpack<__half>(const uint4& r, float (&f)[8]) {
  const __half2* h = reinterpret_cast<const __half2*>(&r);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 v = __half22float2(h[i]);
    f[2 * i] = v.x;
    f[2 * i + 1] = v.y;
  }
}
template <>
__device__ __forceinline__ uint4 pack<__half>(const float (&f)[8]) {
  uint4 r;
  __half2* h = reinterpret_cast<__half2*>(&r);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2half2_rn(f[2 * i], f[2 * i + 1]);
  return r;
}

template <>
__device__ __forceinline__ void unpack<__nv_bfloat16>(const uint4& r, float (&f)[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&r);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 v = __bfloat1622float2(h[i]);
    f[2 * i] = v.x;
    f[2 * i + 1] = v.y;
  }
}
template <>
__device__ __forceinline__ uint4 pack<__nv_bfloat16>(const float (&f)[8]) {
  uint4 r;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&r);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return r;
}

// Read-only loads through the non-coherent path; inputs never alias a live output except
// element-for-element (out is x), where every element is read before it is written.
// load16: data reused across rows (weight, conditioning rows, RoPE tables): cached in L1.
// stream16/store16: data touched once (x, residual, outputs): LTX_STREAM_HINTS picks the cache
// policy (0: default, 1: .cs evict-first, 2: L1::no_allocate loads + .cs stores) so that the
// stream does not evict the reused rows from L1.
#ifndef LTX_STREAM_HINTS
#define LTX_STREAM_HINTS 1
#endif
__device__ __forceinline__ uint4 load16(const void* p) {
  return __ldg(reinterpret_cast<const uint4*>(p));
}
__device__ __forceinline__ uint4 stream16(const void* p) {
#if LTX_STREAM_HINTS == 1
  return __ldcs(reinterpret_cast<const uint4*>(p));
#elif LTX_STREAM_HINTS == 2
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
#else
  return __ldg(reinterpret_cast<const uint4*>(p));
#endif
}
// stream16_once: data read exactly once by the whole grid (activations, a full-size RoPE
// table): bypasses L1 and asks L2 for 256-byte fetches (sm_80+). In bench/sweep it timed the
// same as .cs loads, within 0.1%; it is kept for the kernels whose data is never reused.
__device__ __forceinline__ uint4 stream16_once(const void* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
#else
  return __ldcs(reinterpret_cast<const uint4*>(p));
#endif
}
__device__ __forceinline__ void store16(void* p, const uint4& v) {
#if LTX_STREAM_HINTS >= 1
  __stcs(reinterpret_cast<uint4*>(p), v);
#else
  *reinterpret_cast<uint4*>(p) = v;
#endif
}

// ---- rotary tables ------------------------------------------------------------------------
// Loads kN table entries starting at p (16-byte aligned) as fp32. kOnce: a table read once
// by the whole grid (stream16_once); otherwise rows shared across heads/batch, cached in L1.
template <typename C, int kN, bool kOnce = false>
__device__ __forceinline__ void load_table(const C* p, float (&f)[kN]) {
  const auto load = [](const void* q) { return kOnce ? stream16_once(q) : load16(q); };
  if constexpr (std::is_same_v<C, float>) {
#pragma unroll
    for (int i = 0; i < kN / 4; ++i) {
      const uint4 v = load(p + 4 * i);
      f[4 * i] = __uint_as_float(v.x);
      f[4 * i + 1] = __uint_as_float(v.y);
      f[4 * i + 2] = __uint_as_float(v.z);
      f[4 * i + 3] = __uint_as_float(v.w);
    }
  } else {
    static_assert(kN == kVec<C>, "a half-precision table is read one 16-byte vector at a time");
    unpack<C>(load(p), f);
  }
}

// ---- math --------------------------------------------------------------------------------
// tanh. Half-precision outputs (HALF_OUT) use the hardware approximation (one MUFU op,
// max relative error ~2^-11, under their output rounding); float32 goes through one exp:
// 1 - 2 / (exp(2|v|) + 1), sign restored, absolute error ~1e-7, saturating cleanly.
#ifndef LTX_FAST_TANH
#define LTX_FAST_TANH 1
#endif
template <bool HALF_OUT>
__device__ __forceinline__ float tanh_fast(float v) {
#if LTX_FAST_TANH
  if constexpr (HALF_OUT) {
    float t;
    asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(v));
    return t;
  }
#endif
  const float e = __expf(2.0f * fabsf(v));
  const float t = 1.0f - __fdividef(2.0f, e + 1.0f);
  return copysignf(t, v);
}

// gelu with the tanh approximation, written as x * sigmoid(2u) (identical to
// 0.5 x (1 + tanh(u))) so that no cancellation occurs for negative x.
__device__ __forceinline__ float gelu_tanh_f(float x) {
  const float k0 = 0.7978845608028654f;  // sqrt(2 / pi)
  const float k1 = 0.044715f;
  const float u = k0 * (x + k1 * x * x * x);
  // __fdividef: 2 ulp, and 0 (the limit) once the denominator passes 2^126 (x << 0).
  return __fdividef(x, 1.0f + __expf(-2.0f * u));
}

// ---- FP8 (e4m3) row quantization (QuantParams in ltx_kernels.h) ---------------------------
// max(m, |a|) where a NaN wins, as torch's amax propagates it.
__device__ __forceinline__ float amax_step(float m, float a) {
  a = fabsf(a);
  return (a > m || a != a) ? a : m;
}

// The row's scale from its amax: clamp(min=1e-12) (a NaN stays NaN) times 1/448.
__device__ __forceinline__ float fp8_scale(float amax) {
  return __fmul_rn(amax < kFp8MinAmax ? kFp8MinAmax : amax, kE4m3InvMax);
}

// What the values are multiplied by: 1 / scale, IEEE (torch's reciprocal).
__device__ __forceinline__ float fp8_inverse(float scale) { return __frcp_rn(scale); }

// v * inv as e4m3, rounded to nearest even (|v * inv| <= 448 up to two roundings, so
// saturation never changes a value torch would produce).
__device__ __forceinline__ uint8_t to_e4m3(float v, float inv) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(__fmul_rn(v, inv), __NV_SATFINITE, __NV_E4M3));
}

// One 16-byte vector's kVec<T> values, quantized (times inv), stored as kVec<T> bytes (8 or 4).
template <int N>
__device__ __forceinline__ void store_e4m3(uint8_t* out, const float (&f)[N], float inv) {
  static_assert(N == 4 || N == 8, "a 16-byte vector holds 4 or 8 elements");
  uint32_t w[N / 4];
#pragma unroll
  for (int i = 0; i < N / 4; ++i) {
    w[i] = static_cast<uint32_t>(to_e4m3(f[4 * i], inv)) |
           static_cast<uint32_t>(to_e4m3(f[4 * i + 1], inv)) << 8 |
           static_cast<uint32_t>(to_e4m3(f[4 * i + 2], inv)) << 16 |
           static_cast<uint32_t>(to_e4m3(f[4 * i + 3], inv)) << 24;
  }
  if constexpr (N == 8) {
    __stcs(reinterpret_cast<uint2*>(out), make_uint2(w[0], w[1]));
  } else {
    __stcs(reinterpret_cast<unsigned int*>(out), w[0]);
  }
}

// ---- reductions --------------------------------------------------------------------------
// Sum over groups of `G` consecutive lanes (G a power of two <= 32). Every lane of the warp
// must call it.
template <int G>
__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
  for (int o = G / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o, G);
  return v;
}

// Sum over the whole block; `scratch` holds >= 32 floats. Result is returned to every thread.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int nwarps = (blockDim.x + 31) >> 5;
  v = group_sum<32>(v);
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nwarps ? scratch[lane] : 0.0f;
  return group_sum<32>(v);
}

// NaN-propagating max of |values| over the warp; every lane must call it.
__device__ __forceinline__ float warp_amax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = amax_step(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// NaN-propagating max of |values| over the whole block (amax_step); `scratch` holds >= 32
// floats. Result is returned to every thread.
__device__ __forceinline__ float block_amax(float v, float* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int nwarps = (blockDim.x + 31) >> 5;
  v = warp_amax(v);
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nwarps ? scratch[lane] : 0.0f;
  return warp_amax(v);
}

// Two sums at once (one barrier round for both): the block-wide version of group_sum on
// a pair. `scratch` holds >= 32 float2.
__device__ __forceinline__ float2 block_sum2(float2 v, float2* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int nwarps = (blockDim.x + 31) >> 5;
  v.x = group_sum<32>(v.x);
  v.y = group_sum<32>(v.y);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nwarps ? scratch[lane] : make_float2(0.0f, 0.0f);
  v.x = group_sum<32>(v.x);
  v.y = group_sum<32>(v.y);
  return v;
}

// ---- division by a run-time invariant -------------------------------------------------------
// n / d as a multiply-high and a shift (the IntDivider scheme): exact for n < 2^31, d >= 1.
struct FastDiv {
  uint32_t d = 1;
  uint32_t m = 1;
  uint32_t s = 0;
};
inline FastDiv make_fastdiv(uint32_t d) {
  FastDiv f;
  f.d = d;
  while ((uint64_t{1} << f.s) < d) ++f.s;
  f.m = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << f.s) - d)) / d + 1);
  return f;
}
__device__ __forceinline__ uint32_t fdiv(const FastDiv& f, uint32_t n) {
  return (__umulhi(n, f.m) + n) >> f.s;
}

// ---- host helpers ------------------------------------------------------------------------
inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Rows of m can be read as 16-byte vectors of n elements: an aligned start and strides that
// keep every row aligned. An absent operand (ptr null, strides 0) qualifies.
inline bool rows_vectorizable(const RowMap& m, int n) {
  return aligned16(m.ptr) && m.outer_stride % n == 0 && m.inner_stride % n == 0;
}

// The SM count of `device` into n, cached per device; a failed query returns its error.
inline cudaError_t sm_count(int device, int& n) {
  static int cached[64] = {0};
  if (device < 0 || device >= 64) {
    n = 132;
    return cudaSuccess;
  }
  if (cached[device] == 0) {
    int count = 0;
    const cudaError_t err = cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
    if (err != cudaSuccess) return err;
    cached[device] = count;
  }
  n = cached[device];
  return cudaSuccess;
}

// After a launch: a kernel missing from this GPU's cubin (e.g. bfloat16 on sm_75, which the
// capability matrix leaves out) surfaces as "no kernel image"; say which op and dtype.
inline Status check_launch(const char* op, Dtype dtype, int device) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return {};
  const std::string prefix = std::string("ltx_kernels.") + op + ": ";
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction) {
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    return fail(prefix + "no " + dtype_name(dtype) + " kernel was built for compute capability " +
                std::to_string(major) + "." + std::to_string(minor) +
                " (see [kbuild.cuda-capabilities] in build.toml; sm_7x builds float32 and "
                "float16 only)");
  }
  return fail(prefix + "CUDA launch failed: " + cudaGetErrorString(err));
}

}  // namespace ltx

// Dispatch on the supported dtypes: runs the callable with `scalar_t` set and yields true, or
// yields false for a dtype without a case (the launcher reports unsupported_dtype). The cases
// follow kbuild_dtypes.h: host code sees every dtype of the capability matrix, while a device
// pass for an arch without bfloat16 (sm_75) preprocesses the bf16 case away, so no bf16 kernel
// is instantiated into that arch's cubin. Python's `_capabilities.check_dtype` keeps such a
// kernel from ever being asked for there, and check_launch turns a "no kernel image" error
// into a readable one if it is.
#if KBUILD_HAS_FP32
#define LTX_CASE_FP32(...)       \
  case ::ltx::Dtype::Float32: {  \
    using scalar_t = float;      \
    __VA_ARGS__();               \
    return true;                 \
  }
#else
#define LTX_CASE_FP32(...)
#endif
#if KBUILD_HAS_FP16
#define LTX_CASE_FP16(...)       \
  case ::ltx::Dtype::Float16: {  \
    using scalar_t = __half;     \
    __VA_ARGS__();               \
    return true;                 \
  }
#else
#define LTX_CASE_FP16(...)
#endif
#if KBUILD_HAS_BF16
#define LTX_CASE_BF16(...)          \
  case ::ltx::Dtype::BFloat16: {    \
    using scalar_t = __nv_bfloat16; \
    __VA_ARGS__();                  \
    return true;                    \
  }
#else
#define LTX_CASE_BF16(...)
#endif

#define LTX_DISPATCH(DTYPE, ...)    \
  [&]() -> bool {                   \
    switch (DTYPE) {                \
      LTX_CASE_FP32(__VA_ARGS__)    \
      LTX_CASE_FP16(__VA_ARGS__)    \
      LTX_CASE_BF16(__VA_ARGS__)    \
      default:                      \
        return false;               \
    }                               \
  }()
