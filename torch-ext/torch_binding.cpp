// Op schemas and the shape/dtype checks shared by both backends. It resolves views and
// broadcasting into plain pointers and strides (kernels/ltx_kernels.h) and calls the backend's
// launch_* (CUDA kernels in the cuda variant, C++ loops in the cpu variant), registered under the
// matching dispatch key. Everything torch-facing lives here, so that the kernels include no
// torch header: the device guard and stream (cuda variant), dtype conversion, raising errors.
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/_addmm_activation.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/mm.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#if defined(CUDA_KERNEL)
#include <ATen/cuda/EmptyTensor.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "../kernels/ltx_kernels.h"
#include "registration.h"
#include "torch_binding.h"

namespace ltx_binding {
namespace {

using ltx::RowMap;

bool supported_dtype(c10::ScalarType t) {
  return t == at::kFloat || t == at::kHalf || t == at::kBFloat16;
}

void check_x(const at::Tensor& x, const char* op) {
  TORCH_CHECK(x.defined(), "ltx_kernels.", op, ": x is undefined");
  TORCH_CHECK(supported_dtype(x.scalar_type()), "ltx_kernels.", op,
              ": x must be float32, float16 or bfloat16, got ", x.scalar_type());
  TORCH_CHECK(x.dim() >= 1, "ltx_kernels.", op, ": x must have at least one dimension");
}

void check_operand(const at::Tensor& t, const at::Tensor& x, const char* op, const char* name) {
  TORCH_CHECK(t.scalar_type() == x.scalar_type(), "ltx_kernels.", op, ": ", name,
              " must have the dtype of x (", x.scalar_type(), "), got ", t.scalar_type());
  TORCH_CHECK(t.device() == x.device(), "ltx_kernels.", op, ": ", name, " is on ", t.device(),
              " but x is on ", x.device());
}

int device_index(const at::Tensor& x) { return x.is_cuda() ? x.get_device() : -1; }

// A new contiguous tensor of `sizes` with x's dtype on x's device, from the backend's allocator
// directly: at::empty's dispatcher round trip (BackendSelect, then the backend) is a measurable
// part of a small op's host time. x's device is checked first (the ops dispatch on any operand's
// device, so a CPU x can reach the cuda kernels).
at::Tensor new_like(const at::Tensor& x, at::IntArrayRef sizes, const char* op,
                    std::optional<c10::ScalarType> dtype = std::nullopt) {
  const c10::ScalarType type = dtype.value_or(x.scalar_type());
#if defined(CUDA_KERNEL)
  TORCH_CHECK(x.is_cuda(), "ltx_kernels.", op, ": the first tensor operand is on ", x.device(),
              " but others are on a CUDA device; put all operands on one device");
  // On the current device (the usual case) straight from the caching allocator, which serves
  // the current device; at::detail::empty_cuda would make it current with a guard first (a
  // device query on entry, a context query and a device query on exit).
  if (c10::cuda::current_device() == x.get_device()) {
    return at::Tensor(at::detail::empty_generic(sizes, c10::cuda::CUDACachingAllocator::get(),
                                                c10::DispatchKeySet(c10::DispatchKey::CUDA),
                                                type, std::nullopt));
  }
  return at::Tensor(at::detail::empty_cuda(sizes, type, x.device(), std::nullopt));
#else
  TORCH_CHECK(x.is_cpu(), "ltx_kernels.", op, ": the first tensor operand is on ", x.device(),
              " but others are on the CPU; put all operands on one device");
  return at::Tensor(at::detail::empty_cpu(sizes, type));
#endif
}

// Only called on a dtype that supported_dtype accepted.
ltx::Dtype dtype_of(c10::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return ltx::Dtype::Float32;
    case at::kHalf:
      return ltx::Dtype::Float16;
    case at::kBFloat16:
      return ltx::Dtype::BFloat16;
    default:
      TORCH_CHECK(false, "ltx_kernels: unsupported dtype ", t);
  }
  return ltx::Dtype::Float32;  // unreachable: TORCH_CHECK(false) throws
}

// Runs a backend launcher and raises what it reports. The cuda variant first makes the
// operands' device current and hands the launcher torch's current stream on it.
template <typename Params>
void launch(ltx::Status (*launcher)(const Params&), Params p) {
#if defined(CUDA_KERNEL)
  // A guard costs device queries on entry and exit; the operands' device is almost always
  // the current one already.
  const auto device = static_cast<c10::DeviceIndex>(p.device_index);
  std::optional<c10::cuda::CUDAGuard> guard;
  if (c10::cuda::current_device() != device) guard.emplace(device);
  p.stream = c10::cuda::getCurrentCUDAStream(device).stream();
#endif
  const ltx::Status status = launcher(p);
#if defined(CUDA_KERNEL)
  if (status.cuda_error != 0) C10_CUDA_CHECK(static_cast<cudaError_t>(status.cuda_error));
#endif
  TORCH_CHECK(status.error.empty(), status.error);
}

// Rows of `t` (already of shape leading + [width], last dim contiguous) as a RowMap, merging
// leading dims whose strides allow it. More than two irreducible levels: copy to contiguous.
RowMap rows_of(at::Tensor& t) {
  if (t.stride(-1) != 1 && t.size(-1) > 1) t = t.contiguous();
  // (size, stride), innermost first; no heap allocation for up to 4 levels.
  c10::SmallVector<std::pair<int64_t, int64_t>, 4> levels;
  for (int64_t d = t.dim() - 2; d >= 0; --d) {
    const int64_t size = t.size(d);
    const int64_t stride = t.stride(d);
    if (size == 1) continue;
    if (!levels.empty() && stride == levels.back().first * levels.back().second) {
      levels.back().first *= size;
    } else {
      levels.emplace_back(size, stride);
    }
  }
  if (levels.size() > 2) {
    t = t.contiguous();
    return rows_of(t);
  }
  RowMap m;
  m.ptr = t.data_ptr();
  if (levels.size() == 1) {
    m.inner = 1;
    m.outer_stride = levels[0].second;
  } else if (levels.size() == 2) {
    m.inner = levels[0].first;
    m.inner_stride = levels[0].second;
    m.outer_stride = levels[1].second;
  }
  return m;
}

// A conditioning operand (scale, shift, gate, residual) broadcast against x. A 2-D [B, H]
// tensor with an x of three or more dims is per-sample ([B, 1, ..., 1, H]), as DiT-style
// conditioning is written; otherwise ordinary broadcasting applies.
RowMap cond_rows(const at::Tensor& c, const at::Tensor& x, const char* op, const char* name,
                 at::Tensor& keep) {
  check_operand(c, x, op, name);
  const int64_t h = x.size(-1);
  TORCH_CHECK(c.dim() >= 1 && c.size(-1) == h, "ltx_kernels.", op, ": ", name,
              " must end in the hidden size ", h, ", got shape ", c.sizes());
  at::Tensor v = c;
  if (c.dim() == 2 && x.dim() >= 3 && c.size(0) == x.size(0)) {
    std::vector<int64_t> shape(x.dim(), 1);
    shape[0] = c.size(0);
    shape.back() = h;
    v = c.view(shape);
  }
  TORCH_CHECK(v.dim() <= x.dim(), "ltx_kernels.", op, ": ", name, " of shape ", c.sizes(),
              " has more dims than x ", x.sizes());
  for (int64_t i = 1; i <= v.dim(); ++i) {
    const int64_t cs = v.size(-i);
    TORCH_CHECK(cs == 1 || cs == x.size(-i), "ltx_kernels.", op, ": ", name, " of shape ",
                c.sizes(), " does not broadcast to x ", x.sizes(),
                " (expected [H], [B, H], [B, 1, H] or the shape of x)");
  }
  keep = v.expand(x.sizes());
  return rows_of(keep);
}

std::optional<at::Tensor> checked_weight(const std::optional<at::Tensor>& weight,
                                         const at::Tensor& x, const char* op) {
  if (!weight.has_value() || !weight->defined()) return std::nullopt;
  check_operand(*weight, x, op, "weight");
  TORCH_CHECK(weight->dim() == 1 && weight->size(0) == x.size(-1), "ltx_kernels.", op,
              ": weight must have shape [", x.size(-1), "], got ", weight->sizes());
  return weight->contiguous();
}

void check_out(const at::Tensor& out, const at::Tensor& x, at::IntArrayRef shape,
               const char* op) {
  TORCH_CHECK(out.scalar_type() == x.scalar_type(), "ltx_kernels.", op,
              ": out must have the dtype of x (", x.scalar_type(), "), got ", out.scalar_type());
  TORCH_CHECK(out.device() == x.device(), "ltx_kernels.", op, ": out is on ", out.device(),
              " but x is on ", x.device());
  TORCH_CHECK(out.sizes() == shape, "ltx_kernels.", op, ": out must have shape ", shape,
              ", got ", out.sizes());
  TORCH_CHECK(out.is_contiguous(), "ltx_kernels.", op, ": out must be contiguous");
}

ltx::NormParams norm_params(const at::Tensor& out, at::Tensor& x, ltx::NormKind kind,
                            const std::optional<at::Tensor>& w, double eps) {
  ltx::NormParams p;
  p.kind = kind;
  p.dtype = dtype_of(x.scalar_type());
  p.device_index = device_index(x);
  p.hidden = x.size(-1);
  p.rows = p.hidden == 0 ? 0 : x.numel() / p.hidden;
  p.eps = static_cast<float>(eps);
  p.out = out.data_ptr();
  p.weight = w.has_value() ? w->data_ptr() : nullptr;
  if (p.rows > 0) p.x = rows_of(x);
  return p;
}

ltx::NormKind adaln_kind(c10::string_view norm) {
  if (norm == "rms") return ltx::NormKind::AdaLnRms;
  if (norm == "layer") return ltx::NormKind::AdaLnLayer;
  TORCH_CHECK(false, "ltx_kernels.adaln: norm must be \"rms\" or \"layer\", got \"",
              std::string(norm), "\"");
  return ltx::NormKind::AdaLnRms;  // unreachable: TORCH_CHECK(false) throws
}

std::vector<int64_t> geglu_shape(const at::Tensor& x) {
  check_x(x, "geglu");
  TORCH_CHECK(x.size(-1) % 2 == 0, "ltx_kernels.geglu: the last dim of x must be even, got ",
              x.size(-1));
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() /= 2;
  return shape;
}

}  // namespace

namespace {

// RMSNorm into a checked `out`, with a checked weight.
void rms_norm_into(const at::Tensor& out, const at::Tensor& x_in,
                   const std::optional<at::Tensor>& w, double eps) {
  at::Tensor x = x_in;
  launch(ltx::launch_norm, norm_params(out, x, ltx::NormKind::Rms, w, eps));
}

}  // namespace

void rms_norm_out(at::Tensor& out, const at::Tensor& x, const std::optional<at::Tensor>& weight,
                  double eps) {
  check_x(x, "rms_norm");
  check_out(out, x, x.sizes(), "rms_norm");
  rms_norm_into(out, x, checked_weight(weight, x, "rms_norm"), eps);
}

// Checks x and the weight once, and the output it allocates not at all (unlike rms_norm_out's
// `out`): small shapes are bound by this host time (bench/NOTES.md, issue #41).
at::Tensor rms_norm(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps) {
  check_x(x, "rms_norm");
  const auto w = checked_weight(weight, x, "rms_norm");
  at::Tensor out = new_like(x, x.sizes(), "rms_norm");
  rms_norm_into(out, x, w, eps);
  return out;
}

void fused_residual_gated_rms_norm_out(at::Tensor& out, const at::Tensor& x_in,
                                       const at::Tensor& residual, const at::Tensor& gate,
                                       const std::optional<at::Tensor>& weight, double eps) {
  const char* op = "fused_residual_gated_rms_norm";
  check_x(x_in, op);
  check_out(out, x_in, x_in.sizes(), op);
  const auto w = checked_weight(weight, x_in, op);
  at::Tensor x = x_in;
  at::Tensor keep_r, keep_g;
  auto p = norm_params(out, x, ltx::NormKind::GatedResidual, w, eps);
  if (p.rows == 0) return;
  p.residual = cond_rows(residual, x_in, op, "residual", keep_r);
  p.gate = cond_rows(gate, x_in, op, "gate", keep_g);
  launch(ltx::launch_norm, p);
}

at::Tensor fused_residual_gated_rms_norm(const at::Tensor& x, const at::Tensor& residual,
                                         const at::Tensor& gate,
                                         const std::optional<at::Tensor>& weight, double eps) {
  check_x(x, "fused_residual_gated_rms_norm");
  at::Tensor out = new_like(x, x.sizes(), "fused_residual_gated_rms_norm");
  fused_residual_gated_rms_norm_out(out, x, residual, gate, weight, eps);
  return out;
}

void adaln_out(at::Tensor& out, const at::Tensor& x_in, const at::Tensor& scale,
               const at::Tensor& shift, const std::optional<at::Tensor>& weight, double eps,
               c10::string_view norm) {
  check_x(x_in, "adaln");
  check_out(out, x_in, x_in.sizes(), "adaln");
  const auto kind = adaln_kind(norm);
  const auto w = checked_weight(weight, x_in, "adaln");
  at::Tensor x = x_in;
  at::Tensor keep_s, keep_b;
  auto p = norm_params(out, x, kind, w, eps);
  if (p.rows == 0) return;
  p.scale = cond_rows(scale, x_in, "adaln", "scale", keep_s);
  p.shift = cond_rows(shift, x_in, "adaln", "shift", keep_b);
  launch(ltx::launch_norm, p);
}

at::Tensor adaln(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift,
                 const std::optional<at::Tensor>& weight, double eps, c10::string_view norm) {
  check_x(x, "adaln");
  at::Tensor out = new_like(x, x.sizes(), "adaln");
  adaln_out(out, x, scale, shift, weight, eps, norm);
  return out;
}

void rope_3d_out(at::Tensor& out, const at::Tensor& x_in, const at::Tensor& cos_in,
                 const at::Tensor& sin_in) {
  const char* op = "rope_3d";
  check_x(x_in, op);
  TORCH_CHECK(x_in.dim() == 3 || x_in.dim() == 4, "ltx_kernels.rope_3d: x must be ",
              "[batch, seq, heads, head_dim] or [batch, seq, heads * head_dim], got ",
              x_in.sizes());
  check_out(out, x_in, x_in.sizes(), op);
  TORCH_CHECK(cos_in.sizes() == sin_in.sizes() && cos_in.scalar_type() == sin_in.scalar_type(),
              "ltx_kernels.rope_3d: cos and sin must have the same shape and dtype, got ",
              cos_in.sizes(), " ", cos_in.scalar_type(), " and ", sin_in.sizes(), " ",
              sin_in.scalar_type());
  TORCH_CHECK(cos_in.device() == x_in.device(), "ltx_kernels.rope_3d: cos/sin are on ",
              cos_in.device(), " but x is on ", x_in.device());
  TORCH_CHECK(cos_in.scalar_type() == at::kFloat || cos_in.scalar_type() == x_in.scalar_type(),
              "ltx_kernels.rope_3d: cos/sin must be float32 or the dtype of x (",
              x_in.scalar_type(), "), got ", cos_in.scalar_type());
  const int64_t batch = x_in.size(0);
  const int64_t seq = x_in.size(1);
  const int64_t head_dim = x_in.size(-1);
  const int64_t width = x_in.dim() == 4 ? x_in.size(2) * head_dim : head_dim;
  TORCH_CHECK(head_dim % 2 == 0, "ltx_kernels.rope_3d: head_dim must be even, got ", head_dim);

  at::Tensor x = x_in;
  const bool heads_merge = x.dim() == 3 || x.size(2) == 1 || x.stride(2) == head_dim;
  if (x.stride(-1) != 1 || !heads_merge) x = x.contiguous();

  // Tables: [seq, D], [1 or batch, seq, D] or [1 or batch, seq, 1, D], D = head_dim or width.
  at::Tensor cos = cos_in;
  at::Tensor sin = sin_in;
  if (cos.dim() == 4) {
    TORCH_CHECK(cos.size(2) == 1, "ltx_kernels.rope_3d: a 4-D cos/sin must be ",
                "[batch, seq, 1, dim], got ", cos.sizes());
    cos = cos.squeeze(2);
    sin = sin.squeeze(2);
  }
  if (cos.dim() == 2) {
    cos = cos.unsqueeze(0);
    sin = sin.unsqueeze(0);
  }
  TORCH_CHECK(cos.dim() == 3 && (cos.size(0) == 1 || cos.size(0) == batch) &&
                  cos.size(1) == seq && (cos.size(2) == head_dim || cos.size(2) == width),
              "ltx_kernels.rope_3d: cos/sin of shape ", cos_in.sizes(),
              " do not fit x of shape ", x_in.sizes(), " (expected [seq, D], [batch or 1, seq, D]",
              " with D = head_dim ", head_dim, " or heads * head_dim ", width, ")");
  cos = cos.contiguous();
  sin = sin.contiguous();

  ltx::RopeParams p;
  p.dtype = dtype_of(x.scalar_type());
  p.table_dtype = dtype_of(cos.scalar_type());
  p.device_index = device_index(x);
  p.batch = batch;
  p.seq = seq;
  p.width = width;
  p.x = x.data_ptr();
  p.x_batch_stride = batch > 1 ? x.stride(0) : 0;
  p.x_seq_stride = seq > 1 ? x.stride(1) : 0;
  p.out = out.data_ptr();
  p.cos = cos.data_ptr();
  p.sin = sin.data_ptr();
  p.table_batch = cos.size(0);
  p.table_width = cos.size(2);
  if (p.table_batch == 1 || batch == 1) p.table_batch = 1;
  launch(ltx::launch_rope, p);
}

at::Tensor rope_3d(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  check_x(x, "rope_3d");
  at::Tensor out = new_like(x, x.sizes(), "rope_3d");
  rope_3d_out(out, x, cos, sin);
  return out;
}

void geglu_out(at::Tensor& out, const at::Tensor& x_in) {
  const auto shape = geglu_shape(x_in);
  check_out(out, x_in, shape, "geglu");
  ltx::ActParams p;
  p.kind = ltx::ActKind::Geglu;
  p.dtype = dtype_of(x_in.scalar_type());
  p.device_index = device_index(x_in);
  p.width = shape.back();
  p.rows = p.width == 0 ? 0 : out.numel() / p.width;
  p.out = out.data_ptr();
  at::Tensor x = x_in;
  if (p.rows > 0) p.x = rows_of(x);
  launch(ltx::launch_activation, p);
}

at::Tensor geglu(const at::Tensor& x) {
  at::Tensor out = new_like(x, geglu_shape(x), "geglu");
  geglu_out(out, x);
  return out;
}

void gelu_tanh_out(at::Tensor& out, const at::Tensor& x_in) {
  TORCH_CHECK(x_in.defined() && supported_dtype(x_in.scalar_type()),
              "ltx_kernels.gelu_tanh: x must be float32, float16 or bfloat16");
  check_out(out, x_in, x_in.sizes(), "gelu_tanh");
  const at::Tensor x = x_in.contiguous();
  ltx::ActParams p;
  p.kind = ltx::ActKind::GeluTanh;
  p.dtype = dtype_of(x.scalar_type());
  p.device_index = device_index(x);
  p.rows = 1;
  p.width = x.numel();
  p.x.ptr = x.data_ptr();
  p.out = out.data_ptr();
  launch(ltx::launch_activation, p);
}

at::Tensor gelu_tanh(const at::Tensor& x) {
  TORCH_CHECK(x.defined(), "ltx_kernels.gelu_tanh: x is undefined");
  at::Tensor out = new_like(x, x.sizes(), "gelu_tanh");
  gelu_tanh_out(out, x);
  return out;
}

// The [batch, seq, width] layout of a q or k operand: last dim contiguous (else copied).
struct SeqRows {
  at::Tensor t;
  int64_t batch_stride;
  int64_t seq_stride;
};

SeqRows seq_rows(const at::Tensor& x) {
  at::Tensor t = x.stride(-1) == 1 || x.size(-1) <= 1 ? x : x.contiguous();
  return {t, t.size(0) > 1 ? t.stride(0) : 0, t.size(1) > 1 ? t.stride(1) : 0};
}

// q/k operands, weights and outputs of qk_norm_rope and qk_norm_rope_grid; the caller adds the
// rotation's source (tables or grid) and launches.
struct QkCall {
  ltx::QkNormRopeParams p;
  at::Tensor q_out, k_out;
  SeqRows qr, kr;
  std::optional<at::Tensor> wq, wk;
};

QkCall qk_call(const at::Tensor& q, const at::Tensor& k, const std::optional<at::Tensor>& q_weight,
               const std::optional<at::Tensor>& k_weight, double eps, const char* op) {
  check_x(q, op);
  check_operand(k, q, op, "k");
  TORCH_CHECK(q.dim() == 3 && k.sizes() == q.sizes(), "ltx_kernels.", op, ": q and k must ",
              "both be [batch, seq, heads * head_dim], got ", q.sizes(), " and ", k.sizes());
  TORCH_CHECK(q.size(2) % 2 == 0, "ltx_kernels.", op, ": the width must be even, got ", q.size(2));
  QkCall c;
  c.wq = checked_weight(q_weight, q, op);
  c.wk = checked_weight(k_weight, q, op);
  c.q_out = new_like(q, q.sizes(), op);
  c.k_out = new_like(q, q.sizes(), op);
  c.qr = seq_rows(q);
  c.kr = seq_rows(k);
  ltx::QkNormRopeParams& p = c.p;
  p.dtype = dtype_of(q.scalar_type());
  p.device_index = device_index(q);
  p.batch = q.size(0);
  p.seq = q.size(1);
  p.width = q.size(2);
  p.eps = static_cast<float>(eps);
  p.q = c.qr.t.data_ptr();
  p.q_batch_stride = c.qr.batch_stride;
  p.q_seq_stride = c.qr.seq_stride;
  p.k = c.kr.t.data_ptr();
  p.k_batch_stride = c.kr.batch_stride;
  p.k_seq_stride = c.kr.seq_stride;
  p.q_weight = c.wq.has_value() ? c.wq->data_ptr() : nullptr;
  p.k_weight = c.wk.has_value() ? c.wk->data_ptr() : nullptr;
  p.q_out = c.q_out.data_ptr();
  p.k_out = c.k_out.data_ptr();
  return c;
}

std::tuple<at::Tensor, at::Tensor> qk_norm_rope(const at::Tensor& q, const at::Tensor& k,
                                                const std::optional<at::Tensor>& q_weight,
                                                const std::optional<at::Tensor>& k_weight,
                                                const at::Tensor& cos_in, const at::Tensor& sin_in,
                                                double eps) {
  QkCall call = qk_call(q, k, q_weight, k_weight, eps, "qk_norm_rope");
  const int64_t batch = q.size(0);
  const int64_t seq = q.size(1);
  const int64_t width = q.size(2);
  TORCH_CHECK(cos_in.sizes() == sin_in.sizes() && cos_in.scalar_type() == sin_in.scalar_type(),
              "ltx_kernels.qk_norm_rope: cos and sin must have the same shape and dtype, got ",
              cos_in.sizes(), " ", cos_in.scalar_type(), " and ", sin_in.sizes(), " ",
              sin_in.scalar_type());
  TORCH_CHECK(cos_in.device() == q.device(), "ltx_kernels.qk_norm_rope: cos/sin are on ",
              cos_in.device(), " but q is on ", q.device());
  TORCH_CHECK(cos_in.scalar_type() == at::kFloat || cos_in.scalar_type() == q.scalar_type(),
              "ltx_kernels.qk_norm_rope: cos/sin must be float32 or the dtype of q (",
              q.scalar_type(), "), got ", cos_in.scalar_type());
  at::Tensor cos = cos_in.dim() == 2 ? cos_in.unsqueeze(0) : cos_in;
  at::Tensor sin = sin_in.dim() == 2 ? sin_in.unsqueeze(0) : sin_in;
  TORCH_CHECK(cos.dim() == 3 && (cos.size(0) == 1 || cos.size(0) == batch) &&
                  cos.size(1) == seq && cos.size(2) == width,
              "ltx_kernels.qk_norm_rope: cos/sin of shape ", cos_in.sizes(), " do not fit q of ",
              "shape ", q.sizes(), " (expected [seq, width] or [batch or 1, seq, width])");
  // A table expanded over the batch (stride 0) is one shared table.
  const bool shared = cos.size(0) == 1 || (cos.stride(0) == 0 && sin.stride(0) == 0);
  if (shared) {
    cos = cos.select(0, 0).unsqueeze(0);
    sin = sin.select(0, 0).unsqueeze(0);
  }
  cos = cos.contiguous();
  sin = sin.contiguous();

  ltx::QkNormRopeParams& p = call.p;
  p.table_dtype = dtype_of(cos.scalar_type());
  p.cos = cos.data_ptr();
  p.sin = sin.data_ptr();
  p.table_batch = cos.size(0) == 1 || batch == 1 ? 1 : batch;
  launch(ltx::launch_qk_norm_rope, p);
  return {call.q_out, call.k_out};
}

std::tuple<at::Tensor, at::Tensor> qk_norm_rope_grid(const at::Tensor& q, const at::Tensor& k,
                                                     const std::optional<at::Tensor>& q_weight,
                                                     const std::optional<at::Tensor>& k_weight,
                                                     const at::Tensor& freqs, const at::Tensor& axis_f,
                                                     const at::Tensor& axis_h, const at::Tensor& axis_w,
                                                     double eps) {
  const char* op = "qk_norm_rope_grid";
  QkCall call = qk_call(q, k, q_weight, k_weight, eps, op);
  const int64_t width = q.size(2);
  const std::pair<const at::Tensor*, const char*> vectors[] = {
      {&freqs, "freqs"}, {&axis_f, "axis_f"}, {&axis_h, "axis_h"}, {&axis_w, "axis_w"}};
  for (const auto& [t, name] : vectors) {
    TORCH_CHECK(t->scalar_type() == at::kFloat && t->dim() == 1 && t->device() == q.device(),
                "ltx_kernels.qk_norm_rope_grid: ", name, " must be a 1-D float32 tensor on ",
                q.device(), ", got ", t->scalar_type(), " ", t->sizes(), " on ", t->device());
  }
  TORCH_CHECK(freqs.size(0) == width / 6, "ltx_kernels.qk_norm_rope_grid: freqs must have width / 6 = ",
              width / 6, " bands (LTXVideoRotaryPosEmbed's dim // 6), got ", freqs.size(0));
  TORCH_CHECK(axis_f.size(0) * axis_h.size(0) * axis_w.size(0) == q.size(1),
              "ltx_kernels.qk_norm_rope_grid: a grid of ", axis_f.size(0), " x ", axis_h.size(0),
              " x ", axis_w.size(0), " positions does not cover the ", q.size(1), " tokens of q");
  const at::Tensor f = freqs.contiguous(), af = axis_f.contiguous(), ah = axis_h.contiguous(),
                   aw = axis_w.contiguous();
  ltx::QkNormRopeParams& p = call.p;
  p.freqs = f.data_ptr<float>();
  p.axis_f = af.data_ptr<float>();
  p.axis_h = ah.data_ptr<float>();
  p.axis_w = aw.data_ptr<float>();
  p.grid_h = std::max<int64_t>(ah.size(0), 1);
  p.grid_w = std::max<int64_t>(aw.size(0), 1);
  launch(ltx::launch_qk_norm_rope, p);
  return {call.q_out, call.k_out};
}

ltx::ResidualParams residual_params(ltx::ResidualKind kind, const at::Tensor& h_in,
                                    const at::Tensor& y, const std::optional<at::Tensor>& gate,
                                    const at::Tensor& h_out, const char* op, at::Tensor (&keep)[3]) {
  check_x(h_in, op);
  check_operand(y, h_in, op, "y");
  TORCH_CHECK(y.sizes() == h_in.sizes(), "ltx_kernels.", op, ": y must have the shape of h ",
              h_in.sizes(), ", got ", y.sizes());
  ltx::ResidualParams p;
  p.kind = kind;
  p.dtype = dtype_of(h_in.scalar_type());
  p.device_index = device_index(h_in);
  p.hidden = h_in.size(-1);
  p.rows = p.hidden == 0 ? 0 : h_in.numel() / p.hidden;
  p.h_out = h_out.data_ptr();
  if (p.rows == 0) return p;
  keep[0] = h_in;
  p.h = rows_of(keep[0]);
  keep[1] = y;
  p.y = rows_of(keep[1]);
  if (gate.has_value() && gate->defined()) p.gate = cond_rows(*gate, h_in, op, "gate", keep[2]);
  return p;
}

at::Tensor gated_residual(const at::Tensor& h, const at::Tensor& y,
                          const std::optional<at::Tensor>& gate) {
  check_x(h, "gated_residual");
  at::Tensor out = new_like(h, h.sizes(), "gated_residual");
  at::Tensor keep[3];
  const auto p = residual_params(ltx::ResidualKind::Gated, h, y, gate, out, "gated_residual", keep);
  launch(ltx::launch_residual, p);
  return out;
}

// x's shape with a last dim of 1: the per-row FP8 scales.
std::vector<int64_t> row_scale_shape(const at::Tensor& x) {
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = 1;
  return shape;
}

// residual_adaln and residual_adaln_fp8: {h_out, norm} or {h_out, e4m3 norm, float32 scale}.
std::tuple<at::Tensor, at::Tensor, at::Tensor> residual_adaln_impl(
    const at::Tensor& h, const at::Tensor& y, const std::optional<at::Tensor>& gate,
    const at::Tensor& scale, const at::Tensor& shift, const std::optional<at::Tensor>& weight,
    double eps, bool fp8) {
  const char* op = fp8 ? "residual_adaln_fp8" : "residual_adaln";
  check_x(h, op);
  at::Tensor h_out = new_like(h, h.sizes(), op);
  at::Tensor norm_out =
      new_like(h, h.sizes(), op, fp8 ? at::kFloat8_e4m3fn : h.scalar_type());
  at::Tensor norm_scale;
  at::Tensor keep[3];
  auto p = residual_params(ltx::ResidualKind::AdaLn, h, y, gate, h_out, op, keep);
  const auto w = checked_weight(weight, h, op);
  if (fp8) {
    norm_scale = new_like(h, row_scale_shape(h), op, at::kFloat);
    p.norm_fp8 = static_cast<uint8_t*>(norm_out.data_ptr());
    p.norm_fp8_scale = norm_scale.data_ptr<float>();
  } else {
    p.norm_out = norm_out.data_ptr();
  }
  p.weight = w.has_value() ? w->data_ptr() : nullptr;
  p.eps = static_cast<float>(eps);
  at::Tensor keep_s, keep_b;
  if (p.rows > 0) {
    p.scale = cond_rows(scale, h, op, "scale", keep_s);
    p.shift = cond_rows(shift, h, op, "shift", keep_b);
  }
  launch(ltx::launch_residual, p);
  return {h_out, norm_out, norm_scale};
}

std::tuple<at::Tensor, at::Tensor> residual_adaln(const at::Tensor& h, const at::Tensor& y,
                                                  const std::optional<at::Tensor>& gate,
                                                  const at::Tensor& scale, const at::Tensor& shift,
                                                  const std::optional<at::Tensor>& weight,
                                                  double eps) {
  auto out = residual_adaln_impl(h, y, gate, scale, shift, weight, eps, false);
  return {std::get<0>(out), std::get<1>(out)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> residual_adaln_fp8(
    const at::Tensor& h, const at::Tensor& y, const std::optional<at::Tensor>& gate,
    const at::Tensor& scale, const at::Tensor& shift, const std::optional<at::Tensor>& weight,
    double eps) {
  return residual_adaln_impl(h, y, gate, scale, shift, weight, eps, true);
}

std::tuple<at::Tensor, at::Tensor> quantize_fp8(const at::Tensor& x_in, bool gelu) {
  const char* op = gelu ? "gelu_quantize_fp8" : "quantize_fp8";
  check_x(x_in, op);
  at::Tensor values = new_like(x_in, x_in.sizes(), op, at::kFloat8_e4m3fn);
  at::Tensor scale = new_like(x_in, row_scale_shape(x_in), op, at::kFloat);
  ltx::QuantParams p;
  p.dtype = dtype_of(x_in.scalar_type());
  p.device_index = device_index(x_in);
  p.hidden = x_in.size(-1);
  p.rows = p.hidden == 0 ? 0 : x_in.numel() / p.hidden;
  p.gelu = gelu;
  p.values = static_cast<uint8_t*>(values.data_ptr());
  p.scale = scale.data_ptr<float>();
  at::Tensor x = x_in;
  if (p.rows > 0) p.x = rows_of(x);
  launch(ltx::launch_quantize, p);
  return {values, scale};
}

// gelu_tanh(x @ weight.T + bias) with the GELU in the GEMM's epilogue: at::_addmm_activation
// (cuBLASLt's GELU_BIAS epilogue on CUDA; addmm + tanh gelu on CPU). A registered op of its own, so
// that torch.compile keeps the fused call rather than decomposing it into addmm + gelu.
at::Tensor linear_gelu_tanh(const at::Tensor& x, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias) {
  const char* op = "linear_gelu_tanh";
  check_x(x, op);
  check_operand(weight, x, op, "weight");
  TORCH_CHECK(weight.dim() == 2 && weight.size(1) == x.size(-1), "ltx_kernels.linear_gelu_tanh: ",
              "weight must be [out_features, ", x.size(-1), "], got ", weight.sizes());
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = weight.size(0);
  const at::Tensor x2 = x.reshape({-1, x.size(-1)});
  if (bias.has_value() && bias->defined()) {
    check_operand(*bias, x, op, "bias");
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == weight.size(0), "ltx_kernels.",
                "linear_gelu_tanh: bias must be [", weight.size(0), "], got ", bias->sizes());
    if (x.is_cuda()) {
      return at::_addmm_activation(bias->contiguous(), x2, weight.t(), 1, 1, /*use_gelu=*/true)
          .view(shape);
    }
    // The CPU _addmm_activation applies the erf GELU, not the tanh form.
    return at::gelu(at::addmm(*bias, x2, weight.t()), "tanh").view(shape);
  }
  return at::gelu(at::mm(x2, weight.t()), "tanh").view(shape);
}

// A contiguous copy of x. As a registered op it is opaque to torch.compile: the copy is one
// buffer that every consumer reads, where inductor would otherwise recompute a cheap view
// chain (e.g. LTX's RoPE tables: cat + repeat_interleave) once per consumer.
at::Tensor materialize(const at::Tensor& x) { return x.clone(at::MemoryFormat::Contiguous); }

}  // namespace ltx_binding

#if defined(CUDA_KERNEL)
#define LTX_DEVICE c10::DeviceType::CUDA
#elif defined(CPU_KERNEL)
#define LTX_DEVICE c10::DeviceType::CPU
#else
#error "build with -DCUDA_KERNEL or -DCPU_KERNEL"
#endif

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  using namespace ltx_binding;
  ops.def("rms_norm(Tensor x, Tensor? weight, float eps) -> Tensor");
  ops.def("rms_norm_out(Tensor(a!) out, Tensor x, Tensor? weight, float eps) -> ()");
  ops.def(
      "fused_residual_gated_rms_norm(Tensor x, Tensor residual, Tensor gate, Tensor? weight, "
      "float eps) -> Tensor");
  ops.def(
      "fused_residual_gated_rms_norm_out(Tensor(a!) out, Tensor x, Tensor residual, "
      "Tensor gate, Tensor? weight, float eps) -> ()");
  ops.def(
      "adaln(Tensor x, Tensor scale, Tensor shift, Tensor? weight, float eps, str norm) -> "
      "Tensor");
  ops.def(
      "adaln_out(Tensor(a!) out, Tensor x, Tensor scale, Tensor shift, Tensor? weight, "
      "float eps, str norm) -> ()");
  ops.def("rope_3d(Tensor x, Tensor cos, Tensor sin) -> Tensor");
  ops.def("rope_3d_out(Tensor(a!) out, Tensor x, Tensor cos, Tensor sin) -> ()");
  ops.def("geglu(Tensor x) -> Tensor");
  ops.def("geglu_out(Tensor(a!) out, Tensor x) -> ()");
  ops.def("gelu_tanh(Tensor x) -> Tensor");
  ops.def("gelu_tanh_out(Tensor(a!) out, Tensor x) -> ()");
  ops.def(
      "qk_norm_rope(Tensor q, Tensor k, Tensor? q_weight, Tensor? k_weight, Tensor cos, "
      "Tensor sin, float eps) -> (Tensor, Tensor)");
  ops.def(
      "qk_norm_rope_grid(Tensor q, Tensor k, Tensor? q_weight, Tensor? k_weight, Tensor freqs, "
      "Tensor axis_f, Tensor axis_h, Tensor axis_w, float eps) -> (Tensor, Tensor)");
  ops.def("gated_residual(Tensor h, Tensor y, Tensor? gate) -> Tensor");
  ops.def(
      "residual_adaln(Tensor h, Tensor y, Tensor? gate, Tensor scale, Tensor shift, "
      "Tensor? weight, float eps) -> (Tensor, Tensor)");
  ops.def(
      "residual_adaln_fp8(Tensor h, Tensor y, Tensor? gate, Tensor scale, Tensor shift, "
      "Tensor? weight, float eps) -> (Tensor, Tensor, Tensor)");
  ops.def("quantize_fp8(Tensor x, bool gelu=False) -> (Tensor, Tensor)");
  ops.def("linear_gelu_tanh(Tensor x, Tensor weight, Tensor? bias) -> Tensor");
  ops.def("materialize(Tensor x) -> Tensor");

  ops.impl("rms_norm", LTX_DEVICE, &rms_norm);
  ops.impl("rms_norm_out", LTX_DEVICE, &rms_norm_out);
  ops.impl("fused_residual_gated_rms_norm", LTX_DEVICE, &fused_residual_gated_rms_norm);
  ops.impl("fused_residual_gated_rms_norm_out", LTX_DEVICE, &fused_residual_gated_rms_norm_out);
  ops.impl("adaln", LTX_DEVICE, &adaln);
  ops.impl("adaln_out", LTX_DEVICE, &adaln_out);
  ops.impl("rope_3d", LTX_DEVICE, &rope_3d);
  ops.impl("rope_3d_out", LTX_DEVICE, &rope_3d_out);
  ops.impl("geglu", LTX_DEVICE, &geglu);
  ops.impl("geglu_out", LTX_DEVICE, &geglu_out);
  ops.impl("gelu_tanh", LTX_DEVICE, &gelu_tanh);
  ops.impl("gelu_tanh_out", LTX_DEVICE, &gelu_tanh_out);
  ops.impl("qk_norm_rope", LTX_DEVICE, &qk_norm_rope);
  ops.impl("qk_norm_rope_grid", LTX_DEVICE, &qk_norm_rope_grid);
  ops.impl("gated_residual", LTX_DEVICE, &gated_residual);
  ops.impl("residual_adaln", LTX_DEVICE, &residual_adaln);
  ops.impl("residual_adaln_fp8", LTX_DEVICE, &residual_adaln_fp8);
  ops.impl("quantize_fp8", LTX_DEVICE, &quantize_fp8);
  ops.impl("linear_gelu_tanh", LTX_DEVICE, &linear_gelu_tanh);
  ops.impl("materialize", LTX_DEVICE, &materialize);
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
