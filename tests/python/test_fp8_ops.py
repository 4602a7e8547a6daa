"""Row-wise FP8 quantization (quantize_fp8, residual_adaln_fp8) against torch's own arithmetic
(``fp8.quantize_rows``: amax, clamp, float32 division, cast to float8_e4m3fn), bit for bit,
every dtype, the vector and scalar paths, strided rows, zero and NaN rows."""

from __future__ import annotations

import pytest
import torch

from reference import DTYPES
from test_block_ops import residual_operands
from test_ops import rand

# Row widths: one vector per thread and up (64 .. 8192: LTX's 2048 and its feed-forward's 8192),
# widths that are not a multiple of the 16-byte vector (1001) and rows wider than the vector
# paths hold in registers (20000): the scalar kernel.
SHAPES = [(3, 8), (2, 5, 64), (2, 7, 2048), (3, 8192), (1, 3, 1001), (2, 20000)]


def torch_quantize(lk, x):
    return lk.mod.fp8.quantize_rows(x)


def assert_same_fp8(got, expected):
    (gv, gs), (ev, es) = got, expected
    assert gv.dtype == torch.float8_e4m3fn and gs.dtype == torch.float32
    assert gv.shape == ev.shape and gs.shape == es.shape
    torch.testing.assert_close(gs, es, rtol=0, atol=0, equal_nan=True)
    mismatch = (gv.view(torch.uint8) != ev.view(torch.uint8)).sum().item()
    assert mismatch == 0, f"{mismatch} of {gv.numel()} e4m3 values differ"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_quantize_fp8_is_torch_row_quantization_bit_for_bit(lk, dtype, shape):
    x = rand(shape, dtype, lk.device, scale=3.0, offset=0.2)
    x[..., 0, :] = 0  # a zero row: the scale's 1e-12 floor
    assert_same_fp8(lk.mod.quantize_fp8(x), torch_quantize(lk, x))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_quantize_fp8_with_gelu_quantizes_the_gelu_tanh_op_output(lk, dtype, shape):
    x = rand(shape, dtype, lk.device, scale=3.0)
    assert_same_fp8(lk.mod.quantize_fp8(x, gelu=True), torch_quantize(lk, lk.mod.gelu_tanh(x)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_quantize_fp8_reads_strided_rows_and_propagates_nan(lk, dtype):
    wide = rand((3, 4, 3 * 512), dtype, lk.device)
    sliced = wide[..., 512:1024]  # rows 1536 apart, 16-byte aligned
    misaligned = wide[..., 3:515]  # the scalar path
    for x in (sliced, misaligned):
        assert_same_fp8(lk.mod.quantize_fp8(x), torch_quantize(lk, x))
    x = rand((4, 256), dtype, lk.device)
    x[1, 7] = float("nan")
    got, expected = lk.mod.quantize_fp8(x), torch_quantize(lk, x)
    assert torch.isnan(got[1][1]).all()
    assert_same_fp8(got, expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 8), (2, 7, 2048), (1, 3, 1001), (1, 2, 12288), (1, 2, 80000)])
@pytest.mark.parametrize("with_gate", [True, False])
def test_residual_adaln_fp8_is_residual_adaln_then_row_quantization(lk, dtype, shape, with_gate):
    h, y, gate, scale, shift, w = residual_operands(shape, dtype, lk.device, with_gate)
    got_h, *got_q = lk.mod.residual_adaln_fp8(h, y, gate, scale, shift, w, 1e-6)
    exp_h, exp_n = lk.mod.residual_adaln(h, y, gate, scale, shift, w, 1e-6)
    torch.testing.assert_close(got_h, exp_h, rtol=0, atol=0)
    assert_same_fp8(got_q, torch_quantize(lk, exp_n))


def test_fp8_quantization_of_a_bf16_activation_stays_within_e4m3_precision(lk):
    """Dequantized values are within e4m3's rounding (3 mantissa bits: 1/16 relative) of the
    input, or of its scale's subnormal step near zero."""
    x = rand((8, 2048), torch.bfloat16, lk.device, scale=4.0)
    values, scale = lk.mod.quantize_fp8(x)
    back = values.float() * scale
    step = torch.maximum(x.float().abs() / 16, scale * 2.0**-9)
    assert ((back - x.float()).abs() <= step).all()
