"""Block-level forwards for diffusers' LTX-Video and Mochi transformers, patched in by class
name (duck-typed: no diffusers import).

LTX-Video (``LTXVideoTransformerBlock``), per block:

- norm1 + modulation: one :func:`adaln` pass;
- self-attention: one QKV matrix product (the three projections' weights concatenated once at
  patch time; ``to_q``/``to_k``/``to_v`` keep views of it, so no memory is added), then
  :func:`qk_norm_rope` (RMSNorm across heads + RoPE for q and k in one pass, each table row
  read once for the batch when the rotary module is patched too); the attention itself through
  cuDNN's fused kernel on Hopper GPUs (``attention``: the fastest backend at these shapes on an
  H200, bench/attention.py; torch 2.11 with cuDNN 9.19 picks it too, but torch's priority
  order lists flash first, 1.6x slower here), unless diffusers was asked for another backend;
- ``h + attn * gate_msa``: :func:`gated_residual`;
- ``h + attn2`` and norm2 + modulation: one :func:`residual_adaln` pass;
- feed-forward ``proj`` + GELU-tanh: :func:`linear_gelu_tanh` (the GELU in the GEMM epilogue);
- ``h + ff * gate_mlp``: :func:`gated_residual`, or, called by ``ltx_model.ltx_model_forward``
  (the patched transformer), one :func:`residual_adaln` that also computes the next block's
  norm1 (which then skips its :func:`adaln`), with RoPE from token positions
  (:func:`qk_norm_rope_grid`) instead of tables.

``LTXVideoRotaryPosEmbed`` is patched to compute its tables for one batch entry when every
entry's grid is the same, so the tables are built once and read once per token.

Mochi (``MochiTransformerBlock``): both residual tanh-gated RMSNorms of each stream are
:func:`fused_residual_gated_rms_norm`, and the modulated RMSNorms of ``norm1``/``norm3`` (no
shift) are :func:`adaln` with a zero shift. The joint attention is one
:func:`joint_attention` op (``attention``: diffusers calls ``torch.nonzero`` for each sample,
a host sync and a graph break in every block) after one q/k/v GEMM per stream (``qkv``).

Blocks whose structure differs from what these forwards assume are left alone (and not
counted); inputs on another device or of another dtype take the original forward.
"""

from __future__ import annotations

import sys
import types
from typing import Collection, Optional

import torch
import torch.nn.functional as F
from torch import nn

from . import fp8
from .functional import (
    BACKEND,
    adaln,
    fused_residual_gated_rms_norm,
    gated_residual,
    joint_attention,
    linear_gelu_tanh,
    materialize,
    qk_norm_rope,
    qk_norm_rope_grid,
    residual_adaln,
    residual_adaln_fp8,
    rms_norm,
)

# The pieces of the LTX block forward; each can be left out (bench/e2e.py measures them).
# "chain" and "rope_grid" act in the transformer's forward (``ltx_model_forward``).
LTX_PIECES = frozenset(
    {"adaln", "qkv", "qk_norm_rope", "residual", "gelu_linear", "attention", "chain", "rope_grid"}
)
# Asked for by name only (not in the default set): FP8 matrix products (``fp8.py``), which
# change the numbers beyond bf16 rounding.
LTX_OPTIONAL = frozenset({"fp8"})

_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _runs_here(x: torch.Tensor) -> bool:
    return x.device.type == BACKEND and x.dtype in _DTYPES


def _plain_rms_norm(module: nn.Module) -> bool:
    """A diffusers/torch RMSNorm without bias whose eps is set."""
    return (
        type(module).__name__ == "RMSNorm"
        and getattr(module, "bias", None) is None
        and getattr(module, "eps", None) is not None
    )


def _norm_eps(module: nn.Module) -> float:
    return float(module.eps)


# ---- LTX-Video --------------------------------------------------------------------------------


def _ltx_attention_ok(attn: nn.Module) -> bool:
    return (
        _plain_rms_norm(attn.norm_q)
        and _plain_rms_norm(attn.norm_k)
        and attn.norm_q.eps == attn.norm_k.eps
        and all(isinstance(getattr(attn, n, None), nn.Linear) for n in ("to_q", "to_k", "to_v"))
        and isinstance(attn.to_out[0], nn.Linear)
    )


def _ltx_block_ok(block: nn.Module) -> bool:
    try:
        ff = block.ff.net
        act = ff[0]
        return (
            _plain_rms_norm(block.norm1)
            and _plain_rms_norm(block.norm2)
            and _ltx_attention_ok(block.attn1)
            and getattr(act, "approximate", None) == "tanh"
            and isinstance(getattr(act, "proj", None), nn.Linear)
            and block.scale_shift_table.shape[0] == 6
        )
    except (AttributeError, IndexError, TypeError):
        return False


def _fuse_qkv(attn: nn.Module, names=("to_q", "to_k", "to_v"), prefix="_ltx_qkv") -> None:
    """Concatenate three Linears (``to_q``/``to_k``/``to_v``) into one weight (and bias) and
    let them keep views of it: one GEMM reads the input once, and the parameters keep their
    identity (a later ``load_state_dict`` writes through the views into the fused weight). The
    fused tensors are buffers ``{prefix}_weight`` / ``{prefix}_bias``, the split ``{prefix}_sizes``."""
    linears = [getattr(attn, n) for n in names]
    sizes = [lin.out_features for lin in linears]
    with torch.no_grad():
        weight = torch.cat([lin.weight for lin in linears])
        has_bias = all(lin.bias is not None for lin in linears)
        bias = torch.cat([lin.bias for lin in linears]) if has_bias else None
        for lin, w, b in zip(
            linears, weight.split(sizes), bias.split(sizes) if has_bias else [None] * 3
        ):
            lin.weight.data = w
            if b is not None:
                lin.bias.data = b
    attn.register_buffer(f"{prefix}_weight", weight, persistent=False)
    attn.register_buffer(f"{prefix}_bias", bias, persistent=False)
    setattr(attn, f"{prefix}_sizes", sizes)


def _attention_fn(attn: nn.Module):
    """diffusers' attention dispatcher from the attention module's own module (honours
    ``set_attention_backend``), or None for plain SDPA."""
    return getattr(sys.modules.get(type(attn).__module__), "dispatch_attention_fn", None)


def _cudnn_attention_here() -> bool:
    """cuDNN's fused attention is what runs self-attention (``attention`` piece) on this
    machine: a Hopper GPU (capability 9.x, where it was measured faster than torch's flash and
    memory-efficient kernels at the models' shapes: bench/attention.py) and a cuDNN torch can
    use. Decided when the model is patched, so the traced graph names the backend."""
    if not torch.cuda.is_available() or not torch.backends.cudnn.is_available():
        return False
    return torch.cuda.get_device_capability()[0] == 9


def _cudnn_attention_fits(q: torch.Tensor) -> bool:
    """q [B, S, H, D] is a shape and type cuDNN's attention takes."""
    d = q.shape[-1]
    return q.is_cuda and q.dtype in (torch.float16, torch.bfloat16) and d % 8 == 0 and d <= 128


def _sdpa(attn, q, k, v):
    """Attention over [B, S, H, D] q/k/v, as diffusers' LTX processor calls it; through
    cuDNN's fused attention when the ``attention`` piece chose it at patch time and no other
    backend was asked of diffusers."""
    proc = attn.processor
    fn = attn._ltx_dispatch
    if attn._ltx_cudnn and _cudnn_attention_fits(q) and getattr(proc, "_attention_backend", None) is None:
        out = torch.ops.aten._scaled_dot_product_cudnn_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), None, False
        )[0]
        return out.transpose(1, 2)
    if fn is not None:
        return fn(
            q,
            k,
            v,
            attn_mask=None,
            dropout_p=0.0,
            is_causal=False,
            backend=getattr(proc, "_attention_backend", None),
            parallel_config=getattr(proc, "_parallel_config", None),
        )
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    return out.transpose(1, 2)


def _ltx_self_attention(block, x, image_rotary_emb, rope_grid, dtype):
    """``x``: norm1's output, or with the ``fp8`` piece possibly its FP8 rows ``(values,
    scale)`` (the previous block's :func:`residual_adaln_fp8`); ``dtype``: the activations'."""
    attn = block.attn1
    if isinstance(x, tuple):
        xq, xs = x
        qkv = fp8.matmul(xq, xs, attn._ltx_qkv_fp8_values, attn._ltx_qkv_fp8_scale, attn._ltx_qkv_bias, dtype)
        q, k, v = qkv.split(attn._ltx_qkv_sizes, dim=-1)
    elif block._ltx_qkv:
        if block._ltx_fp8:
            qkv = fp8.linear(x, attn._ltx_qkv_fp8_values, attn._ltx_qkv_fp8_scale, attn._ltx_qkv_bias)
        else:
            qkv = F.linear(x, attn._ltx_qkv_weight, attn._ltx_qkv_bias)
        q, k, v = qkv.split(attn._ltx_qkv_sizes, dim=-1)
    else:
        q, k, v = attn.to_q(x), attn.to_k(x), attn.to_v(x)
    eps = _norm_eps(attn.norm_q)
    if rope_grid is not None:
        freqs, axes = rope_grid
        q, k = qk_norm_rope_grid(q, k, attn.norm_q.weight, attn.norm_k.weight, freqs, axes, eps)
    elif image_rotary_emb is not None and block._ltx_qk_norm_rope:
        cos, sin = image_rotary_emb
        q, k = qk_norm_rope(q, k, attn.norm_q.weight, attn.norm_k.weight, cos, sin, eps)
    else:
        q = rms_norm(q, attn.norm_q.weight, eps)
        k = rms_norm(k, attn.norm_k.weight, eps)
        if image_rotary_emb is not None:
            rotate = getattr(sys.modules.get(type(block).__module__), "apply_rotary_emb")
            q, k = rotate(q, image_rotary_emb), rotate(k, image_rotary_emb)
    heads = attn.heads
    out = _sdpa(attn, q.unflatten(2, (heads, -1)), k.unflatten(2, (heads, -1)), v.unflatten(2, (heads, -1)))
    out = out.flatten(2, 3).to(q.dtype)
    out = attn.to_out[0](out)
    return attn.to_out[1](out)


def ltx_block_forward(
    self,
    hidden_states: torch.Tensor,
    encoder_hidden_states: torch.Tensor,
    temb: torch.Tensor,
    image_rotary_emb=None,
    encoder_attention_mask: Optional[torch.Tensor] = None,
    *,
    ltx_norm1: Optional[torch.Tensor] = None,
    ltx_next=None,
    ltx_rope_grid=None,
):
    """``LTXVideoTransformerBlock.forward`` through the fused ops (module docstring).

    The keywords are for ``ltx_model_forward`` only: ``ltx_norm1`` is this block's norm1 +
    modulation output, computed by the previous block (its FP8 rows ``(values, scale)`` when
    this block runs the ``fp8`` piece); with ``ltx_next = (scale, shift, weight, eps, fp8)``
    (the next block's norm1 modulation, and whether that block runs the ``fp8`` piece) the
    feed-forward's gated residual also computes the next block's norm1 and ``(hidden_states,
    next_norm1)`` is returned; ``ltx_rope_grid = (freqs, axes)`` replaces the cos/sin tables
    (:func:`qk_norm_rope_grid`).
    """
    if not _runs_here(hidden_states) or temb.dtype != hidden_states.dtype:
        return self._ltx_unpatched_forward(
            hidden_states, encoder_hidden_states, temb, image_rotary_emb, encoder_attention_mask
        )
    shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = _ltx_modulation(self, temb)

    if ltx_norm1 is not None:
        norm_hidden_states = ltx_norm1
    elif self._ltx_adaln:
        w1, eps1 = self.norm1.weight, _norm_eps(self.norm1)
        norm_hidden_states = adaln(hidden_states, scale_msa, shift_msa, w1, eps1, "rms")
    else:
        norm_hidden_states = self.norm1(hidden_states) * (1 + scale_msa) + shift_msa

    attn_hidden_states = _ltx_self_attention(
        self, norm_hidden_states, image_rotary_emb, ltx_rope_grid, hidden_states.dtype
    )
    if self._ltx_residual:
        hidden_states = gated_residual(hidden_states, attn_hidden_states, gate_msa)
    else:
        hidden_states = hidden_states + attn_hidden_states * gate_msa

    attn_hidden_states = self.attn2(
        hidden_states,
        encoder_hidden_states=encoder_hidden_states,
        image_rotary_emb=None,
        attention_mask=encoder_attention_mask,
    )
    w2, eps2 = self.norm2.weight, _norm_eps(self.norm2)
    if self._ltx_fp8 and self._ltx_residual and self._ltx_adaln:
        hidden_states, nq, ns = residual_adaln_fp8(
            hidden_states, attn_hidden_states, None, scale_mlp, shift_mlp, w2, eps2
        )
        ff_output = _ltx_ff_fp8(self, nq, ns, hidden_states.dtype)
    else:
        if self._ltx_residual and self._ltx_adaln:
            hidden_states, norm_hidden_states = residual_adaln(
                hidden_states, attn_hidden_states, None, scale_mlp, shift_mlp, w2, eps2
            )
        else:
            hidden_states = hidden_states + attn_hidden_states
            norm_hidden_states = self.norm2(hidden_states) * (1 + scale_mlp) + shift_mlp
        ff_output = _ltx_ff(self, norm_hidden_states)
    if ltx_next is not None:
        scale, shift, weight, eps, next_fp8 = ltx_next
        if next_fp8:
            h, nq, ns = residual_adaln_fp8(hidden_states, ff_output, gate_mlp, scale, shift, weight, eps)
            return h, (nq, ns)
        return residual_adaln(hidden_states, ff_output, gate_mlp, scale, shift, weight, eps)
    if self._ltx_residual:
        return gated_residual(hidden_states, ff_output, gate_mlp)
    return hidden_states + ff_output * gate_mlp


def _ltx_ff(block, x):
    """The feed-forward of norm2's output ``x``."""
    net = block.ff.net
    if block._ltx_fp8:
        return _ltx_ff_fp8(block, *fp8.quantize(x), x.dtype)
    if block._ltx_gelu_linear:
        out = linear_gelu_tanh(x, net[0].proj.weight, net[0].proj.bias)
    else:
        out = net[0](x)
    for module in net[1:]:
        out = module(out)
    return out


def _ltx_ff_fp8(block, xq, xs, dtype):
    """The feed-forward of norm2's FP8 rows: the up projection, GELU and the quantization of
    its output in one pass (:func:`fp8.quantize`), the down projection. Dropouts that are
    identities (eval mode or p = 0) are skipped; the down projection's input needs the
    quantized GELU output, so an active dropout there takes the bf16 route."""
    net = block.ff.net
    proj, down, rest = net[0].proj, net[2], list(net[3:])
    up = fp8.matmul(xq, xs, proj._ltx_fp8_values, proj._ltx_fp8_scale, proj.bias, dtype)
    if _is_identity(net[1]) and getattr(down, "_ltx_fp8_values", None) is not None:
        gq, gs = fp8.quantize(up, gelu=True)
        out = fp8.matmul(gq, gs, down._ltx_fp8_values, down._ltx_fp8_scale, down.bias, dtype)
    else:
        out = down(net[1](F.gelu(up, approximate="tanh")))
    for module in rest:
        out = module(out)
    return out


def _is_identity(module: nn.Module) -> bool:
    return isinstance(module, nn.Identity) or (
        isinstance(module, nn.Dropout) and (module.p == 0 or not module.training)
    )


def _ltx_modulation(block, temb):
    """The six [B, 1, H] modulation rows of a block (shift/scale/gate of attention and MLP),
    views of one ``scale_shift_table + temb`` sum."""
    table = block.scale_shift_table
    ada = table[None, None].to(temb.device) + temb.reshape(temb.size(0), temb.size(1), table.shape[0], -1)
    return ada.unbind(dim=2)


def _patch_ltx_block(block: nn.Module, pieces: Collection[str]) -> bool:
    if not _ltx_block_ok(block):
        return False
    if getattr(block, "_ltx_unpatched_forward", None) is None:
        block._ltx_unpatched_forward = block.forward
    block._ltx_adaln = "adaln" in pieces
    block._ltx_qkv = "qkv" in pieces
    block._ltx_qk_norm_rope = "qk_norm_rope" in pieces
    block._ltx_residual = "residual" in pieces
    block._ltx_gelu_linear = "gelu_linear" in pieces
    if block._ltx_qkv and not hasattr(block.attn1, "_ltx_qkv_weight"):
        _fuse_qkv(block.attn1)
    block._ltx_fp8 = "fp8" in pieces and _patch_ltx_fp8(block)
    if not block._ltx_fp8:
        for linear in _ltx_fp8_linears(block):
            fp8.unpatch_linear(linear)
    block.attn1._ltx_dispatch = _attention_fn(block.attn1)
    block.attn1._ltx_cudnn = "attention" in pieces and _cudnn_attention_here()
    block.forward = types.MethodType(ltx_block_forward, block)
    # What ltx_model's loop compares block.forward with (`is` on the bound method: dynamo in
    # torch 2.11 does not see a traced method's `__func__`, and chaining silently fell back).
    block._ltx_patched_forward = block.forward
    return True


def _ltx_fp8_linears(block: nn.Module):
    """The block's projections over every token that run as modules (diffusers' cross-attention
    calls them itself): the self-attention output, the cross-attention query and output, the
    feed-forward's down projection."""
    linears = [block.attn1.to_out[0], getattr(block.attn2, "to_q", None), block.attn2.to_out[0], block.ff.net[2]]
    return [m for m in linears if isinstance(m, nn.Linear)]


def _patch_ltx_fp8(block: nn.Module) -> bool:
    """FP8 copies of the block's token-wide projections (``fp8`` piece): the fused q/k/v and
    the feed-forward's up projection, called by :func:`ltx_block_forward`, and the Linears of
    :func:`_ltx_fp8_linears`. False (nothing changed) when a shape does not fit."""
    attn, proj = block.attn1, block.ff.net[0].proj
    if not (block._ltx_qkv and fp8.fits(attn._ltx_qkv_weight) and fp8.fits(proj.weight)):
        return False
    fp8.attach(attn, attn._ltx_qkv_weight, "_ltx_qkv_fp8")
    fp8.attach(proj, proj.weight)
    for linear in _ltx_fp8_linears(block):
        fp8.patch_linear(linear)
    return True


def ltx_rope_forward(
    self,
    hidden_states: torch.Tensor,
    num_frames=None,
    height=None,
    width=None,
    rope_interpolation_scale=None,
    video_coords=None,
):
    """``LTXVideoRotaryPosEmbed.forward`` for one batch entry: without ``video_coords`` every
    entry's grid is the same (scalar interpolation scales), so the ``[1, S, D]`` tables are
    returned unexpanded (they broadcast wherever diffusers applies them) and through
    :func:`materialize`, so that under torch.compile all blocks read one table (inductor
    recomputed the table's view chain for each block's :func:`qk_norm_rope`)."""
    scalar_scale = rope_interpolation_scale is None or all(
        not torch.is_tensor(v) or v.dim() == 0 for v in rope_interpolation_scale
    )
    if video_coords is not None or not scalar_scale:
        return self._ltx_unpatched_forward(
            hidden_states, num_frames, height, width, rope_interpolation_scale, video_coords
        )
    cos, sin = self._ltx_unpatched_forward(
        hidden_states[:1], num_frames, height, width, rope_interpolation_scale, None
    )
    if not _runs_here(cos):
        return cos, sin
    return materialize(cos), materialize(sin)


def _patch_ltx_rope(module: nn.Module) -> bool:
    if getattr(module, "_ltx_unpatched_forward", None) is None:
        module._ltx_unpatched_forward = module.forward
    module.forward = types.MethodType(ltx_rope_forward, module)
    return True


# ---- Mochi --------------------------------------------------------------------------------


def _modulated(norm: nn.Module, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``rms_norm(x) * (1 + scale)`` (MochiRMSNormZero's / norm3's modulated RMSNorm)."""
    if scale.dtype != x.dtype:
        scale = scale.to(x.dtype)
    return adaln(x, scale, torch.zeros_like(scale), None, float(norm.eps), "rms")


def _gated(norm: nn.Module, x: torch.Tensor, residual: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    """``residual + norm(x, tanh(gate))`` (MochiModulatedRMSNorm after the residual add)."""
    if gate.dtype != x.dtype:
        gate = gate.to(x.dtype)
    return fused_residual_gated_rms_norm(x, residual, gate, None, float(norm.eps))


def _mochi_attention_ok(attn: nn.Module) -> bool:
    names = ("to_q", "to_k", "to_v", "add_q_proj", "add_k_proj", "add_v_proj")
    norms = ("norm_q", "norm_k", "norm_added_q", "norm_added_k")
    return (
        type(attn.processor).__name__ == "MochiAttnProcessor2_0"
        and all(isinstance(getattr(attn, n, None), nn.Linear) for n in names)
        and all(type(getattr(attn, n, None)).__name__ == "MochiRMSNorm" for n in norms)
        and isinstance(attn.to_out[0], nn.Linear)
    )


def _mochi_rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Mochi's RoPE on [B, S, H, D]: channel pairs (2i, 2i+1) rotated in float32 by the
    [S, H, D/2] tables, the result in x's dtype."""
    even, odd = x[..., 0::2].float(), x[..., 1::2].float()
    rotated = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)
    return rotated.flatten(-2).to(x.dtype)


def _mochi_attention(block, x, enc, mask, rotary):
    """``block.attn1(x, enc, rotary, mask)`` (diffusers' ``MochiAttnProcessor2_0``) with the
    q/k/v projections of each stream as one GEMM (``qkv``) and the joint attention as one
    :func:`joint_attention` op instead of a ``torch.nonzero`` per sample."""
    attn = block.attn1
    if attn._ltx_fused:
        q, k, v = F.linear(x, attn._ltx_qkv_weight, attn._ltx_qkv_bias).split(attn._ltx_qkv_sizes, -1)
        eq, ek, ev = F.linear(enc, attn._ltx_add_qkv_weight, attn._ltx_add_qkv_bias).split(
            attn._ltx_add_qkv_sizes, -1
        )
    else:
        q, k, v = attn.to_q(x), attn.to_k(x), attn.to_v(x)
        eq, ek, ev = attn.add_q_proj(enc), attn.add_k_proj(enc), attn.add_v_proj(enc)
    q, k, v, eq, ek, ev = (t.unflatten(2, (attn.heads, -1)) for t in (q, k, v, eq, ek, ev))
    q, k = attn.norm_q(q), attn.norm_k(k)
    eq, ek = attn.norm_added_q(eq), attn.norm_added_k(ek)
    if rotary is not None:
        q, k = _mochi_rotate(q, *rotary), _mochi_rotate(k, *rotary)
    joint = [torch.cat(pair, dim=1) for pair in ((q, eq), (k, ek), (v, ev))]
    out = joint_attention(*joint, mask).flatten(2, 3)
    hidden, context = out.split_with_sizes((x.shape[1], enc.shape[1]), dim=1)
    hidden = attn.to_out[1](attn.to_out[0](hidden))
    if hasattr(attn, "to_add_out"):
        context = attn.to_add_out(context)
    return hidden, context


def mochi_block_forward(
    self,
    hidden_states: torch.Tensor,
    encoder_hidden_states: torch.Tensor,
    temb: torch.Tensor,
    encoder_attention_mask: torch.Tensor,
    image_rotary_emb=None,
):
    """``MochiTransformerBlock.forward`` with the fused gated-residual norms (module docstring)."""
    if not _runs_here(hidden_states) or encoder_hidden_states.dtype != hidden_states.dtype:
        return self._ltx_unpatched_forward(
            hidden_states, encoder_hidden_states, temb, encoder_attention_mask, image_rotary_emb
        )
    n1 = self.norm1
    emb = n1.linear(n1.silu(temb))
    scale_msa, gate_msa, scale_mlp, gate_mlp = emb.chunk(4, dim=1)
    norm_hidden_states = _modulated(n1.norm, hidden_states, scale_msa)

    if not self.context_pre_only:
        nc = self.norm1_context
        enc_emb = nc.linear(nc.silu(temb))
        enc_scale_msa, enc_gate_msa, enc_scale_mlp, enc_gate_mlp = enc_emb.chunk(4, dim=1)
        norm_encoder_hidden_states = _modulated(nc.norm, encoder_hidden_states, enc_scale_msa)
    else:
        norm_encoder_hidden_states = self.norm1_context(encoder_hidden_states, temb)

    if self._ltx_joint:
        attn_hidden_states, context_attn_hidden_states = _mochi_attention(
            self, norm_hidden_states, norm_encoder_hidden_states, encoder_attention_mask, image_rotary_emb
        )
    else:
        attn_hidden_states, context_attn_hidden_states = self.attn1(
            hidden_states=norm_hidden_states,
            encoder_hidden_states=norm_encoder_hidden_states,
            image_rotary_emb=image_rotary_emb,
            attention_mask=encoder_attention_mask,
        )

    hidden_states = _gated(self.norm2, attn_hidden_states, hidden_states, gate_msa)
    norm_hidden_states = _modulated(self.norm3, hidden_states, scale_mlp)
    ff_output = self.ff(norm_hidden_states)
    hidden_states = _gated(self.norm4, ff_output, hidden_states, gate_mlp)

    if not self.context_pre_only:
        encoder_hidden_states = _gated(
            self.norm2_context, context_attn_hidden_states, encoder_hidden_states, enc_gate_msa
        )
        norm_encoder_hidden_states = _modulated(self.norm3_context, encoder_hidden_states, enc_scale_mlp)
        context_ff_output = self.ff_context(norm_encoder_hidden_states)
        encoder_hidden_states = _gated(
            self.norm4_context, context_ff_output, encoder_hidden_states, enc_gate_mlp
        )
    return hidden_states, encoder_hidden_states


def _mochi_block_ok(block: nn.Module) -> bool:
    names = ["norm2", "norm3", "norm4"]
    if not block.context_pre_only:
        names += ["norm2_context", "norm3_context", "norm4_context"]
    try:
        norms = [getattr(block, n) for n in names]
        zero = block.norm1
        ok = type(zero).__name__ == "MochiRMSNormZero" and zero.norm.weight is None
        if not block.context_pre_only:
            ctx = block.norm1_context
            ok = ok and type(ctx).__name__ == "MochiRMSNormZero" and ctx.norm.weight is None
        return ok and all(
            type(n).__name__ == "MochiModulatedRMSNorm" and getattr(n.norm, "weight", None) is None
            for n in norms
        ) and all(getattr(n, "eps", None) is not None for n in norms + [zero.norm])
    except AttributeError:
        return False


def _patch_mochi_block(block: nn.Module, pieces: Collection[str]) -> bool:
    if not _mochi_block_ok(block):
        return False
    if getattr(block, "_ltx_unpatched_forward", None) is None:
        block._ltx_unpatched_forward = block.forward
    attn = block.attn1
    block._ltx_joint = "attention" in pieces and _mochi_attention_ok(attn)
    attn._ltx_fused = block._ltx_joint and "qkv" in pieces
    if attn._ltx_fused and not hasattr(attn, "_ltx_qkv_weight"):
        _fuse_qkv(attn)
        _fuse_qkv(attn, ("add_q_proj", "add_k_proj", "add_v_proj"), "_ltx_add_qkv")
    block.forward = types.MethodType(mochi_block_forward, block)
    return True


PATCHERS = {
    "LTXVideoTransformerBlock": _patch_ltx_block,
    "LTXVideoRotaryPosEmbed": lambda m, pieces: _patch_ltx_rope(m),
    "MochiTransformerBlock": _patch_mochi_block,
}
