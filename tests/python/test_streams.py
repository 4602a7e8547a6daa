"""The CUDA ops launch on torch's current stream (the binding passes it to the kernels): on a side
stream, an op sees the inputs that earlier work on that stream wrote, and its result equals the
same op run on the default stream."""

from __future__ import annotations

import pytest
import torch

# One op per launcher (norm, AdaLN, rope, activation, qk_norm_rope, residual); gelu_tanh on a
# misaligned range takes the scalar kernel, whose grid size queries the SM count.
OPS = {
    "rms_norm": lambda m, x: m.rms_norm(x),
    "adaln_layer": lambda m, x: m.adaln(x, x[:, :1], x[:, 1:2], norm="layer"),
    "rope_3d": lambda m, x: m.rope_3d(x, x[0], x[1]),
    "gelu_tanh_misaligned": lambda m, x: m.gelu_tanh(x.flatten()[1:]),
    "geglu": lambda m, x: m.geglu(x),
    "qk_norm_rope": lambda m, x: m.qk_norm_rope(x, x.flip(0), None, None, x[0], x[1]),
    "residual_adaln": lambda m, x: m.residual_adaln(x, x.flip(0), x[:, :1], x[:, 1:2], x[:, 2:3]),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("op", list(OPS))
def test_ops_on_a_side_stream_read_what_that_stream_wrote_before_them(cuda_lk, op, dtype):
    src = torch.randn(2, 256, 512, device="cuda").to(dtype)
    expected = OPS[op](cuda_lk.mod, src)
    x = torch.zeros_like(src)
    side = torch.cuda.Stream()  # non-blocking: no implicit order with the default stream
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        # The copy runs only after the spin; an op launched on another stream reads the zeros.
        torch.cuda._sleep(100_000_000)
        x.copy_(src)
        got = OPS[op](cuda_lk.mod, x)
    side.synchronize()
    for g, e in zip(as_tuple(got), as_tuple(expected), strict=True):
        torch.testing.assert_close(g, e, rtol=0, atol=0)


def as_tuple(result):
    return result if isinstance(result, tuple) else (result,)
