// Interface between the torch binding (shape checks, allocation) and the per-backend
// implementations (kernels/cuda/*.cu for the cuda backend, kernels/cpu/*.cpp for cpu).
// Plain data only: the binding resolves views and broadcasting once, so the backends see
// raw pointers and strides and the .cu files need no ATen tensor headers.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>

namespace ltx {

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
  c10::ScalarType dtype = c10::ScalarType::Float;
  int device_index = -1;
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
  c10::ScalarType dtype = c10::ScalarType::Float;
  c10::ScalarType table_dtype = c10::ScalarType::Float;
  int device_index = -1;
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
  c10::ScalarType dtype = c10::ScalarType::Float;
  int device_index = -1;
  int64_t rows = 0;
  int64_t width = 0;  // output width d
  RowMap x;           // rows of width d (GeluTanh) or 2d (Geglu)
  void* out = nullptr;  // contiguous [rows, d]
};

void launch_norm(const NormParams& p);
void launch_rope(const RopeParams& p);
void launch_activation(const ActParams& p);

}  // namespace ltx
