"""torch.compile(fullgraph=True) traces every op (fake impls, no graph break) and the compiled
graph computes what eager does. CPU uses the aot_eager backend (FakeTensor tracing and
functionalization without a C++ toolchain per graph); CUDA uses inductor."""

from __future__ import annotations

import pytest
import torch

from reference import TOL


def compiled(fn, backend):
    torch._dynamo.reset()
    return torch.compile(fn, fullgraph=True, backend="inductor" if backend == "cuda" else "aot_eager")


def cases(m, dev):
    dt = torch.bfloat16
    x = torch.randn(2, 16, 256, device=dev, dtype=dt)
    res = torch.randn_like(x)
    gate = torch.randn(2, 256, device=dev, dtype=dt)
    w = torch.randn(256, device=dev, dtype=dt)
    q = torch.randn(2, 16, 4, 64, device=dev, dtype=dt)
    cos, sin = torch.randn(16, 64, device=dev), torch.randn(16, 64, device=dev)
    cos_w, sin_w = torch.randn(1, 16, 256, device=dev), torch.randn(1, 16, 256, device=dev)
    lin_w = torch.randn(128, 256, device=dev, dtype=dt) * 0.06
    freqs = torch.rand(256 // 6, device=dev) * 100
    axes = [torch.rand(n, device=dev) * 2 - 1 for n in (2, 2, 4)]  # 16 tokens
    return {
        "rms_norm": (lambda a, b: m.rms_norm(a, b, 1e-6) * 2, (x, w)),
        "rms_norm_no_weight": (lambda a: m.rms_norm(a) + 1, (x,)),
        "fused_residual_gated_rms_norm": (
            lambda a, r, g, b: m.fused_residual_gated_rms_norm(a, r, g, b, 1e-5),
            (x, res, gate, w),
        ),
        "adaln_rms": (lambda a, s, t: m.adaln(a, s, t, None, 1e-6, "rms"), (x, gate, gate)),
        "adaln_layer": (lambda a, s, t, b: m.adaln(a, s, t, b, 1e-6, "layer"), (x, gate, gate, w)),
        "rope_3d": (lambda a, c, s: m.rope_3d(a, c, s), (q, cos, sin)),
        "geglu": (lambda a: m.geglu(a) * 3, (x,)),
        "gelu_tanh": (lambda a: m.gelu_tanh(a), (x,)),
        "rms_norm_out": (lambda a, b: m.rms_norm(a, b, out=torch.empty_like(a)), (x, w)),
        "gelu_tanh_out": (lambda a: m.gelu_tanh(a, out=torch.empty_like(a)) + 1, (x,)),
        "qk_norm_rope": (
            lambda a, b, c, s: torch.cat(m.qk_norm_rope(a, b * 2, None, w, c, s, 1e-5), -1),
            (x, res, cos_w, sin_w),
        ),
        "qk_norm_rope_grid": (
            lambda a, b, f, t, h, v: torch.cat(m.qk_norm_rope_grid(a, b * 2, w, None, f, (t, h, v), 1e-5), -1),
            (x, res, freqs, *axes),
        ),
        "gated_residual": (lambda a, r, g: m.gated_residual(a, r, g) * 2, (x, res, gate)),
        "residual_adaln": (
            lambda a, r, s, t: torch.cat(m.residual_adaln(a, r, None, s, t, w, 1e-6), -1),
            (x, res, gate, gate),
        ),
        "residual_adaln_fp8": (
            lambda a, r, s, t: dequantized(*m.residual_adaln_fp8(a, r, None, s, t, w, 1e-6)),
            (x, res, gate, gate),
        ),
        "quantize_fp8": (lambda a: dequantized(a, *m.quantize_fp8(a * 2, gelu=True)), (x,)),
        "linear_gelu_tanh": (lambda a, b: m.linear_gelu_tanh(a, b, w[:128]) + 1, (x, lin_w)),
        "materialize": (lambda c: m.materialize(c.repeat_interleave(2, -1)) * 2, (cos,)),
    }


def dequantized(h, values, scale):
    """h beside the FP8 rows' values times their scales (comparable with assert_close)."""
    return torch.cat([h.float(), values.float() * scale], -1)


@pytest.mark.parametrize(
    "name",
    [
        "rms_norm",
        "rms_norm_no_weight",
        "fused_residual_gated_rms_norm",
        "adaln_rms",
        "adaln_layer",
        "rope_3d",
        "geglu",
        "gelu_tanh",
        "rms_norm_out",
        "gelu_tanh_out",
        "qk_norm_rope",
        "qk_norm_rope_grid",
        "gated_residual",
        "residual_adaln",
        "residual_adaln_fp8",
        "quantize_fp8",
        "linear_gelu_tanh",
        "materialize",
    ],
)
def test_op_compiles_fullgraph_and_matches_eager(lk, name):
    fn, args = cases(lk.mod, lk.device)[name]
    expected = fn(*args)
    got = compiled(fn, lk.backend)(*args)
    torch.testing.assert_close(got, expected, **TOL[torch.bfloat16])


def test_compiled_graph_calls_the_custom_op(lk):
    """The op stays one node in the graph (not decomposed or skipped)."""
    seen = []

    def backend(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    x = torch.randn(4, 64, device=lk.device)
    torch._dynamo.reset()
    torch.compile(lambda a: lk.mod.rms_norm(a) * 2, fullgraph=True, backend=backend)(x)
    assert any("rms_norm" in s for s in seen), seen
