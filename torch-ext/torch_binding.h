// Op entry points registered in torch_binding.cpp. Each op has a functional form (allocates
// its output) and an `_out` form writing into a caller's contiguous tensor.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

#include <optional>
#include <tuple>

namespace ltx_binding {

at::Tensor rms_norm(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps);
void rms_norm_out(at::Tensor& out, const at::Tensor& x, const std::optional<at::Tensor>& weight,
                  double eps);

at::Tensor fused_residual_gated_rms_norm(const at::Tensor& x, const at::Tensor& residual,
                                         const at::Tensor& gate,
                                         const std::optional<at::Tensor>& weight, double eps);
void fused_residual_gated_rms_norm_out(at::Tensor& out, const at::Tensor& x,
                                       const at::Tensor& residual, const at::Tensor& gate,
                                       const std::optional<at::Tensor>& weight, double eps);

at::Tensor adaln(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift,
                 const std::optional<at::Tensor>& weight, double eps, c10::string_view norm);
void adaln_out(at::Tensor& out, const at::Tensor& x, const at::Tensor& scale,
               const at::Tensor& shift, const std::optional<at::Tensor>& weight, double eps,
               c10::string_view norm);

at::Tensor rope_3d(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);
void rope_3d_out(at::Tensor& out, const at::Tensor& x, const at::Tensor& cos,
                 const at::Tensor& sin);

at::Tensor geglu(const at::Tensor& x);
void geglu_out(at::Tensor& out, const at::Tensor& x);

at::Tensor gelu_tanh(const at::Tensor& x);
void gelu_tanh_out(at::Tensor& out, const at::Tensor& x);

// LTX-Video block fusions (kernels/cuda/block.cu).
std::tuple<at::Tensor, at::Tensor> qk_norm_rope(const at::Tensor& q, const at::Tensor& k,
                                                const std::optional<at::Tensor>& q_weight,
                                                const std::optional<at::Tensor>& k_weight,
                                                const at::Tensor& cos, const at::Tensor& sin,
                                                double eps);
// qk_norm_rope with cos/sin computed from the token's (frame, row, col) position.
std::tuple<at::Tensor, at::Tensor> qk_norm_rope_grid(const at::Tensor& q, const at::Tensor& k,
                                                     const std::optional<at::Tensor>& q_weight,
                                                     const std::optional<at::Tensor>& k_weight,
                                                     const at::Tensor& freqs, const at::Tensor& axis_f,
                                                     const at::Tensor& axis_h, const at::Tensor& axis_w,
                                                     double eps);
at::Tensor gated_residual(const at::Tensor& h, const at::Tensor& y,
                          const std::optional<at::Tensor>& gate);
std::tuple<at::Tensor, at::Tensor> residual_adaln(const at::Tensor& h, const at::Tensor& y,
                                                  const std::optional<at::Tensor>& gate,
                                                  const at::Tensor& scale, const at::Tensor& shift,
                                                  const std::optional<at::Tensor>& weight,
                                                  double eps);
// FP8 (e4m3) per-row quantization for FP8 matrix products (QuantParams in ltx_kernels.h):
// residual_adaln with its norm quantized {h_out, values, scale [..., 1]}; x (or gelu_tanh(x))
// quantized {values, scale [..., 1]}.
std::tuple<at::Tensor, at::Tensor, at::Tensor> residual_adaln_fp8(
    const at::Tensor& h, const at::Tensor& y, const std::optional<at::Tensor>& gate,
    const at::Tensor& scale, const at::Tensor& shift, const std::optional<at::Tensor>& weight,
    double eps);
std::tuple<at::Tensor, at::Tensor> quantize_fp8(const at::Tensor& x, bool gelu);
at::Tensor linear_gelu_tanh(const at::Tensor& x, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias);
at::Tensor materialize(const at::Tensor& x);

}  // namespace ltx_binding
