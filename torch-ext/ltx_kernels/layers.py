"""Stateless layers for ``kernels.kernelize`` / ``use_kernel_forward_from_hub``.

Per the Hub's layer rules each class only defines ``forward`` (no constructor, no members
beyond ``can_torch_compile``/``has_backward``); ``forward`` reads the attributes of the module
it replaces. The ops have no autograd formula, so ``has_backward = False``: kernelize falls
back to the original forward in training mode.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .functional import BACKEND, gelu_tanh, rms_norm

_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _runs_here(x: torch.Tensor) -> bool:
    return x.device.type == BACKEND and x.dtype in _DTYPES


def _rms_norm_module(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    weight = getattr(module, "weight", None)
    eps = getattr(module, "eps", None)
    if eps is None:
        eps = getattr(module, "variance_epsilon", 1e-6)
    bias = getattr(module, "bias", None)
    if weight is not None and weight.dtype != x.dtype:
        # diffusers' RMSNorm returns the weight's dtype when weight and input differ
        # (half weight: casts down; float32 weight: promotes).
        x = x.to(weight.dtype)
    if not _runs_here(x):
        var = x.float().pow(2).mean(-1, keepdim=True)
        y = (x.float() * torch.rsqrt(var + eps)).to(x.dtype)
        y = y * weight if weight is not None else y
    else:
        y = rms_norm(x, weight, eps)
    return y + bias if bias is not None else y


class RMSNorm(nn.Module):
    """Replaces diffusers' ``RMSNorm`` (``weight`` may be None, optional ``bias``) and
    transformers-style RMSNorms (``variance_epsilon``)."""

    can_torch_compile = True
    has_backward = False

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return _rms_norm_module(self, hidden_states)


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return gelu_tanh(x) if _runs_here(x) else F.gelu(x, approximate="tanh")


class GELU(nn.Module):
    """Replaces diffusers' ``activations.GELU`` (a ``proj`` Linear then GELU): the tanh kernel
    when ``approximate == "tanh"`` (LTX-Video's ``gelu-approximate``), torch's GELU otherwise."""

    can_torch_compile = True
    has_backward = False

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        hidden_states = self.proj(hidden_states)
        if getattr(self, "approximate", "none") == "tanh":
            return _gelu_tanh(hidden_states)
        return F.gelu(hidden_states, approximate=getattr(self, "approximate", "none"))


class GELUTanh(nn.Module):
    """Replaces ``torch.nn.GELU(approximate="tanh")``."""

    can_torch_compile = True
    has_backward = False

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return _gelu_tanh(input)


__all__ = ["GELU", "GELUTanh", "RMSNorm"]
