"""Fused normalization, AdaLN modulation, 3D RoPE and GELU-tanh kernels for video diffusion
transformers (LTX-Video, Mochi, DiT/FLUX-style blocks), for CUDA and CPU.

Functional ops (each takes float32, float16 or bfloat16; last dim contiguous or copied to be;
any leading shape; ``out=`` writes into a contiguous tensor you provide):

- :func:`rms_norm`, :func:`fused_residual_gated_rms_norm`, :func:`adaln`
- :func:`rope_3d` (+ :func:`rope_3d_tables` to build LTX-Video's cos/sin tables)
- :func:`geglu`, :func:`gelu_tanh`
- LTX-Video block fusions: :func:`qk_norm_rope` (:func:`qk_norm_rope_grid`), :func:`gated_residual`,
  :func:`residual_adaln`, :func:`linear_gelu_tanh`
- Row-wise FP8 quantization for FP8 matrix products: :func:`quantize_fp8` (GELU optionally
  fused), :func:`residual_adaln_fp8`
- Mochi's joint attention without a host sync per sample: :func:`joint_attention`

``layers`` holds stateless layers for ``kernels.kernelize``; :func:`patch_transformer` swaps
them, and whole LTX-Video / Mochi block forwards (``blocks``), into a diffusers transformer by
class name.
"""

from . import blocks, layers, ltx_model
from .diffusers_patch import patch_transformer
from .functional import (
    BACKEND,
    adaln,
    fused_residual_gated_rms_norm,
    gated_residual,
    geglu,
    gelu_tanh,
    joint_attention,
    linear_gelu_tanh,
    materialize,
    qk_norm_rope,
    qk_norm_rope_grid,
    quantize_fp8,
    reset_dtype_check_cache,
    residual_adaln,
    residual_adaln_fp8,
    rms_norm,
    rope_3d,
    rope_3d_tables,
)

__all__ = [
    "BACKEND",
    "adaln",
    "fused_residual_gated_rms_norm",
    "blocks",
    "gated_residual",
    "geglu",
    "gelu_tanh",
    "joint_attention",
    "layers",
    "linear_gelu_tanh",
    "ltx_model",
    "materialize",
    "patch_transformer",
    "qk_norm_rope",
    "qk_norm_rope_grid",
    "quantize_fp8",
    "reset_dtype_check_cache",
    "residual_adaln",
    "residual_adaln_fp8",
    "rms_norm",
    "rope_3d",
    "rope_3d_tables",
]
