"""float64 references and per-dtype tolerances for the ops."""

from __future__ import annotations

import math

import torch

# Output vs float64 reference computed from the same (rounded) inputs: fp32 arithmetic error
# for float32; about one rounding of the output for half types (fp16 ulp/2 = 4.9e-4 relative,
# bf16 ulp/2 = 3.9e-3 relative).
TOL = {
    torch.float32: dict(atol=5e-5, rtol=5e-5),
    torch.float16: dict(atol=2e-3, rtol=2e-3),
    torch.bfloat16: dict(atol=1.6e-2, rtol=1.6e-2),
}
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def d(t):
    return None if t is None else t.double()


def rms_norm(x, w, eps):
    x = d(x)
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y * d(w) if w is not None else y


def layer_norm(x, w, eps):
    x = d(x)
    mean = x.mean(-1, keepdim=True)
    var = (x - mean).pow(2).mean(-1, keepdim=True)
    y = (x - mean) * torch.rsqrt(var + eps)
    return y * d(w) if w is not None else y


def per_sample(c, x):
    # [B, H] conditioning with x of >= 3 dims is per-sample.
    if c.dim() == 2 and x.dim() >= 3 and c.shape[0] == x.shape[0]:
        return c.reshape(c.shape[0], *([1] * (x.dim() - 2)), c.shape[-1])
    return c


def gated(x, residual, gate, w, eps):
    return d(per_sample(residual, x)) + torch.tanh(d(per_sample(gate, x))) * rms_norm(x, w, eps)


def adaln(x, scale, shift, w, eps, norm):
    n = rms_norm(x, w, eps) if norm == "rms" else layer_norm(x, w, eps)
    return n * (1 + d(per_sample(scale, x))) + d(per_sample(shift, x))


def gelu_tanh(x):
    x = d(x)
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def geglu(x):
    a, g = d(x).chunk(2, dim=-1)
    return a * gelu_tanh(g)


def rope(x, cos, sin):
    """Interleaved pairs, written as diffusers' LTX apply_rotary_emb, broadcasting tables."""
    b, s = x.shape[:2]
    xf = d(x).reshape(b, s, -1)
    width = xf.shape[-1]
    c, sn = d(cos), d(sin)
    if c.dim() == 4:
        c, sn = c.squeeze(2), sn.squeeze(2)
    if c.dim() == 2:
        c, sn = c.unsqueeze(0), sn.unsqueeze(0)
    reps = width // c.shape[-1]
    c, sn = c.repeat(1, 1, reps), sn.repeat(1, 1, reps)
    real, imag = xf.unflatten(-1, (-1, 2)).unbind(-1)
    rotated = torch.stack([-imag, real], dim=-1).flatten(-2)
    return (xf * c + rotated * sn).reshape(x.shape)


def qk_norm_rope(q, k, wq, wk, cos, sin, eps):
    """Each normalized row is rounded to q's dtype before the rotation, as in diffusers' LTX
    processor (``norm_q`` then ``apply_rotary_emb``)."""
    nq = rms_norm(q, wq, eps).to(q.dtype)
    nk = rms_norm(k, wk, eps).to(k.dtype)
    return rope(nq, cos, sin), rope(nk, cos, sin)


def grid_tables(freqs, axes, width):
    """LTX-Video's [S, width] cos/sin in float64 from the float32 angles ``freqs[j] * axis[c]``
    (one float32 product, as the table path computes it), the first ``width % 6`` channels
    unrotated."""
    af, ah, aw = (a.float().cpu() for a in axes)
    coords = torch.stack(torch.meshgrid(af, ah, aw, indexing="ij"), dim=-1).reshape(-1, 3)
    angles = (freqs.float().cpu()[None, :, None] * coords[:, None, :]).flatten(1)  # [S, 3 * bands]
    cos = angles.double().cos().repeat_interleave(2, -1)
    sin = angles.double().sin().repeat_interleave(2, -1)
    pad = width % 6
    cos = torch.cat([torch.ones(cos.shape[0], pad, dtype=torch.float64), cos], dim=-1)
    sin = torch.cat([torch.zeros(sin.shape[0], pad, dtype=torch.float64), sin], dim=-1)
    return cos, sin


def gated_residual(h, y, gate):
    g = 1.0 if gate is None else d(per_sample(gate, h))
    return d(h) + d(y) * g


def residual_adaln(h, y, gate, scale, shift, w, eps):
    """(h_new, norm): the norm is taken of h_new rounded to h's dtype."""
    h_new = gated_residual(h, y, gate)
    return h_new, adaln(h_new.to(h.dtype), scale, shift, w, eps, "rms")


def linear_gelu_tanh(x, w, b):
    y = d(x) @ d(w).T
    return gelu_tanh(y + d(b) if b is not None else y)
