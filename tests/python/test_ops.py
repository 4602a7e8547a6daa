"""Every op, dtype and a spread of shapes against float64 references (reference.py)."""

from __future__ import annotations

import pytest
import torch

import reference as ref
from reference import DTYPES, TOL

# Hidden sizes: QK-norm head dims, odd sizes, sizes that are not a multiple of the 16-byte
# vector width (8 halfs / 4 floats), the model widths of LTX/Mochi/FLUX, and rows too wide to
# keep in registers (scalar two-pass kernel). 1024 (fp32) and 1040 (bf16/fp16): rows of 129-256
# vectors, which plain RMSNorm runs two vectors per thread (1040: the last thread's second
# vector past the row).
NORM_SHAPES = [
    (3, 8),
    (5, 24),
    (4, 64),
    (2, 3, 128),
    (7, 33),
    (3, 5, 1001),
    (3, 1024),
    (2, 3, 1030),
    (2, 5, 1040),
    (2, 7, 2048),
    (1, 9, 3072),
    (2, 3, 4096),
    (1, 2, 8192),
    (2, 20000),
    (1, 40000),
]
EMPTY_SHAPES = [(0, 64), (2, 0, 128), (3, 0)]


def rand(shape, dtype, device, scale=1.0, offset=0.0):
    return (torch.randn(shape, dtype=torch.float32, device=device) * scale + offset).to(dtype)


def poisoned(like, shape=None):
    return torch.full(shape if shape is not None else like.shape, float("nan"), dtype=like.dtype, device=like.device)


def check(out, expected, dtype):
    assert not torch.isnan(out).any(), "output has NaN (unwritten elements?)"
    torch.testing.assert_close(out.double().cpu(), expected.cpu(), **TOL[dtype])


# ---- rms_norm -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", NORM_SHAPES)
@pytest.mark.parametrize("with_weight", [True, False])
def test_rms_norm_matches_float64_reference(lk, dtype, shape, with_weight):
    x = rand(shape, dtype, lk.device, scale=2.0, offset=0.5)
    w = rand(shape[-1:], dtype, lk.device) if with_weight else None
    check(lk.mod.rms_norm(x, w, 1e-6), ref.rms_norm(x, w, 1e-6), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 64), (3, 1001), (2, 5, 3072)])
def test_rms_norm_out_writes_every_element_and_may_alias_x(lk, dtype, shape):
    x = rand(shape, dtype, lk.device)
    w = rand(shape[-1:], dtype, lk.device)
    expected = ref.rms_norm(x, w, 1e-5)
    out = poisoned(x)
    assert lk.mod.rms_norm(x, w, 1e-5, out=out) is out
    check(out, expected, dtype)
    lk.mod.rms_norm(x, w, 1e-5, out=x)
    check(x, expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm_handles_strided_and_misaligned_inputs(lk, dtype):
    big = rand((3, 5, 2 * 512), dtype, lk.device)
    sliced = big[..., 100:612]  # rows 1024 apart, start not 16-byte aligned
    transposed = rand((3, 512, 5), dtype, lk.device).transpose(1, 2)  # last dim strided
    gappy = rand((4, 6, 5, 256), dtype, lk.device)[::2, ::3]  # 3 irreducible row levels
    shifted = rand((3 * 256 + 1,), dtype, lk.device)[1:].view(3, 256)  # misaligned base
    w = rand((512,), dtype, lk.device)
    for x in [big[..., :512], sliced, transposed]:
        check(lk.mod.rms_norm(x, w), ref.rms_norm(x, w, 1e-6), dtype)
    for x in [gappy, shifted]:
        check(lk.mod.rms_norm(x), ref.rms_norm(x, None, 1e-6), dtype)


@pytest.mark.parametrize("shape", EMPTY_SHAPES)
def test_rms_norm_of_empty_tensor_is_empty(lk, shape):
    x = torch.empty(shape, dtype=torch.bfloat16, device=lk.device)
    y = lk.mod.rms_norm(x, None)
    assert y.shape == x.shape and y.dtype == x.dtype


def test_rms_norm_rejects_bad_operands(lk):
    x = rand((2, 64), torch.float16, lk.device)
    with pytest.raises(RuntimeError, match="weight must have the dtype of x"):
        lk.mod.rms_norm(x, torch.ones(64, device=lk.device))
    with pytest.raises(RuntimeError, match=r"weight must have shape \[64\]"):
        lk.mod.rms_norm(x, torch.ones(32, dtype=torch.float16, device=lk.device))
    with pytest.raises(RuntimeError, match="float32, float16,? (or )?bfloat16"):
        lk.mod.rms_norm(x.double())
    with pytest.raises(RuntimeError, match="out must be contiguous"):
        lk.mod.rms_norm(x, out=torch.empty(64, 2, dtype=x.dtype, device=lk.device).t())


def test_a_cpu_x_with_cuda_operands_is_rejected_before_any_launch(cuda_lk):
    # The ops dispatch on any operand's device, so these reach the cuda kernels with x on the
    # CPU; the output must not be allocated on the GPU and handed a host pointer to read.
    mod, dt = cuda_lk.mod, torch.float16
    x = rand((2, 4, 64), dt, "cpu")
    g = rand((2, 4, 64), dt, "cuda")
    table = torch.ones(4, 64, device="cuda")
    calls = {
        "rms_norm": lambda: mod.rms_norm(x, g[0, 0]),
        "fused_residual_gated_rms_norm": lambda: mod.fused_residual_gated_rms_norm(x, g, g),
        "adaln": lambda: mod.adaln(x, g, g),
        "rope_3d": lambda: mod.rope_3d(x, table, table),
        "qk_norm_rope": lambda: mod.qk_norm_rope(x, g, None, None, table, table),
        "gated_residual": lambda: mod.gated_residual(x, g, g),
        "residual_adaln": lambda: mod.residual_adaln(x, g, g, g, g),
    }
    for name, call in calls.items():
        with pytest.raises(RuntimeError, match="is on cpu") as e:
            call()
        assert f"ltx_kernels.{name}" in str(e.value), str(e.value)
    torch.cuda.synchronize()  # no launch faulted on the host pointer


# ---- fused_residual_gated_rms_norm -------------------------------------------------------


GATED_SHAPES = [(2, 5, 64), (2, 7, 1001), (2, 9, 3072), (1, 3, 20000)]


def gate_forms(x):
    """Per-sample [B, H] and [B, 1, H], per-token (x's shape), and shared [H] gates."""
    b, h = x.shape[0], x.shape[-1]
    return {
        "BH": rand((b, h), x.dtype, x.device),
        "B1H": rand((b, 1, h), x.dtype, x.device),
        "full": rand(x.shape, x.dtype, x.device),
        "H": rand((h,), x.dtype, x.device),
    }


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", GATED_SHAPES)
@pytest.mark.parametrize("with_weight", [True, False])
def test_gated_residual_rms_norm_matches_reference(lk, dtype, shape, with_weight):
    x = rand(shape, dtype, lk.device, scale=3.0)
    residual = rand(shape, dtype, lk.device)
    w = rand(shape[-1:], dtype, lk.device) if with_weight else None
    for name, gate in gate_forms(x).items():
        out = lk.mod.fused_residual_gated_rms_norm(x, residual, gate, w, 1e-5)
        check(out, ref.gated(x, residual, gate, w, 1e-5), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gated_residual_out_may_alias_residual(lk, dtype):
    x = rand((2, 6, 256), dtype, lk.device)
    residual = rand((2, 6, 256), dtype, lk.device)
    gate = rand((2, 256), dtype, lk.device)
    expected = ref.gated(x, residual, gate, None, 1e-6)
    lk.mod.fused_residual_gated_rms_norm(x, residual, gate, out=residual)
    check(residual, expected, dtype)


def test_gated_residual_rejects_gate_that_does_not_broadcast(lk):
    x = rand((2, 5, 64), torch.float32, lk.device)
    with pytest.raises(RuntimeError, match="does not broadcast"):
        lk.mod.fused_residual_gated_rms_norm(x, x, rand((3, 64), torch.float32, lk.device))
    with pytest.raises(RuntimeError, match="must end in the hidden size 64"):
        lk.mod.fused_residual_gated_rms_norm(x, x, rand((2, 32), torch.float32, lk.device))


# ---- adaln --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 5, 64), (3, 4, 130), (2, 9, 2048), (1, 3, 20000)])
@pytest.mark.parametrize("norm", ["rms", "layer"])
@pytest.mark.parametrize("with_weight", [True, False])
def test_adaln_matches_reference(lk, dtype, shape, norm, with_weight):
    # An offset mean checks the centered variance of the layer norm.
    x = rand(shape, dtype, lk.device, scale=2.0, offset=3.0)
    w = rand(shape[-1:], dtype, lk.device) if with_weight else None
    for scale in gate_forms(x).values():
        shift = rand(scale.shape, dtype, lk.device)
        out = lk.mod.adaln(x, scale, shift, w, 1e-6, norm)
        check(out, ref.adaln(x, scale, shift, w, 1e-6, norm), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_adaln_reads_ltx_unbind_views_in_place(lk, dtype):
    # LTX-Video: ada = table[None, None] + temb.reshape(B, 1, 6, H); shift, scale, ... = ada.unbind(2)
    b, s, h = 2, 7, 256
    ada = rand((b, 1, 6, h), dtype, lk.device)
    shift, scale = ada.unbind(dim=2)[:2]
    assert not scale.is_contiguous()
    x = rand((b, s, h), dtype, lk.device)
    out = poisoned(x)
    lk.mod.adaln(x, scale, shift, None, 1e-6, "rms", out=out)
    check(out, ref.adaln(x, scale, shift, None, 1e-6, "rms"), dtype)


def test_adaln_rejects_unknown_norm(lk):
    x = rand((2, 64), torch.float32, lk.device)
    with pytest.raises(RuntimeError, match='norm must be "rms" or "layer"'):
        lk.mod.adaln(x, x, x, None, 1e-6, "group")


@pytest.mark.parametrize("shape", EMPTY_SHAPES)
def test_fused_norms_of_empty_tensors_are_empty(lk, shape):
    x = torch.empty(shape, dtype=torch.float16, device=lk.device)
    c = torch.empty(shape, dtype=torch.float16, device=lk.device)
    assert lk.mod.adaln(x, c, c, None, 1e-6, "layer").shape == x.shape
    assert lk.mod.fused_residual_gated_rms_norm(x, c, c).shape == x.shape


# ---- rope_3d --------------------------------------------------------------------------------


def tables(shape, dtype, device):
    ang = torch.rand(shape, device=device) * 6.3
    return ang.cos().to(dtype), ang.sin().to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "x_shape,table_shape",
    [
        ((2, 12, 4, 64), (12, 64)),  # 1-D / per-head table shared by batch and heads
        ((2, 12, 4, 64), (2, 12, 64)),
        ((2, 12, 4, 64), (1, 12, 1, 64)),
        ((2, 12, 4, 64), (2, 12, 256)),  # LTX's full-width table over [B, S, heads, D]
        ((2, 30, 96), (2, 30, 96)),  # LTX layout [B, S, heads*D]
        ((1, 7, 3, 6), (7, 6)),  # head_dim not a multiple of the vector width
    ],
)
@pytest.mark.parametrize("table_dtype", ["float32", "same"])
def test_rope_3d_matches_reference(lk, dtype, x_shape, table_shape, table_dtype):
    x = rand(x_shape, dtype, lk.device)
    cos, sin = tables(table_shape, torch.float32 if table_dtype == "float32" else dtype, lk.device)
    out = poisoned(x)
    lk.mod.rope_3d(x, cos, sin, out=out)
    check(out, ref.rope(x, cos, sin), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rope_3d_reads_strided_q_from_fused_qkv(lk, dtype):
    b, s, heads, hd = 2, 10, 4, 64
    qkv = rand((b, s, 3, heads, hd), dtype, lk.device)
    q = qkv[:, :, 0]
    cos, sin = tables((s, hd), torch.float32, lk.device)
    check(lk.mod.rope_3d(q, cos, sin), ref.rope(q, cos, sin), dtype)
    swapped = rand((b, s, hd, heads), dtype, lk.device).transpose(2, 3)  # heads not mergeable
    check(lk.mod.rope_3d(swapped, cos, sin), ref.rope(swapped, cos, sin), dtype)


def test_rope_3d_rejects_mismatched_tables(lk):
    x = rand((2, 12, 4, 64), torch.float32, lk.device)
    cos, sin = tables((12, 32), torch.float32, lk.device)
    with pytest.raises(RuntimeError, match="do not fit x"):
        lk.mod.rope_3d(x, cos, sin)
    with pytest.raises(RuntimeError, match="head_dim must be even"):
        lk.mod.rope_3d(rand((1, 3, 5), torch.float32, lk.device), *tables((3, 5), torch.float32, lk.device))


def test_rope_3d_of_empty_sequence_is_empty(lk):
    x = torch.empty((2, 0, 4, 64), device=lk.device)
    cos, sin = tables((0, 64), torch.float32, lk.device)
    assert lk.mod.rope_3d(x, cos, sin).shape == x.shape


# ---- activations ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 9, 64), (4, 1000, 257), (2, 4096, 1024)])
def test_gelu_tanh_matches_reference(lk, dtype, shape):
    x = rand(shape, dtype, lk.device, scale=3.0)
    out = poisoned(x)
    lk.mod.gelu_tanh(x, out=out)
    check(out, ref.gelu_tanh(x), dtype)
    check(lk.mod.gelu_tanh(x[..., ::2]), ref.gelu_tanh(x[..., ::2]), dtype)  # non-contiguous


@pytest.mark.parametrize("dtype", DTYPES)
# d = 8200: rows of more than one 1024-vector block chunk, the last one partial (cuda row kernel)
@pytest.mark.parametrize("shape", [(3, 2), (5, 66), (2, 9, 128), (3, 7, 2 * 1001), (2, 512, 2 * 4096), (3, 5, 2 * 8200)])
def test_geglu_matches_reference(lk, dtype, shape):
    x = rand(shape, dtype, lk.device, scale=3.0)
    out = poisoned(x, (*shape[:-1], shape[-1] // 2))
    lk.mod.geglu(x, out=out)
    check(out, ref.geglu(x), dtype)
    wide = rand((*shape[:-1], shape[-1] + 16), dtype, lk.device)[..., 16:]  # strided rows
    check(lk.mod.geglu(wide), ref.geglu(wide), dtype)


def test_activations_of_empty_tensors_are_empty(lk):
    x = torch.empty((0, 64), dtype=torch.bfloat16, device=lk.device)
    assert lk.mod.gelu_tanh(x).shape == (0, 64)
    assert lk.mod.geglu(x).shape == (0, 32)


def test_geglu_rejects_odd_width(lk):
    with pytest.raises(RuntimeError, match="must be even"):
        lk.mod.geglu(rand((2, 5), torch.float32, lk.device))
