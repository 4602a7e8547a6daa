"""Swap this package's kernels into a diffusers transformer, by class name (no diffusers
import: works with any version that keeps the class names).

Call it after ``model.to("cuda")`` (the CUDA variant's ops only take CUDA tensors; on other
devices the patched forwards fall back to plain PyTorch) and before
``pipe.enable_model_cpu_offload()`` / ``enable_sequential_cpu_offload()``: offloading wraps
``forward`` with its hooks, and patching afterwards would bypass them. The LTX block patch
concatenates each self-attention's q/k/v weights once and leaves ``to_q``/``to_k``/``to_v``
with views of the result; a later ``model.to(...)`` keeps both in step (buffers move with the
parameters) but ends the sharing, so patch after moving.
"""

from __future__ import annotations

import types
from typing import Collection, Dict, Optional

from torch import nn

from . import blocks as _blocks
from . import fp8, layers, ltx_model

# Class name -> patcher(module, pieces) -> patched?; the transformer's own forward (chaining
# its blocks) is patched next to the blocks'.
PATCHERS = {**_blocks.PATCHERS, "LTXVideoTransformer3DModel": ltx_model.patch}


def patch_transformer(
    model: nn.Module,
    *,
    rms_norm: bool = True,
    gelu: bool = True,
    blocks: bool = True,
    pieces: Optional[Collection[str]] = None,
) -> Dict[str, int]:
    """Patch ``model`` in place; returns how many modules of each kind were patched.

    - ``rms_norm``: every ``RMSNorm`` (diffusers' or ``torch.nn.RMSNorm``, by class name; with or
      without weight, ``eps`` or ``variance_epsilon``) runs :func:`rms_norm`.
    - ``gelu``: every tanh-approximate GELU (diffusers' ``GELU(approximate="tanh")`` with its
      ``proj``, and ``torch.nn.GELU(approximate="tanh")``) runs :func:`gelu_tanh`.
    - ``blocks``: whole-block forwards (``ltx_kernels.blocks``) for
      ``LTXVideoTransformerBlock`` and ``MochiTransformerBlock``, the batch-shared RoPE tables
      of ``LTXVideoRotaryPosEmbed``, and ``LTXVideoTransformer3DModel``'s forward (each block's
      feed-forward residual computes the next block's norm1; RoPE from token positions). ``pieces`` limits the LTX block to a subset of
      ``blocks.LTX_PIECES`` (all by default), to measure each fusion on its own; ``"fp8"``
      (``blocks.LTX_OPTIONAL``, only when named, e.g. ``pieces=blocks.LTX_PIECES | {"fp8"}``)
      runs the block's token-wide projections in FP8 (``ltx_kernels.fp8``: less accurate).
    """
    pieces = _blocks.LTX_PIECES if pieces is None else frozenset(pieces)
    unknown = set(pieces) - _blocks.LTX_PIECES - _blocks.LTX_OPTIONAL
    if unknown:
        raise ValueError(
            f"ltx_kernels.patch_transformer: unknown pieces {sorted(unknown)}; "
            f"valid: {sorted(_blocks.LTX_PIECES | _blocks.LTX_OPTIONAL)}"
        )
    if "fp8" in pieces:  # refused before anything is patched
        weight = next((p for p in model.parameters() if p.dim() == 2), None)
        if weight is not None:
            fp8.check(weight, pieces)
    counts = {"RMSNorm": 0, "GELU": 0}
    if blocks:
        counts.update({name: 0 for name in PATCHERS})
    for module in model.modules():
        name = type(module).__name__
        if rms_norm and name == "RMSNorm":
            module.forward = types.MethodType(layers.RMSNorm.forward, module)
            counts["RMSNorm"] += 1
        elif gelu and name == "GELU" and getattr(module, "approximate", None) == "tanh":
            layer = layers.GELU if hasattr(module, "proj") else layers.GELUTanh
            module.forward = types.MethodType(layer.forward, module)
            counts["GELU"] += 1
        elif blocks and name in PATCHERS:
            counts[name] += int(PATCHERS[name](module, pieces))
    return counts
