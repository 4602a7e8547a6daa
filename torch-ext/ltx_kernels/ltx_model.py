"""``LTXVideoTransformer3DModel.forward`` with its blocks chained (duck-typed: no diffusers
import), patched in by ``patch_transformer`` next to the block forwards of ``blocks``.

Two things need the transformer's loop rather than one block:

- "chain": block i's feed-forward residual ``h + ff * gate_mlp`` and block i+1's norm1 +
  modulation are one :func:`residual_adaln` pass (the next block's ``scale_shift_table`` rows
  are taken here and handed to block i), instead of a :func:`gated_residual` pass and an
  :func:`adaln` pass that reads ``h`` again. The last block keeps the plain residual.
- "rope_grid": no cos/sin tables; each block's :func:`qk_norm_rope_grid` computes them from
  the token positions (the frequency bands and per-axis coordinates are built here, with the
  float32 operations ``LTXVideoRotaryPosEmbed`` uses, so the angles are the same).

Anything this forward does not reproduce takes the original: ``attention_kwargs`` (LoRA
scaling lives in the original's decorator), gradient checkpointing, inputs on another device or
dtype, a block whose forward is not ``blocks.ltx_block_forward`` or that has hooks.
"""

from __future__ import annotations

import math
import sys
import types
from typing import Collection

import torch
from torch import nn

from .blocks import _ltx_modulation, _norm_eps, _runs_here

_PARTS = ("rope", "transformer_blocks", "proj_in", "time_embed", "caption_projection", "norm_out", "proj_out")


def ltx_rope_grid(rope: nn.Module, num_frames: int, height: int, width: int, rope_interpolation_scale, device):
    """(freqs [dim // 6], (axis_f, axis_h, axis_w)) of ``LTXVideoRotaryPosEmbed`` for one
    grid, float32, each value computed by the same torch operations in the same order as the
    module's tables (so that ``freqs[j] * axis[c]`` is the angle the table holds)."""
    axes = []
    sizes = (num_frames, height, width)
    factors = (
        (rope.patch_size_t, rope.base_num_frames),
        (rope.patch_size, rope.base_height),
        (rope.patch_size, rope.base_width),
    )
    for a, (n, (patch, base)) in enumerate(zip(sizes, factors)):
        coord = torch.arange(n, dtype=torch.float32, device=device)
        if rope_interpolation_scale is not None:
            coord = coord * rope_interpolation_scale[a] * patch / base
        axes.append(coord * 2 - 1)
    freqs = rope.theta ** torch.linspace(
        math.log(1.0, rope.theta), math.log(rope.theta, rope.theta), rope.dim // 6, device=device, dtype=torch.float32
    )
    freqs = freqs * math.pi / 2.0
    return freqs, tuple(axes)


def _chainable(block: nn.Module) -> bool:
    return (
        getattr(block, "_ltx_patched_forward", None) is not None
        and block.forward is block._ltx_patched_forward
        and not block._forward_hooks
        and not block._forward_pre_hooks
    )


def _grid_ok(rope_interpolation_scale, video_coords) -> bool:
    return video_coords is None and (
        rope_interpolation_scale is None
        or all(not torch.is_tensor(v) or v.dim() == 0 for v in rope_interpolation_scale)
    )


def ltx_model_forward(
    self,
    hidden_states: torch.Tensor,
    encoder_hidden_states: torch.Tensor,
    timestep: torch.Tensor,
    encoder_attention_mask: torch.Tensor,
    num_frames=None,
    height=None,
    width=None,
    rope_interpolation_scale=None,
    video_coords=None,
    attention_kwargs=None,
    return_dict: bool = True,
):
    """``LTXVideoTransformer3DModel.forward`` with chained blocks (module docstring)."""
    blocks = self.transformer_blocks
    if (
        attention_kwargs is not None
        or (torch.is_grad_enabled() and self.gradient_checkpointing)
        or not _runs_here(hidden_states)
        or not all(_chainable(b) for b in blocks)
    ):
        # As keywords: the original's LoRA decorator reads attention_kwargs from **kwargs.
        return self._ltx_unpatched_forward(
            hidden_states=hidden_states,
            encoder_hidden_states=encoder_hidden_states,
            timestep=timestep,
            encoder_attention_mask=encoder_attention_mask,
            num_frames=num_frames,
            height=height,
            width=width,
            rope_interpolation_scale=rope_interpolation_scale,
            video_coords=video_coords,
            attention_kwargs=attention_kwargs,
            return_dict=return_dict,
        )
    if encoder_attention_mask is not None and encoder_attention_mask.ndim == 2:
        encoder_attention_mask = (1 - encoder_attention_mask.to(hidden_states.dtype)) * -10000.0
        encoder_attention_mask = encoder_attention_mask.unsqueeze(1)

    batch_size = hidden_states.size(0)
    rope_input = hidden_states
    hidden_states = self.proj_in(hidden_states)
    temb, embedded_timestep = self.time_embed(timestep.flatten(), batch_size=batch_size, hidden_dtype=hidden_states.dtype)
    temb = temb.view(batch_size, -1, temb.size(-1))
    embedded_timestep = embedded_timestep.view(batch_size, -1, embedded_timestep.size(-1))
    encoder_hidden_states = self.caption_projection(encoder_hidden_states)
    encoder_hidden_states = encoder_hidden_states.view(batch_size, -1, hidden_states.size(-1))

    # The blocks take their fused path only for these inputs (ltx_block_forward's check).
    fused = _runs_here(hidden_states) and temb.dtype == hidden_states.dtype
    grid = None
    image_rotary_emb = None
    if fused and self._ltx_rope_grid and _grid_ok(rope_interpolation_scale, video_coords):
        grid = ltx_rope_grid(self.rope, num_frames, height, width, rope_interpolation_scale, hidden_states.device)
    else:
        image_rotary_emb = self.rope(rope_input, num_frames, height, width, rope_interpolation_scale, video_coords)

    norm1 = None
    for i, block in enumerate(blocks):
        nxt = None
        if fused and self._ltx_chain and i + 1 < len(blocks):
            following = blocks[i + 1]
            shift, scale = _ltx_modulation(following, temb)[:2]
            nxt = (scale, shift, following.norm1.weight, _norm_eps(following.norm1), following._ltx_fp8)
        out = block(
            hidden_states,
            encoder_hidden_states,
            temb,
            image_rotary_emb,
            encoder_attention_mask,
            ltx_norm1=norm1,
            ltx_next=nxt,
            ltx_rope_grid=grid,
        )
        hidden_states, norm1 = out if nxt is not None else (out, None)

    scale_shift_values = self.scale_shift_table[None, None] + embedded_timestep[:, :, None]
    shift, scale = scale_shift_values[:, :, 0], scale_shift_values[:, :, 1]
    hidden_states = self.norm_out(hidden_states)
    hidden_states = hidden_states * (1 + scale) + shift
    output = self.proj_out(hidden_states)
    if not return_dict:
        return (output,)
    return sys.modules[type(self).__module__].Transformer2DModelOutput(sample=output)


def patch(model: nn.Module, pieces: Collection[str]) -> bool:
    """Patch ``model.forward`` when the pieces ask for chaining or grid RoPE and the model has
    the parts ``ltx_model_forward`` uses; the blocks are checked at each call."""
    chain = "chain" in pieces
    rope_grid = "rope_grid" in pieces and "qk_norm_rope" in pieces
    has_parts = all(hasattr(model, n) for n in _PARTS) and type(model.rope).__name__ == "LTXVideoRotaryPosEmbed"
    output_type = getattr(sys.modules.get(type(model).__module__), "Transformer2DModelOutput", None)
    if not (chain or rope_grid) or not has_parts or output_type is None:
        return False
    if getattr(model, "_ltx_unpatched_forward", None) is None:
        model._ltx_unpatched_forward = model.forward
    model._ltx_chain = chain
    model._ltx_rope_grid = rope_grid
    model.forward = types.MethodType(ltx_model_forward, model)
    return True
