"""Functional wrappers around the registered ops, their fake (meta) implementations for
``torch.compile``, and the per-device dtype check from the build's capability matrix."""

from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple

import torch
from torch.compiler import is_compiling as _is_compiling  # bound once: called on every eager call
from torch.nn.attention import SDPBackend, sdpa_kernel

from . import _capabilities
from ._ops import add_op_namespace_prefix, ops

# The backend this variant was built for: ops have kernels for that dispatch key only.
BACKEND = (
    "cuda"
    if torch._C._dispatch_has_kernel_for_dispatch_key(add_op_namespace_prefix("rms_norm"), "CUDA")
    else "cpu"
)

_checked: set = set()


class _Ops:
    """The ops' callables, by name: the OpOverloads (what torch.compile traces) or, for eager
    calls, the C++ callables they forward to (`OpOverload._op`: one Python frame less per call,
    which counts where small shapes are bound by host overhead)."""

    def __init__(self, callables):
        self.__dict__.update(callables)


_OP_NAMES = [
    "rms_norm", "rms_norm_out", "fused_residual_gated_rms_norm",
    "fused_residual_gated_rms_norm_out", "adaln", "adaln_out", "rope_3d", "rope_3d_out", "geglu",
    "geglu_out", "gelu_tanh", "gelu_tanh_out", "qk_norm_rope", "qk_norm_rope_grid",
    "gated_residual", "residual_adaln", "residual_adaln_fp8", "quantize_fp8", "linear_gelu_tanh",
    "materialize",
]
_TRACED = _Ops({name: getattr(ops, name).default for name in _OP_NAMES})
_EAGER = _Ops({name: getattr(o, "_op", o) for name, o in vars(_TRACED).items()})


def _ops_for(x: torch.Tensor, op: str) -> _Ops:
    # The callables for this call, after the dtype check: a clear error for a dtype the GPU's
    # cubin was not built with (bfloat16 on sm_7x), cached per device and dtype (the kernel
    # launch itself reports a missing kernel image). While torch.compile traces, the
    # OpOverloads and no check. Kept cheap: it runs on every eager call.
    if _is_compiling():
        return _TRACED
    if x.is_cuda:
        key = (x.get_device(), x.dtype)
        if key not in _checked:
            _capabilities.check_dtype(x.device, x.dtype, op)
            _checked.add(key)
    return _EAGER


def _callables() -> _Ops:
    # For the ops that run no kernel of this build (no capability check).
    return _TRACED if _is_compiling() else _EAGER


def reset_dtype_check_cache() -> None:
    """Forget which (device, dtype) pairs passed the capability check (for tests)."""
    _checked.clear()


def rms_norm(
    x: torch.Tensor,
    weight: Optional[torch.Tensor] = None,
    eps: float = 1e-6,
    *,
    out: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """RMSNorm over the last dim::

        y = x / sqrt(mean(x**2, dim=-1) + eps) * weight      # weight=None: no scaling

    Statistics in float32, one rounding to x's dtype. Matches ``torch.nn.functional.rms_norm(x,
    (H,), weight, eps)`` and diffusers' ``RMSNorm`` (``elementwise_affine=False`` -> weight None).
    ``weight`` is [H] in x's dtype; ``out`` may be x itself.
    """
    o = _ops_for(x, "rms_norm")
    if out is None:
        return o.rms_norm(x, weight, float(eps))
    o.rms_norm_out(out, x, weight, float(eps))
    return out


def fused_residual_gated_rms_norm(
    x: torch.Tensor,
    residual: torch.Tensor,
    gate: torch.Tensor,
    weight: Optional[torch.Tensor] = None,
    eps: float = 1e-6,
    *,
    out: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Mochi's block tail in one pass::

        out = residual + tanh(gate) * (x / sqrt(mean(x**2, dim=-1) + eps) * weight)

    Reference: diffusers ``MochiTransformerBlock.forward``,
    ``hidden_states = hidden_states + self.norm2(attn_hidden_states, torch.tanh(gate_msa).unsqueeze(1))``
    with ``norm2 = MochiModulatedRMSNorm`` (RMSNorm without weight, times its scale argument):
    here ``residual = hidden_states``, ``x = attn_hidden_states``, ``gate = gate_msa``.
    ``gate`` (and ``residual``) broadcast against x; a 2-D ``[B, H]`` gate with a 3-D x is
    per-sample (``[B, 1, H]``). Computed in float32, rounded once; ``out`` may be ``residual``.
    """
    o = _ops_for(x, "fused_residual_gated_rms_norm")
    if out is None:
        return o.fused_residual_gated_rms_norm(x, residual, gate, weight, float(eps))
    o.fused_residual_gated_rms_norm_out(out, x, residual, gate, weight, float(eps))
    return out


def adaln(
    x: torch.Tensor,
    scale: torch.Tensor,
    shift: torch.Tensor,
    weight: Optional[torch.Tensor] = None,
    eps: float = 1e-6,
    norm: str = "rms",
    *,
    out: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Adaptive norm (DiT / LTX-Video conditioning)::

        out = norm(x) * (1 + scale) + shift
        norm = "rms":   x / sqrt(mean(x**2) + eps) * weight
        norm = "layer": (x - mean(x)) / sqrt(var(x) + eps) * weight   # biased var, no bias

    ``scale``/``shift`` broadcast against x: ``[B, H]`` (per sample, with 3-D x),
    ``[B, 1, H]``, ``[H]`` or x's shape (per token), in x's dtype; strided views (e.g. from
    ``unbind`` of LTX's ``scale_shift_table + temb``) are read in place. Reference: LTX-Video
    ``norm_hidden_states = self.norm1(hidden_states) * (1 + scale_msa) + shift_msa``.
    """
    o = _ops_for(x, "adaln")
    if out is None:
        return o.adaln(x, scale, shift, weight, float(eps), norm)
    o.adaln_out(out, x, scale, shift, weight, float(eps), norm)
    return out


def rope_3d(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    *,
    out: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Rotary embedding, interleaved-pair convention (LTX-Video, GPT-J; not NeoX rotate-half)::

        out[..., 2i]   = x[..., 2i]   * cos[..., 2i]   - x[..., 2i+1] * sin[..., 2i]
        out[..., 2i+1] = x[..., 2i+1] * cos[..., 2i+1] + x[..., 2i]   * sin[..., 2i+1]

    This is diffusers' ``transformer_ltx.apply_rotary_emb`` computed in float32.

    ``x``: ``[batch, seq, heads, head_dim]`` (``seq = t*h*w`` for video, or a 1-D sequence) or
    LTX's ``[batch, seq, heads*head_dim]``. ``cos``/``sin``: ``[seq, D]``,
    ``[1 or batch, seq, D]`` or ``[1 or batch, seq, 1, D]``, float32 or x's dtype, with
    ``D = head_dim`` (shared by all heads) or ``D = heads*head_dim`` (LTX's full-width table,
    whose per-axis (t, h, w) frequency bands :func:`rope_3d_tables` builds).
    """
    o = _ops_for(x, "rope_3d")
    if out is None:
        return o.rope_3d(x, cos, sin)
    o.rope_3d_out(out, x, cos, sin)
    return out


def geglu(x: torch.Tensor, *, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """GEGLU with the tanh GELU, diffusers' chunk order: ``[..., 2d] -> [..., d]``::

        a, g = x.chunk(2, dim=-1)
        out = a * gelu(g, approximate="tanh")

    (diffusers' ``GEGLU`` module uses the erf GELU; this op is the tanh form.)
    """
    o = _ops_for(x, "geglu")
    if out is None:
        return o.geglu(x)
    o.geglu_out(out, x)
    return out


def gelu_tanh(x: torch.Tensor, *, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``gelu(x, approximate="tanh") = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``, the
    activation of LTX-Video's feed-forward (``activation_fn="gelu-approximate"``)."""
    o = _ops_for(x, "gelu_tanh")
    if out is None:
        return o.gelu_tanh(x)
    o.gelu_tanh_out(out, x)
    return out


def qk_norm_rope(
    q: torch.Tensor,
    k: torch.Tensor,
    q_weight: Optional[torch.Tensor],
    k_weight: Optional[torch.Tensor],
    cos: torch.Tensor,
    sin: torch.Tensor,
    eps: float = 1e-5,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """LTX-Video's attention prologue in one pass over q and one over k::

        q = rope(rms_norm(q, q_weight, eps), cos, sin)      # RMSNorm across all heads
        k = rope(rms_norm(k, k_weight, eps), cos, sin)

    with the interleaved-pair rotation of :func:`rope_3d` and LTX's full-width tables.
    Reference: diffusers ``LTXVideoAttnProcessor``: ``attn.norm_q(query)`` (``torch.nn.RMSNorm``
    over ``heads * head_dim``), then ``apply_rotary_emb(query, image_rotary_emb)``; the normalized
    value is rounded to q's dtype before the rotation, as there.

    ``q``, ``k``: ``[batch, seq, width]`` with the last dim contiguous (strided rows, e.g. column
    slices of a fused QKV projection, are read in place). ``cos``/``sin``: ``[seq, width]`` or
    ``[1 or batch, seq, width]``, float32 or q's dtype; a table expanded over the batch (stride 0)
    or of batch 1 is read once per token for all batch entries. Returns contiguous (q, k).
    """
    o = _ops_for(q, "qk_norm_rope")
    return o.qk_norm_rope(q, k, q_weight, k_weight, cos, sin, float(eps))


def qk_norm_rope_grid(
    q: torch.Tensor,
    k: torch.Tensor,
    q_weight: Optional[torch.Tensor],
    k_weight: Optional[torch.Tensor],
    freqs: torch.Tensor,
    axes: Sequence[torch.Tensor],
    eps: float = 1e-5,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """:func:`qk_norm_rope` with LTX-Video's cos/sin computed in the kernel from each token's
    (frame, row, col) position instead of read from ``[S, width]`` float32 tables::

        angle(token, pair i) = freqs[i // 3] * axes[i % 3][coord of the token on axis i % 3]

    for the pairs after the first ``width % 6`` channels (those are unrotated), tokens in
    frame-major order over the grid ``len(axes[0]) x len(axes[1]) x len(axes[2])``, shared by
    the batch. ``freqs`` (``[width // 6]``) and each axis (``2 * coord - 1`` per position) are
    float32, built as ``LTXVideoRotaryPosEmbed`` builds them (``blocks.ltx_rope_grid``); the
    angle is the same float32 product, so the result matches the table path to an ulp of cos/sin.
    """
    o = _ops_for(q, "qk_norm_rope_grid")
    axis_f, axis_h, axis_w = axes
    return o.qk_norm_rope_grid(q, k, q_weight, k_weight, freqs, axis_f, axis_h, axis_w, float(eps))


def gated_residual(h: torch.Tensor, y: torch.Tensor, gate: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``h + y * gate`` (``h + y`` without a gate), computed in float32 and rounded once.

    ``y`` has h's shape (strided rows read in place); ``gate`` broadcasts like :func:`adaln`'s
    scale (``[B, H]`` with 3-D h is per sample). LTX-Video: ``hidden_states + attn * gate_msa``.
    """
    o = _ops_for(h, "gated_residual")
    return o.gated_residual(h, y, gate)


def residual_adaln(
    h: torch.Tensor,
    y: torch.Tensor,
    gate: Optional[torch.Tensor],
    scale: torch.Tensor,
    shift: torch.Tensor,
    weight: Optional[torch.Tensor] = None,
    eps: float = 1e-6,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """A residual update and the next AdaLN-RMS in one pass, both results returned::

        h_new = h + y * gate                  # h + y when gate is None; rounded to h's dtype
        norm = rms_norm(h_new, weight, eps) * (1 + scale) + shift

    LTX-Video: ``hidden_states = hidden_states + attn2_out`` then
    ``norm2(hidden_states) * (1 + scale_mlp) + shift_mlp``.
    """
    o = _ops_for(h, "residual_adaln")
    return o.residual_adaln(h, y, gate, scale, shift, weight, float(eps))


def residual_adaln_fp8(
    h: torch.Tensor,
    y: torch.Tensor,
    gate: Optional[torch.Tensor],
    scale: torch.Tensor,
    shift: torch.Tensor,
    weight: Optional[torch.Tensor] = None,
    eps: float = 1e-6,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`residual_adaln` with the norm handed straight to an FP8 matrix product:
    ``(h_new, values, scale)``, where ``values`` (``float8_e4m3fn``, h's shape) and ``scale``
    (float32, ``[..., 1]``) are :func:`quantize_fp8` of the norm rounded to h's dtype, bit for
    bit; the norm itself is never written. LTX-Video's ``fp8`` piece: norm2 and the chained
    norm1 feed FP8 projections."""
    o = _ops_for(h, "residual_adaln_fp8")
    return o.residual_adaln_fp8(h, y, gate, scale, shift, weight, float(eps))


def quantize_fp8(x: torch.Tensor, gelu: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    """Row-wise FP8 quantization: ``(values, scale)`` with ``x ≈ values * scale``, where
    ``scale = max(amax(|x|, -1), 1e-12) * (1 / 448)`` (float32, ``[..., 1]``) and ``values =
    (x.float() * (1 / scale)).to(torch.float8_e4m3fn)``, bit for bit (``fp8.quantize_rows``,
    on either device). ``gelu=True`` quantizes
    :func:`gelu_tanh` of x (rounded to x's dtype) in the same pass. What ``torch._scaled_mm``
    takes as a row-scaled operand."""
    o = _ops_for(x, "gelu_quantize_fp8" if gelu else "quantize_fp8")
    return o.quantize_fp8(x, gelu)


def linear_gelu_tanh(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``gelu(x @ weight.T + bias, approximate="tanh")`` with the bias and GELU applied in the
    matrix product's epilogue (cuBLASLt ``GELU_BIAS`` through ``torch._addmm_activation``), kept
    as one op under ``torch.compile``. LTX-Video's feed-forward ``proj`` + GELU."""
    return _callables().linear_gelu_tanh(x, weight, bias)


def materialize(x: torch.Tensor) -> torch.Tensor:
    """A contiguous copy of ``x`` that ``torch.compile`` keeps as one buffer: inductor would
    otherwise recompute a cheap view chain (LTX's RoPE tables) for each custom-op consumer."""
    return _callables().materialize(x)


def rope_3d_tables(
    num_frames: int,
    height: int,
    width: int,
    dim: int,
    *,
    batch_size: int = 1,
    theta: float = 10000.0,
    scale: Sequence[float] = (1.0, 1.0, 1.0),
    device: Optional[torch.device] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """LTX-Video's cos/sin tables, ``[batch_size, num_frames*height*width, dim]`` float32.

    Token ``(f, y, x)`` (frame-major order) has coordinates ``(f*scale[0], y*scale[1],
    x*scale[2])``; axis ``a`` gets ``dim // 6`` frequency bands
    ``theta ** linspace(0, 1, dim // 6) * pi / 2`` applied to ``2 * coord - 1``, the bands of
    the three axes interleaved (t, h, w, t, h, w, ...), each repeated for its pair, and the
    first ``dim % 6`` channels left unrotated (cos 1, sin 0). Same as diffusers'
    ``LTXVideoRotaryPosEmbed(dim)`` with ``rope_interpolation_scale = r`` and patch sizes
    ``(pt, p)`` when ``scale = (r[0]*pt/20, r[1]*p/2048, r[2]*p/2048)``.
    """
    f = torch.arange(num_frames, dtype=torch.float32, device=device) * scale[0]
    h = torch.arange(height, dtype=torch.float32, device=device) * scale[1]
    w = torch.arange(width, dtype=torch.float32, device=device) * scale[2]
    grid = torch.stack(torch.meshgrid(f, h, w, indexing="ij"), dim=-1).reshape(-1, 3)  # [S, 3]
    bands = theta ** torch.linspace(0.0, 1.0, dim // 6, dtype=torch.float32, device=device)
    bands = bands * (math.pi / 2.0)
    freqs = (grid.unsqueeze(-1) * 2 - 1) * bands  # [S, 3, dim // 6]
    freqs = freqs.transpose(-1, -2).flatten(1)  # [S, 3 * (dim // 6)], axes interleaved
    cos = freqs.cos().repeat_interleave(2, dim=-1)
    sin = freqs.sin().repeat_interleave(2, dim=-1)
    pad = dim % 6
    if pad:
        cos = torch.cat([torch.ones_like(cos[:, :pad]), cos], dim=-1)
        sin = torch.cat([torch.zeros_like(sin[:, :pad]), sin], dim=-1)
    cos = cos.unsqueeze(0).expand(batch_size, -1, -1).contiguous()
    sin = sin.unsqueeze(0).expand(batch_size, -1, -1).contiguous()
    return cos, sin


# cuDNN's fused attention first: the fastest backend at every Mochi and LTX shape measured on
# an H200 (bench/attention.py; torch's own order puts flash first, 1.6-1.8x slower there).
_SDPA_ORDER = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def _attend(q, k, v, mask=None):
    """SDPA over [B, S, H, D] tensors (``mask``: [B, S_kv] keys taking part), contiguous as
    the fake says (a no-op where the backend kept q's layout: cuDNN's)."""
    tr = lambda x: x.transpose(1, 2)  # noqa: E731
    with sdpa_kernel(_SDPA_ORDER, set_priority=True):
        out = torch.nn.functional.scaled_dot_product_attention(
            tr(q), tr(k), tr(v), attn_mask=None if mask is None else mask[:, None, None, :]
        )
    return tr(out).contiguous()


def _joint_attention_without_sync(q, k, v, mask):
    """:func:`joint_attention` without reading the mask on the host, for a CUDA graph being
    captured (where a sync is an error): one attention over the batch with the dropped text
    tokens masked out as keys (1.5x the unmasked kernel's time on an H200), then each sample's
    kept text rows moved to the front in order and the rest zeroed."""
    n, h, d = q.shape[1:]
    t = mask.shape[1]
    s = n - t
    keep = mask != 0
    out = _attend(q, k, v, torch.cat([keep.new_ones(keep.shape[0], s), keep], 1))
    order = torch.argsort((~keep).to(torch.uint8), dim=1, stable=True)  # kept first, in order
    text = out[:, s:].gather(1, order[:, :, None, None].expand(-1, -1, h, d))
    kept = torch.arange(t, device=q.device)[None, :] < keep.sum(1, keepdim=True)
    text = torch.where(kept[:, :, None, None], text, text.new_zeros(()))
    return torch.cat([out[:, :s], text], 1)


@torch.library.custom_op(add_op_namespace_prefix("joint_attention"), mutates_args=())
def _joint_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    if q.is_cuda and torch.cuda.is_current_stream_capturing():
        return _joint_attention_without_sync(q, k, v, mask)
    t = mask.shape[1]
    s = q.shape[1] - t
    counts = (mask != 0).sum(1).tolist()  # the one host sync: how many text tokens each sample keeps
    if all(c == t for c in counts):
        return _attend(q, k, v)
    out = q.new_zeros(q.shape)
    for i, c in enumerate(counts):
        rows = torch.cat([torch.arange(s, device=q.device), s + torch.nonzero(mask[i]).flatten()])
        out[i : i + 1, : s + c] = _attend(q[i : i + 1, rows], k[i : i + 1, rows], v[i : i + 1, rows])
    return out


@_joint_attention.register_fake
def _joint_attention_fake(q, k, v, mask):
    return q.new_empty(q.shape)


def joint_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mochi's joint attention (diffusers' ``MochiAttnProcessor2_0``) as one op. q/k/v are
    [B, S + T, H, D]: S visual tokens, then T text tokens, of which ``mask`` [B, T] (nonzero:
    kept) says which each sample attends over. Returns [B, S + T, H, D]: the visual tokens'
    outputs, then each sample's kept text tokens' outputs in order, then zeros (where diffusers
    pads). When every sample keeps every text token: one batched attention call, no copy.

    Opaque to ``torch.compile`` (the kept counts are read on the host inside the op), so a
    compiled Mochi block is one graph instead of breaking at each sample's ``torch.nonzero``,
    and the concatenation of the two streams is written by the kernels that produce them.
    Inside a CUDA graph capture (``mode="reduce-overhead"``) it reads nothing on the host and
    masks the dropped tokens instead (the same values up to rounding; a slower attention
    kernel).
    No autograd formula, like every op here: for inference."""
    return _joint_attention(q, k, v, mask)


# ---- fake implementations: shapes only, for torch.compile / FakeTensor tracing -----------


def _same_shape(x, *args):
    return x.new_empty(x.shape)


def _no_result(*args):
    return None


def _geglu_fake(x):
    return x.new_empty((*x.shape[:-1], x.shape[-1] // 2))


def _two_like(x, *args):
    return x.new_empty(x.shape), x.new_empty(x.shape)


def _fp8_rows(x):
    return x.new_empty(x.shape, dtype=torch.float8_e4m3fn), x.new_empty((*x.shape[:-1], 1), dtype=torch.float32)


def _residual_adaln_fp8_fake(h, *args):
    return (h.new_empty(h.shape), *_fp8_rows(h))


def _quantize_fp8_fake(x, gelu=False):
    return _fp8_rows(x)


def _linear_fake(x, weight, bias):
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


torch.library.register_fake(add_op_namespace_prefix("qk_norm_rope"))(_two_like)
torch.library.register_fake(add_op_namespace_prefix("qk_norm_rope_grid"))(_two_like)
torch.library.register_fake(add_op_namespace_prefix("gated_residual"))(_same_shape)
torch.library.register_fake(add_op_namespace_prefix("residual_adaln"))(_two_like)
torch.library.register_fake(add_op_namespace_prefix("residual_adaln_fp8"))(_residual_adaln_fp8_fake)
torch.library.register_fake(add_op_namespace_prefix("quantize_fp8"))(_quantize_fp8_fake)
torch.library.register_fake(add_op_namespace_prefix("linear_gelu_tanh"))(_linear_fake)
torch.library.register_fake(add_op_namespace_prefix("materialize"))(_same_shape)

for _name, _fake in [
    ("rms_norm", _same_shape),
    ("fused_residual_gated_rms_norm", _same_shape),
    ("adaln", _same_shape),
    ("rope_3d", _same_shape),
    ("geglu", _geglu_fake),
    ("gelu_tanh", _same_shape),
]:
    torch.library.register_fake(add_op_namespace_prefix(_name))(_fake)
    torch.library.register_fake(add_op_namespace_prefix(_name + "_out"))(_no_result)
