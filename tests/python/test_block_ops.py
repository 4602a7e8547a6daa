"""The LTX-Video block fusions (qk_norm_rope, qk_norm_rope_grid, gated_residual, residual_adaln,
linear_gelu_tanh) against float64 references (reference.py), every dtype, vector and scalar
paths, strided inputs and every table layout."""

from __future__ import annotations

import pytest
import torch

import reference as ref
from reference import DTYPES, TOL
from test_ops import check, rand

# (batch, seq, width): head-dim-sized and LTX-sized widths, an odd batch (a last chunk of one
# entry), widths that take the two-vectors-per-thread path (6144 half) and the scalar kernel
# (not a multiple of the 16-byte vector; wider than the vector paths).
QK_SHAPES = [(1, 5, 64), (2, 7, 128), (3, 4, 2048), (2, 3, 36), (1, 2, 6144), (1, 2, 20000)]


def tables(batch, seq, width, layout, dtype, device):
    n = 1 if layout in ("shared", "batch1", "expanded") else batch
    angles = torch.rand(n, seq, width // 2, device=device) * 6.3
    cos = angles.cos().repeat_interleave(2, -1).to(dtype)
    sin = angles.sin().repeat_interleave(2, -1).to(dtype)
    if layout == "shared":
        return cos[0], sin[0]
    if layout == "expanded":
        return cos.expand(batch, -1, -1), sin.expand(batch, -1, -1)
    return cos, sin


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", QK_SHAPES)
@pytest.mark.parametrize("layout", ["shared", "batch1", "expanded", "per_batch"])
def test_qk_norm_rope_matches_float64_reference(lk, dtype, shape, layout):
    b, s, w = shape
    q = rand(shape, dtype, lk.device, scale=2.0, offset=0.3)
    k = rand(shape, dtype, lk.device, scale=0.5)
    wq, wk = rand((w,), dtype, lk.device), rand((w,), dtype, lk.device)
    cos, sin = tables(b, s, w, layout, torch.float32, lk.device)
    got_q, got_k = lk.mod.qk_norm_rope(q, k, wq, wk, cos, sin, 1e-5)
    exp_q, exp_k = ref.qk_norm_rope(q, k, wq, wk, cos, sin, 1e-5)
    check_rotated(got_q, exp_q, ref.rms_norm(q, wq, 1e-5), dtype)
    check_rotated(got_k, exp_k, ref.rms_norm(k, wk, 1e-5), dtype)


def check_rotated(out, expected, normalized, dtype):
    """The normalized value is rounded to the dtype before the rotation (as diffusers does):
    a float32 value on a rounding boundary may round the other way than its float64
    reference, one ulp of |normalized|, which the rotation can leave in a near-zero output."""
    assert not torch.isnan(out).any(), "output has NaN (unwritten elements?)"
    tol = dict(TOL[dtype])
    if dtype != torch.float32:
        tol["atol"] += torch.finfo(dtype).eps * normalized.abs().max().item()
    torch.testing.assert_close(out.double().cpu(), expected.cpu(), **tol)


# (batch, frames, rows, cols, width): width % 6 of 4, 2 (LTX's 2048) and 0; the two-vector path
# (6144 half) and the scalar kernel (20000: wider than the vector paths; 1002: not a multiple of
# the 16-byte vector).
GRID_SHAPES = [(2, 2, 3, 4, 64), (3, 2, 2, 3, 2048), (1, 1, 2, 3, 36), (1, 1, 1, 2, 6144), (1, 1, 1, 2, 20000), (2, 1, 2, 2, 1002)]


def rope_grid(frames, rows, cols, width, device):
    """Frequency bands as large as LTX's (up to theta * pi / 2) and coordinates in [-1, 1]."""
    freqs = 10000.0 ** torch.linspace(0.0, 1.0, width // 6) * (torch.pi / 2)
    axes = [torch.rand(n) * 2 - 1 for n in (frames, rows, cols)]
    return freqs.to(device), [a.to(device) for a in axes]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", GRID_SHAPES)
def test_qk_norm_rope_grid_matches_float64_reference(lk, dtype, shape):
    b, f, h, w, width = shape
    s = f * h * w
    q = rand((b, s, width), dtype, lk.device, scale=2.0, offset=0.3)
    k = rand((b, s, width), dtype, lk.device, scale=0.5)
    wq, wk = rand((width,), dtype, lk.device), rand((width,), dtype, lk.device)
    freqs, axes = rope_grid(f, h, w, width, lk.device)
    got_q, got_k = lk.mod.qk_norm_rope_grid(q, k, wq, wk, freqs, axes, 1e-5)
    cos, sin = ref.grid_tables(freqs, axes, width)
    exp_q, exp_k = ref.qk_norm_rope(q.cpu(), k.cpu(), wq.cpu(), wk.cpu(), cos, sin, 1e-5)
    # Angles up to ~1.6e4 rad: an ulp of cos/sin between libm and the float64 reference is
    # below the float32 tolerance.
    check_rotated(got_q, exp_q, ref.rms_norm(q, wq, 1e-5), dtype)
    check_rotated(got_k, exp_k, ref.rms_norm(k, wk, 1e-5), dtype)


def test_qk_norm_rope_grid_rejects_a_grid_that_does_not_fit(lk):
    q = rand((2, 12, 64), torch.float32, lk.device)
    freqs, axes = rope_grid(2, 2, 3, 64, lk.device)
    with pytest.raises(RuntimeError, match="does not cover the 12 tokens"):
        lk.mod.qk_norm_rope_grid(q, q, None, None, freqs, axes[:2] + [axes[2][:2]])
    with pytest.raises(RuntimeError, match="width / 6 = 10 bands"):
        lk.mod.qk_norm_rope_grid(q, q, None, None, freqs[:9], axes)
    with pytest.raises(RuntimeError, match="1-D float32"):
        lk.mod.qk_norm_rope_grid(q, q, None, None, freqs.double(), axes)


@pytest.mark.parametrize("dtype", DTYPES)
def test_qk_norm_rope_reads_column_slices_of_a_fused_qkv_output(lk, dtype):
    b, s, w = 3, 6, 256
    qkv = rand((b, s, 3 * w), dtype, lk.device)
    q, k, _ = qkv.split(w, dim=-1)
    cos, sin = tables(b, s, w, "per_batch", dtype, lk.device)  # tables in x's dtype
    got_q, got_k = lk.mod.qk_norm_rope(q, k, None, None, cos, sin, 1e-6)
    exp_q, exp_k = ref.qk_norm_rope(q, k, None, None, cos, sin, 1e-6)
    assert got_q.is_contiguous() and got_k.is_contiguous()
    check_rotated(got_q, exp_q, ref.rms_norm(q, None, 1e-6), dtype)
    check_rotated(got_k, exp_k, ref.rms_norm(k, None, 1e-6), dtype)


def test_qk_norm_rope_rejects_mismatched_operands(lk):
    q = rand((2, 4, 64), torch.float32, lk.device)
    cos, sin = tables(2, 4, 64, "shared", torch.float32, lk.device)
    with pytest.raises(RuntimeError, match="q and k must both be"):
        lk.mod.qk_norm_rope(q, q[:, :3], None, None, cos, sin)
    with pytest.raises(RuntimeError, match="do not fit q"):
        lk.mod.qk_norm_rope(q, q, None, None, cos[:, :32], sin[:, :32])
    with pytest.raises(RuntimeError, match="float32 or the dtype of q"):
        lk.mod.qk_norm_rope(q.half(), q.half(), None, None, cos.double(), sin.double())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 8), (2, 5, 64), (2, 7, 2048), (1, 3, 1001), (2, 2, 3072)])
@pytest.mark.parametrize("gate_kind", ["none", "per_sample", "per_token"])
def test_gated_residual_matches_float64_reference(lk, dtype, shape, gate_kind):
    h = rand(shape, dtype, lk.device, scale=3.0)
    y = rand(shape, dtype, lk.device)
    gate = {
        "none": None,
        "per_sample": rand((shape[0], shape[-1]), dtype, lk.device),
        "per_token": rand(shape, dtype, lk.device),
    }[gate_kind]
    check(lk.mod.gated_residual(h, y, gate), ref.gated_residual(h, y, gate), dtype)


def residual_operands(shape, dtype, device, with_gate):
    """(h, y, gate, scale, shift, weight) of residual_adaln: per-sample [B, H] conditioning."""
    h = rand(shape, dtype, device, scale=2.0, offset=0.5)
    y = rand(shape, dtype, device)
    cond = (shape[0], shape[-1])
    gate = rand(cond, dtype, device) if with_gate else None
    scale, shift = rand(cond, dtype, device, scale=0.3), rand(cond, dtype, device)
    return h, y, gate, scale, shift, rand(shape[-1:], dtype, device)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 8), (2, 5, 64), (2, 7, 2048), (1, 3, 1001), (2, 2, 3072), (1, 2, 12288), (1, 2, 80000)])
@pytest.mark.parametrize("with_gate", [True, False])
def test_residual_adaln_matches_float64_reference(lk, dtype, shape, with_gate):
    h, y, gate, scale, shift, w = residual_operands(shape, dtype, lk.device, with_gate)
    got_h, got_n = lk.mod.residual_adaln(h, y, gate, scale, shift, w, 1e-6)
    exp_h, exp_n = ref.residual_adaln(h, y, gate, scale, shift, w, 1e-6)
    check(got_h, exp_h, dtype)
    check(got_n, exp_n, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_residual_ops_read_ltx_unbind_views_and_strided_rows_in_place(lk, dtype):
    b, s, hid = 2, 9, 256
    temb = rand((b, 1, 6 * hid), dtype, lk.device)
    shift, scale, gate, *_ = temb.reshape(b, 1, 6, hid).unbind(dim=2)  # strided [B, 1, H] views
    h = rand((b, s, hid), dtype, lk.device)
    y = rand((b, s, 2 * hid), dtype, lk.device)[..., hid:]  # rows 2*hid apart
    check(lk.mod.gated_residual(h, y, gate), ref.gated_residual(h, y, gate), dtype)
    got_h, got_n = lk.mod.residual_adaln(h, y, None, scale, shift, None, 1e-6)
    exp_h, exp_n = ref.residual_adaln(h, y, None, scale, shift, None, 1e-6)
    check(got_h, exp_h, dtype)
    check(got_n, exp_n, dtype)


def test_residual_ops_reject_mismatched_operands(lk):
    h = rand((2, 4, 64), torch.float32, lk.device)
    with pytest.raises(RuntimeError, match="y must have the shape of h"):
        lk.mod.gated_residual(h, h[:, :3], None)
    with pytest.raises(RuntimeError, match="does not broadcast"):
        lk.mod.gated_residual(h, h, rand((3, 64), torch.float32, lk.device))
    with pytest.raises(RuntimeError, match="dtype of x"):
        lk.mod.residual_adaln(h, h, None, h.half(), h, None, 1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_bias", [True, False])
def test_linear_gelu_tanh_matches_float64_reference(lk, dtype, with_bias):
    x = rand((2, 33, 64), dtype, lk.device)
    w = rand((96, 64), dtype, lk.device, scale=0.125)
    b = rand((96,), dtype, lk.device) if with_bias else None
    got = lk.mod.linear_gelu_tanh(x, w, b)
    assert got.shape == (2, 33, 96)
    # A 64-term dot product rounded once: fp32 accumulation error on top of the output rounding.
    tol = dict(atol=2e-4, rtol=2e-4) if dtype == torch.float32 else TOL[dtype]
    torch.testing.assert_close(got.double().cpu(), ref.linear_gelu_tanh(x, w, b).cpu(), **tol)


def joint_attention_reference(q, k, v, mask):
    """Mochi's joint attention in float64, one sample at a time as diffusers computes it: the
    visual tokens and the kept text tokens attend over each other, the rest of the row is 0."""
    b, n, h, d = q.shape
    s = n - mask.shape[1]
    out = torch.zeros(q.shape, dtype=torch.float64, device=q.device)
    for i in range(b):
        rows = torch.cat([torch.arange(s, device=q.device), s + torch.nonzero(mask[i]).flatten()])
        qi, ki, vi = (x[i, rows].double().transpose(0, 1) for x in (q, k, v))  # [H, R, D]
        p = torch.softmax(qi @ ki.transpose(1, 2) / d**0.5, dim=-1)
        out[i, : len(rows)] = (p @ vi).transpose(0, 1)
    return out


JOINT_MASKS = pytest.mark.parametrize(
    "mask",
    [[[1, 1, 1, 1], [1, 1, 1, 1]], [[1, 1, 0, 0], [1, 1, 1, 1]], [[0, 1, 0, 1], [0, 0, 0, 0]]],
    ids=["all-kept", "padded", "holes-and-none"],
)


@pytest.mark.parametrize("path", ["op", "without-sync"])
@pytest.mark.parametrize("dtype", DTYPES)
@JOINT_MASKS
def test_joint_attention_matches_per_sample_float64_reference(lk, dtype, mask, path):
    """The op (the kept counts read on the host) and the path it takes inside a CUDA graph
    capture (dropped tokens masked, rows compacted on the device) both compute diffusers'
    per-sample attention."""
    b, s, t, h, d = 2, 6, 4, 3, 16
    q, k, v = (rand((b, s + t, h, d), dtype, lk.device) for _ in range(3))
    m = torch.tensor(mask, device=lk.device)
    fn = lk.mod.joint_attention if path == "op" else lk.mod.functional._joint_attention_without_sync
    got = fn(q, k, v, m)
    assert got.shape == q.shape and got.dtype == dtype and got.is_contiguous()
    want = joint_attention_reference(q, k, v, m)
    torch.testing.assert_close(got.double(), want, **TOL[dtype])


@JOINT_MASKS
def test_joint_attention_captured_in_a_cuda_graph_replays_what_it_computes_eagerly(cuda_lk, mask):
    """Inside a capture the op must not sync (an error there): a graph captured around it
    replays the eager result for new inputs copied into the captured ones."""
    b, s, t, h, d = 2, 64, 16, 4, 64
    mask = [[x for x in row for _ in range(4)] for row in mask]
    q, k, v = (rand((b, s + t, h, d), torch.bfloat16, "cuda") for _ in range(3))
    m = torch.tensor(mask, device="cuda")
    cuda_lk.mod.joint_attention(q, k, v, m)  # warm-up outside the capture (cuDNN plans)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = cuda_lk.mod.joint_attention(q, k, v, m)
    fresh = [rand((b, s + t, h, d), torch.bfloat16, "cuda") for _ in range(3)]
    for dst, src in zip((q, k, v), fresh):
        dst.copy_(src)
    graph.replay()
    want = cuda_lk.mod.joint_attention(*fresh, m)
    torch.testing.assert_close(captured, want, **TOL[torch.bfloat16])
