// Interface between the torch binding (shape checks, allocation) and the per-backend
// implementations (kernels/cuda/*.cu for the cuda backend, kernels/cpu/*.cpp for cpu).
// Plain data only: the binding resolves views and broadcasting once, picks the device and
// stream, and raises the errors a launcher reports, so the backends see raw pointers and
// strides and the .cu files include no torch header at all (c10's headers cost every nvcc
// pass of a unit seconds: host preprocessing, cudafe++ and each arch's cicc).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

// cudaStream_t is `CUstream_st*`; the declaration keeps CUDA's headers out of the CPU backend.
struct CUstream_st;

namespace ltx {

// The element types the kernels are built for (the binding converts c10::ScalarType).
enum class Dtype : int {
  Float32 = 0,
  Float16 = 1,
  BFloat16 = 2,
};

// c10::toString's name of the dtype, so that messages read as when they printed a ScalarType.
inline const char* dtype_name(Dtype d) {
  switch (d) {
    case Dtype::Float32:
      return "Float";
    case Dtype::Float16:
      return "Half";
    case Dtype::BFloat16:
      return "BFloat16";
  }
  return "Undefined";
}

// What a launch_* reports back; the binding raises it. `error`: a message raised as is.
// `cuda_error`: a failed CUDA runtime call's cudaError_t, raised as C10_CUDA_CHECK raises it.
struct [[nodiscard]] Status {
  std::string error;
  int cuda_error = 0;
};

inline Status fail(std::string message) { return Status{std::move(message), 0}; }

// "ltx_kernels.<op>: unsupported dtype <name>" (the binding checks dtypes first).
inline Status unsupported_dtype(const char* op, Dtype d) {
  return fail(std::string("ltx_kernels.") + op + ": unsupported dtype " + dtype_name(d));
}

// Row r of a [rows, hidden] operand starts at element
//   (r / inner) * outer_stride + (r % inner) * inner_stride
// of `ptr`. Covers contiguous tensors, 2-level strided views (e.g. slices of a fused
// projection) and broadcast conditioning (a stride of 0), e.g. per-sample [B, 1, H]
// against x [B, S, H]: inner = S, outer_stride = H, inner_stride = 0.
struct RowMap {
  const void* ptr = nullptr;
  int64_t inner = 1;
  int64_t outer_stride = 0;
  int64_t inner_stride = 0;
};

enum class NormKind : int {
  Rms = 0,            // out = x * rstd * w
  GatedResidual = 1,  // out = residual + tanh(gate) * (x * rstd * w)
  AdaLnRms = 2,       // out = (x * rstd * w) * (1 + scale) + shift
  AdaLnLayer = 3,     // out = ((x - mean) * rstd * w) * (1 + scale) + shift
};

struct NormParams {
  NormKind kind = NormKind::Rms;
  Dtype dtype = Dtype::Float32;
  int device_index = -1;
  CUstream_st* stream = nullptr;  // cuda: torch's current stream on device_index
  int64_t rows = 0;
  int64_t hidden = 0;
  float eps = 1e-6f;
  void* out = nullptr;  // contiguous [rows, hidden]
  RowMap x;
  RowMap residual;  // GatedResidual
  RowMap gate;      // GatedResidual
  RowMap scale;     // AdaLn*
  RowMap shift;     // AdaLn*
  const void* weight = nullptr;  // contiguous [hidden] or nullptr
};

// Interleaved-pair rotary embedding over x viewed as [batch, seq, width].
struct RopeParams {
  Dtype dtype = Dtype::Float32;
  Dtype table_dtype = Dtype::Float32;
  int device_index = -1;
  CUstream_st* stream = nullptr;  // cuda: torch's current stream on device_index
  int64_t batch = 0;
  int64_t seq = 0;
  int64_t width = 0;  // heads * head_dim
  const void* x = nullptr;
  int64_t x_batch_stride = 0;
  int64_t x_seq_stride = 0;
  void* out = nullptr;  // contiguous [batch, seq, width]
  const void* cos = nullptr;  // contiguous [table_batch, seq, table_width]
  const void* sin = nullptr;
  int64_t table_batch = 1;  // 1 (shared) or batch
  int64_t table_width = 0;  // head_dim (shared by heads) or width
};

enum class ActKind : int {
  GeluTanh = 0,  // out = gelu_tanh(x)
  Geglu = 1,     // out = x[..., :d] * gelu_tanh(x[..., d:])
};

struct ActParams {
  ActKind kind = ActKind::GeluTanh;
  Dtype dtype = Dtype::Float32;
  int device_index = -1;
  CUstream_st* stream = nullptr;  // cuda: torch's current stream on device_index
  int64_t rows = 0;
  int64_t width = 0;  // output width d
  RowMap x;           // rows of width d (GeluTanh) or 2d (Geglu)
  void* out = nullptr;  // contiguous [rows, d]
};

// LTX-Video attention prologue: q and k each RMS-normalized across all heads (one row of
// `width` = heads * head_dim per token, weight of [width]), each rounded to the dtype as the
// separate norm would, then rotated by the interleaved-pair RoPE with full-width tables.
// One pass reads q, k and the table row of a token once for every batch that shares it.
struct QkNormRopeParams {
  Dtype dtype = Dtype::Float32;
  Dtype table_dtype = Dtype::Float32;
  int device_index = -1;
  CUstream_st* stream = nullptr;  // cuda: torch's current stream on device_index
  int64_t batch = 0;
  int64_t seq = 0;
  int64_t width = 0;
  float eps = 1e-5f;
  const void* q = nullptr;  // row (b, s) at b * q_batch_stride + s * q_seq_stride
  int64_t q_batch_stride = 0;
  int64_t q_seq_stride = 0;
  const void* k = nullptr;
  int64_t k_batch_stride = 0;
  int64_t k_seq_stride = 0;
  const void* q_weight = nullptr;  // contiguous [width] or nullptr
  const void* k_weight = nullptr;
  void* q_out = nullptr;  // contiguous [batch, seq, width]
  void* k_out = nullptr;
  const void* cos = nullptr;  // contiguous [table_batch, seq, width]
  const void* sin = nullptr;
  int64_t table_batch = 1;  // 1 (shared by the batch) or batch
  // Grid mode (cos == sin == nullptr): the tables are computed in the kernel from the token's
  // (frame, row, col) position, as LTXVideoRotaryPosEmbed builds them: the first width % 6
  // channels unrotated, then pair i of the rest at angle freqs[i / 3] * axis_{i % 3}[coord]
  // (axes interleaved f, h, w), one fp32 product rounded as torch rounds it. Token s is
  // (s / (grid_h * grid_w), s / grid_w % grid_h, s % grid_w), shared by the batch.
  const float* freqs = nullptr;   // [width / 6]
  const float* axis_f = nullptr;  // [frames]: 2 * coord - 1 per frame
  const float* axis_h = nullptr;  // [grid_h]
  const float* axis_w = nullptr;  // [grid_w]
  int64_t grid_h = 1;
  int64_t grid_w = 1;
};

// Residual updates of a transformer block, over rows of a [rows, hidden] view:
//   h_out = h + y * gate              (gate absent: h + y)
//   norm_out = rms_norm(h_out) * weight * (1 + scale) + shift    (ResidualAdaLn only)
// h_out is rounded to the dtype before its statistics are taken, as when the two steps run
// separately.
enum class ResidualKind : int {
  Gated = 0,
  AdaLn = 1,
};

struct ResidualParams {
  ResidualKind kind = ResidualKind::Gated;
  Dtype dtype = Dtype::Float32;
  int device_index = -1;
  CUstream_st* stream = nullptr;  // cuda: torch's current stream on device_index
  int64_t rows = 0;
  int64_t hidden = 0;
  float eps = 1e-6f;
  RowMap h;
  RowMap y;
  RowMap gate;  // ptr == nullptr: no gate
  RowMap scale;  // AdaLn
  RowMap shift;  // AdaLn
  const void* weight = nullptr;  // AdaLn: contiguous [hidden] or nullptr
  void* h_out = nullptr;     // contiguous [rows, hidden]
  void* norm_out = nullptr;  // AdaLn: contiguous [rows, hidden]; unused with norm_fp8
  // AdaLn, optional: the norm written quantized instead (see QuantParams: the norm rounded to
  // the dtype, then e4m3 values and a float32 scale per row).
  uint8_t* norm_fp8 = nullptr;     // contiguous [rows, hidden] e4m3
  float* norm_fp8_scale = nullptr;  // [rows]
};

// Row-wise FP8 (e4m3, "fn": no infinities, max 448) quantization for FP8 matrix products.
// Per row r of v = x (or gelu_tanh(x) rounded to the dtype, as the separate op writes it):
//   scale[r] = max(amax_j |v[r, j]|, 1e-12) * (1 / 448)     (float32; NaN propagates)
//   values[r, j] = e4m3(v[r, j] * (1 / scale[r]))            (round to nearest even)
// the float32 arithmetic of ltx_kernels.fp8.quantize_rows, bit for bit, on either device.
struct QuantParams {
  Dtype dtype = Dtype::Float32;
  int device_index = -1;
  CUstream_st* stream = nullptr;  // cuda: torch's current stream on device_index
  int64_t rows = 0;
  int64_t hidden = 0;
  bool gelu = false;
  RowMap x;
  uint8_t* values = nullptr;  // contiguous [rows, hidden]
  float* scale = nullptr;     // [rows]
};

constexpr float kE4m3Max = 448.0f;
constexpr float kE4m3InvMax = 1.0f / kE4m3Max;
constexpr float kFp8MinAmax = 1e-12f;

// The CUDA launchers run on the device the binding made current, on p.stream.
Status launch_norm(const NormParams& p);
Status launch_rope(const RopeParams& p);
Status launch_activation(const ActParams& p);
Status launch_qk_norm_rope(const QkNormRopeParams& p);
Status launch_residual(const ResidualParams& p);
Status launch_quantize(const QuantParams& p);

}  // namespace ltx
