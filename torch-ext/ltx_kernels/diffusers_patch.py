"""Swap this package's kernels into a diffusers transformer, by class name (no diffusers
import: works with any version that keeps the class names).

Call it after ``model.to("cuda")`` (the CUDA variant's ops only take CUDA tensors; on other
devices the patched forwards fall back to plain PyTorch) and before
``pipe.enable_model_cpu_offload()`` / ``enable_sequential_cpu_offload()``: offloading wraps
``forward`` with its hooks, and patching afterwards would bypass them.
"""

from __future__ import annotations

import types
from typing import Dict

from torch import nn

from . import layers


def patch_transformer(model: nn.Module, *, rms_norm: bool = True, gelu: bool = True) -> Dict[str, int]:
    """Replace the ``forward`` of every ``RMSNorm`` (``type(m).__name__ == "RMSNorm"``, with or
    without weight, ``eps`` or ``variance_epsilon``) and every tanh-approximate GELU (diffusers'
    ``GELU(approximate="tanh")`` with its ``proj``, and ``torch.nn.GELU(approximate="tanh")``)
    in ``model``. Returns how many modules of each kind were patched."""
    counts = {"RMSNorm": 0, "GELU": 0}
    for module in model.modules():
        name = type(module).__name__
        if rms_norm and name == "RMSNorm":
            module.forward = types.MethodType(layers.RMSNorm.forward, module)
            counts["RMSNorm"] += 1
        elif gelu and name == "GELU" and getattr(module, "approximate", None) == "tanh":
            layer = layers.GELU if hasattr(module, "proj") else layers.GELUTanh
            module.forward = types.MethodType(layer.forward, module)
            counts["GELU"] += 1
    return counts
