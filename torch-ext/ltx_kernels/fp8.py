"""Optional FP8 (e4m3) matrix products for the LTX-Video block: the ``fp8`` piece of
:func:`patch_transformer`, off by default because it trades accuracy for speed.

Each weight is quantized once, when the model is patched (patch after loading weights), with
one scale per output channel; each activation row is quantized when it is used, with one scale
per row: by the kernels' ``quantize_fp8`` (one pass; the feed-forward's GELU fused into it), or
straight from the op producing it (``residual_adaln_fp8``: norm2 and the chained norm1). The
product runs as ``torch._scaled_mm`` (FP8 tensor cores: compute capability 8.9 or newer) with
the bias in its epilogue and the output in the activation's dtype. The bf16 weights stay the
module's parameters; the FP8 copies are non-persistent buffers (one byte per parameter).
"""

from __future__ import annotations

import types
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from . import functional

E4M3_MAX = 448.0
_DTYPES = (torch.bfloat16, torch.float16)


def check_device(weight: torch.Tensor) -> None:
    """Raise a clear error unless the weight is on a GPU with FP8 tensor cores (what the piece
    is for; CPU support of ``torch._scaled_mm`` differs between torch versions)."""
    if not weight.is_cuda:
        where = f"the weights are on {weight.device.type}"
    elif torch.cuda.get_device_capability(weight.device) < (8, 9):
        major, minor = torch.cuda.get_device_capability(weight.device)
        where = f"{torch.cuda.get_device_name(weight.device)} is {major}.{minor}"
    else:
        return
    raise ValueError(
        f"ltx_kernels: the fp8 piece needs a CUDA GPU with FP8 tensor cores (compute capability "
        f"8.9 or newer); {where}. hint: move the model to such a GPU before patching, or patch "
        f"without 'fp8'"
    )


def check(weight: torch.Tensor, pieces) -> None:
    """Raise a clear error, before anything is patched, where the ``fp8`` piece would not run:
    without the ``qkv`` piece (its fused weight is one of the products), on weights of another
    dtype, or on a device without FP8 tensor cores."""
    if "qkv" not in pieces:
        raise ValueError(
            "ltx_kernels: the fp8 piece runs the fused q/k/v projection in FP8, so it needs the "
            "qkv piece too. hint: pieces=ltx_kernels.blocks.LTX_PIECES | {'fp8'}"
        )
    if weight.dtype not in _DTYPES:
        raise ValueError(
            f"ltx_kernels: the fp8 piece quantizes bfloat16 or float16 weights; the model's are "
            f"{weight.dtype}. hint: model.to(torch.bfloat16) before patching"
        )
    check_device(weight)


def quantize_rows(t: torch.Tensor):
    """(e4m3 values, float32 scale per row [..., 1]) with ``t ≈ values * scale``, in torch
    operations: the definition :func:`quantize` and the kernels' ops match bit for bit. The
    scale is a product and the values are multiplied by its reciprocal, so that the float32
    arithmetic is the same on every device (CUDA's division by a Python scalar is itself a
    multiplication by the reciprocal; the CPU's is a division)."""
    scale = t.abs().amax(dim=-1, keepdim=True).float().clamp(min=1e-12) * (1.0 / E4M3_MAX)
    return (t.float() * scale.reciprocal()).to(torch.float8_e4m3fn), scale


def _kernel_quantizes(x: torch.Tensor) -> bool:
    return x.is_cuda and functional.BACKEND == "cuda" and x.dtype in _DTYPES


def quantize(x: torch.Tensor, gelu: bool = False):
    """:func:`quantize_rows` of ``x`` (of ``gelu_tanh(x)`` with ``gelu``): one pass of the
    kernels' ``quantize_fp8`` on CUDA, torch operations elsewhere."""
    if _kernel_quantizes(x):
        return functional.quantize_fp8(x, gelu)
    if gelu:
        x = F.gelu(x, approximate="tanh")
    return quantize_rows(x)


def matmul(xq: torch.Tensor, xs: torch.Tensor, values: torch.Tensor, scale: torch.Tensor,
           bias: Optional[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
    """The product of quantized rows ``xq`` [..., K] (scales ``xs`` [..., 1]) and the e4m3
    weight ``values`` [N, K] / ``scale`` [1, N], plus ``bias``, as ``dtype`` [..., N]."""
    rows = xq.reshape(-1, xq.shape[-1])
    if bias is not None and bias.dtype != dtype:
        bias = bias.to(dtype)
    out = torch._scaled_mm(rows, values.t(), scale_a=xs.reshape(-1, 1), scale_b=scale, bias=bias, out_dtype=dtype)
    return out.reshape(*xq.shape[:-1], values.shape[0])


def fits(weight: torch.Tensor) -> bool:
    """A weight ``torch._scaled_mm`` takes: both dims multiples of 16, bfloat16 or float16."""
    return weight.dim() == 2 and weight.shape[0] % 16 == 0 and weight.shape[1] % 16 == 0 and weight.dtype in _DTYPES


def quantize_weight(weight: torch.Tensor):
    """[N, K] weight -> (e4m3 [N, K], float32 scale [1, N])."""
    values, scale = quantize_rows(weight.detach())
    return values, scale.t().contiguous()


def linear(x: torch.Tensor, values: torch.Tensor, scale: torch.Tensor, bias: Optional[torch.Tensor]) -> torch.Tensor:
    """``F.linear`` with x quantized per row and the weight's e4m3 ``values``/``scale``."""
    xq, xs = quantize(x)
    return matmul(xq, xs, values, scale, bias, x.dtype)


def attach(module: nn.Module, weight: torch.Tensor, prefix: str = "_ltx_fp8") -> bool:
    """Store ``weight``'s FP8 copy on ``module`` as ``{prefix}_values`` / ``{prefix}_scale``."""
    if not fits(weight):
        return False
    check_device(weight)
    values, scale = quantize_weight(weight)
    module.register_buffer(f"{prefix}_values", values, persistent=False)
    module.register_buffer(f"{prefix}_scale", scale, persistent=False)
    return True


def _linear_forward(self, x: torch.Tensor) -> torch.Tensor:
    if x.dtype not in _DTYPES or x.device != self._ltx_fp8_values.device:
        return F.linear(x, self.weight, self.bias)
    return linear(x, self._ltx_fp8_values, self._ltx_fp8_scale, self.bias)


def patch_linear(module: nn.Module) -> bool:
    """Route an ``nn.Linear``'s forward through :func:`linear` (False: left alone)."""
    if not isinstance(module, nn.Linear) or not attach(module, module.weight):
        return False
    module.forward = types.MethodType(_linear_forward, module)
    return True


def unpatch_linear(module: nn.Module) -> None:
    """Undo :func:`patch_linear` (the FP8 copy is dropped)."""
    if module.__dict__.get("forward") is not None and getattr(module.forward, "__func__", None) is _linear_forward:
        del module.forward
    for name in ("_ltx_fp8_values", "_ltx_fp8_scale"):
        module._buffers.pop(name, None)
