"""The diffusers helper on a tiny LTX-Video transformer (random weights, no download), and
the RoPE convention against diffusers' own LTX code."""

from __future__ import annotations

import copy
import re

import pytest
import torch

diffusers = pytest.importorskip("diffusers")
from diffusers.models.normalization import RMSNorm  # noqa: E402
from diffusers.models.transformers.transformer_ltx import (  # noqa: E402
    LTXVideoRotaryPosEmbed,
    LTXVideoTransformer3DModel,
    apply_rotary_emb,
)


def tiny_ltx(device, dtype):
    torch.manual_seed(0)
    model = LTXVideoTransformer3DModel(
        in_channels=8,
        out_channels=8,
        num_attention_heads=4,
        attention_head_dim=32,
        cross_attention_dim=128,
        num_layers=2,
        caption_channels=32,
        qk_norm="rms_norm_across_heads",
    )
    return model.to(device=device, dtype=dtype).eval()


def ltx_inputs(device, dtype, frames=2, height=4, width=6, batch=2):
    g = torch.Generator().manual_seed(1)
    s = frames * height * width
    return dict(
        hidden_states=torch.randn(batch, s, 8, generator=g).to(device, dtype),
        encoder_hidden_states=torch.randn(batch, 7, 32, generator=g).to(device, dtype),
        timestep=torch.tensor([10.0, 500.0][:batch]).to(device),
        encoder_attention_mask=torch.ones(batch, 7).to(device),
        num_frames=frames,
        height=height,
        width=width,
        rope_interpolation_scale=(1.0 / 25 * 8, 32.0, 32.0),
        return_dict=False,
    )


def rel_err(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_module_patch_of_tiny_ltx_transformer_matches_unpatched(lk, dtype):
    base = tiny_ltx(lk.device, dtype)
    patched = copy.deepcopy(base)
    counts = lk.mod.patch_transformer(patched, blocks=False)
    # Per block: norm1, norm2 and attn1/attn2 QK norms (6 RMSNorms, weight None for norm1/2)
    # and the feed-forward's diffusers GELU(approximate="tanh"); plus the caption projection's
    # torch.nn.GELU(approximate="tanh").
    assert counts == {"RMSNorm": 2 * 6, "GELU": 2 + 1}, counts
    inputs = ltx_inputs(lk.device, dtype)
    with torch.no_grad():
        expected = base(**inputs)[0]
        got = patched(**inputs)[0]
    assert got.shape == expected.shape and got.dtype == expected.dtype
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    assert rel_err(got, expected) < tol


PIECE_SETS = [
    None,
    ["adaln"],
    ["qkv"],
    ["qk_norm_rope"],
    ["residual"],
    ["gelu_linear"],
    ["attention"],
    ["adaln", "residual"],
    ["chain"],
    ["qk_norm_rope", "rope_grid"],
    ["rope_grid"],  # without qk_norm_rope: tables, the transformer's forward is left alone
]


def model_patched(pieces):
    return pieces is None or "chain" in pieces or {"rope_grid", "qk_norm_rope"} <= set(pieces)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("pieces", PIECE_SETS, ids=lambda p: "all" if p is None else "+".join(p))
def test_block_patch_of_tiny_ltx_transformer_matches_unpatched(lk, dtype, pieces):
    base = tiny_ltx(lk.device, dtype)
    patched = copy.deepcopy(base)
    counts = lk.mod.patch_transformer(patched, pieces=pieces)
    assert counts == {
        "RMSNorm": 12,
        "GELU": 3,
        "LTXVideoTransformerBlock": 2,
        "LTXVideoRotaryPosEmbed": 1,
        "MochiTransformerBlock": 0,
        "LTXVideoTransformer3DModel": int(model_patched(pieces)),
    }, counts
    inputs = ltx_inputs(lk.device, dtype)
    with torch.no_grad():
        expected = base(**inputs)[0]
        got = patched(**inputs)[0]
    assert got.shape == expected.shape and got.dtype == expected.dtype
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    assert rel_err(got, expected) < tol


def test_block_patch_keeps_parameters_and_state_dict(lk):
    model = tiny_ltx(lk.device, torch.float32)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    names = [n for n, _ in model.named_parameters()]
    lk.mod.patch_transformer(model)
    after = model.state_dict()
    assert [n for n, _ in model.named_parameters()] == names
    assert after.keys() == before.keys()
    for key, value in before.items():
        torch.testing.assert_close(after[key], value, rtol=0, atol=0)
    attn = model.transformer_blocks[0].attn1
    # to_q/to_k/to_v are views of the fused weight: a write to one reaches the fused GEMM.
    with torch.no_grad():
        attn.to_k.weight.add_(1.0)
    n = attn.to_q.weight.shape[0]
    torch.testing.assert_close(attn._ltx_qkv_weight[n : 2 * n], attn.to_k.weight, rtol=0, atol=0)


def test_block_patch_rejects_unknown_pieces(lk):
    with pytest.raises(ValueError, match="unknown pieces"):
        lk.mod.patch_transformer(tiny_ltx(lk.device, torch.float32), pieces=["qkv", "flash"])


@pytest.mark.parametrize("chained", [False, True], ids=["alone", "chained"])
def test_patched_ltx_block_compiles_fullgraph_and_matches_eager(lk, chained):
    """One patched block under torch.compile(fullgraph=True): every op traces through its fake
    implementation (no graph break) and the compiled block computes what the eager one does;
    chained, as the patched transformer calls it (norm1 given, the next block's norm1 computed,
    RoPE from the grid)."""
    model = tiny_ltx(lk.device, torch.float32)
    lk.mod.patch_transformer(model)
    block = model.transformer_blocks[0]
    g = torch.Generator().manual_seed(3)
    b, s, dim = 2, 12, 128
    hidden = torch.randn(b, s, dim, generator=g).to(lk.device)
    enc = torch.randn(b, 7, dim, generator=g).to(lk.device)
    temb = torch.randn(b, 1, 6 * dim, generator=g).to(lk.device)
    cos, sin = lk.mod.rope_3d_tables(1, 3, 4, dim, batch_size=1, device=lk.device)
    rotary = (cos.expand(b, -1, -1), sin.expand(b, -1, -1))
    mask = torch.zeros(b, 1, 7, device=lk.device)
    args = (hidden, enc, temb, rotary, mask)
    kwargs = {}
    if chained:
        freqs, axes = lk.mod.ltx_model.ltx_rope_grid(model.rope, 1, 3, 4, None, lk.device)
        nxt = model.transformer_blocks[1]
        shift, scale = lk.mod.blocks._ltx_modulation(nxt, temb)[:2]
        norm1 = torch.randn(b, s, dim, generator=g).to(lk.device)
        kwargs = dict(ltx_norm1=norm1, ltx_next=(scale, shift, nxt.norm1.weight, 1e-6, False), ltx_rope_grid=(freqs, axes))
    with torch.no_grad():
        expected = block(*args, **kwargs)
        torch._dynamo.reset()
        backend = "inductor" if lk.backend == "cuda" else "aot_eager"
        got = torch.compile(block, fullgraph=True, backend=backend)(*args, **kwargs)
    assert isinstance(got, tuple) == chained
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


def test_patch_handles_rms_norm_without_weight_and_both_eps_names(lk):
    plain = RMSNorm(64, eps=1e-6, elementwise_affine=False).to(lk.device)
    assert plain.weight is None
    x = torch.randn(3, 64, device=lk.device)
    expected = plain(x)
    lk.mod.patch_transformer(plain)
    torch.testing.assert_close(plain(x), expected, atol=5e-5, rtol=5e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("dim", [2048, 2 * 3 * 16 + 4])
def test_qk_norm_rope_grid_matches_ltx_rotary_pos_embed_tables(lk, dtype, dim):
    """The grid op against the table op fed LTXVideoRotaryPosEmbed's own tables, at LTX's
    interpolation scale (frame coordinates 8 / 25 / 20 apart) and at none (raw indices)."""
    frames, height, width = 3, 4, 5
    emb = LTXVideoRotaryPosEmbed(dim=dim)
    g = torch.Generator().manual_seed(4)
    s = frames * height * width
    q = torch.randn(2, s, dim, generator=g).to(lk.device, dtype)
    k = torch.randn(2, s, dim, generator=g).to(lk.device, dtype)
    wq = torch.randn(dim, generator=g).to(lk.device, dtype)
    for interp in [(1.0 / 25 * 8, 32.0, 32.0), None]:
        cos, sin = emb(q, frames, height, width, rope_interpolation_scale=interp)
        expected = lk.mod.qk_norm_rope(q, k, wq, None, cos, sin, 1e-6)
        freqs, axes = lk.mod.ltx_model.ltx_rope_grid(emb, frames, height, width, interp, lk.device)
        got = lk.mod.qk_norm_rope_grid(q, k, wq, None, freqs, axes, 1e-6)
        # Same float32 angles: cos/sin differ by an ulp at most (libm vs torch's vectorized cos).
        tol = dict(atol=2e-5, rtol=2e-5) if dtype == torch.float32 else dict(atol=1.6e-2, rtol=1.6e-2)
        torch.testing.assert_close(got, expected, **tol)


def test_chained_transformer_falls_back_for_what_it_does_not_reproduce(lk):
    """attention_kwargs, a hooked block and gradient checkpointing take the original forward,
    which still matches the unpatched model."""
    base = tiny_ltx(lk.device, torch.float32)
    patched = copy.deepcopy(base)
    lk.mod.patch_transformer(patched)
    inputs = ltx_inputs(lk.device, torch.float32)
    with torch.no_grad():
        expected = base(**inputs)[0]
        assert rel_err(patched(**inputs, attention_kwargs={})[0], expected) < 1e-5
        seen = []
        handle = patched.transformer_blocks[1].register_forward_hook(lambda m, a, out: seen.append(out))
        assert rel_err(patched(**inputs)[0], expected) < 1e-5
        handle.remove()
    assert len(seen) == 1 and torch.is_tensor(seen[0])  # the hook saw a plain block output
    patched.enable_gradient_checkpointing()
    patched.train()
    out = patched(**inputs)[0]
    assert rel_err(out.detach(), expected) < 1e-5


def test_rope_3d_tables_match_ltx_rotary_pos_embed(lk):
    frames, height, width, dim = 3, 4, 5, 2 * 3 * 16 + 4  # dim % 6 != 0: unrotated channels
    interp = (1.0 / 25 * 8, 32.0, 32.0)
    emb = LTXVideoRotaryPosEmbed(dim=dim)
    hidden = torch.zeros(2, frames * height * width, dim)
    cos_ref, sin_ref = emb(hidden, frames, height, width, rope_interpolation_scale=interp)
    scale = (interp[0] / 20, interp[1] / 2048, interp[2] / 2048)
    cos, sin = lk.mod.rope_3d_tables(frames, height, width, dim, batch_size=2, scale=scale)
    torch.testing.assert_close(cos, cos_ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(sin, sin_ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rope_3d_matches_diffusers_ltx_apply_rotary_emb(lk, dtype):
    frames, height, width, heads, head_dim = 2, 4, 4, 4, 32
    cos, sin = lk.mod.rope_3d_tables(frames, height, width, heads * head_dim, batch_size=2, device=lk.device)
    q = torch.randn(2, frames * height * width, heads * head_dim, device=lk.device).to(dtype)
    expected = apply_rotary_emb(q, (cos, sin))
    got = lk.mod.rope_3d(q, cos, sin)
    tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=1.6e-2, rtol=1.6e-2)
    torch.testing.assert_close(got, expected, **tol)
    got4 = lk.mod.rope_3d(q.unflatten(-1, (heads, head_dim)), cos, sin)
    torch.testing.assert_close(got4.flatten(-2), expected, **tol)


def recording(seen: list):
    """A torch.compile backend that runs nothing compiled: it appends the target of every
    function call dynamo put into the graph to ``seen``."""

    def backend(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    return backend


def test_patched_ltx_block_graph_holds_the_fused_ops(lk):
    seen = []
    backend = recording(seen)
    model = tiny_ltx(lk.device, torch.float32)
    lk.mod.patch_transformer(model)
    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(model, fullgraph=True, backend=backend)(**ltx_inputs(lk.device, torch.float32))
    def calls(op):
        return sum(re.search(rf"[.:]{op}(\.|$)", s) is not None for s in seen)

    # Two blocks chained: block 0's norm1 is an adaln; its feed-forward residual is a
    # residual_adaln with block 1's norm1 (next to each block's h + attn2 one); block 1's is a
    # gated_residual after its attention's; RoPE from the grid, no tables.
    assert calls("adaln") == 1 and calls("residual_adaln") == 3 and calls("gated_residual") == 3, sorted(set(seen))
    assert calls("qk_norm_rope_grid") == 2 and calls("qk_norm_rope") == 0, sorted(set(seen))
    assert calls("linear_gelu_tanh") == 2


def hopper(lk) -> bool:
    return lk.backend == "cuda" and torch.cuda.get_device_capability()[0] == 9


@pytest.mark.parametrize("pieces", [None, ["qkv", "adaln"]], ids=["all", "without-attention"])
def test_self_attention_runs_cudnn_on_hopper_only_and_matches_the_default(lk, pieces):
    """The ``attention`` piece: each block's self-attention is cuDNN's fused kernel in the
    traced graph on a Hopper GPU in bf16, torch's default SDPA anywhere else or without the
    piece, and the output is the unpatched model's either way."""
    seen = []
    backend = recording(seen)
    base = tiny_ltx(lk.device, torch.bfloat16)
    model = copy.deepcopy(base)
    lk.mod.patch_transformer(model, pieces=pieces)
    inputs = ltx_inputs(lk.device, torch.bfloat16)
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(model, fullgraph=True, backend=backend)(**inputs)[0]
        expected = base(**inputs)[0]
    cudnn = sum("_scaled_dot_product_cudnn_attention" in s for s in seen)
    assert cudnn == (2 if pieces is None and hopper(lk) else 0), sorted(set(seen))
    assert rel_err(got, expected) < 2e-2


def tiny_mochi(device, dtype):
    from diffusers import MochiTransformer3DModel

    torch.manual_seed(0)
    model = MochiTransformer3DModel(
        patch_size=2,
        num_attention_heads=2,
        attention_head_dim=16,
        num_layers=2,
        pooled_projection_dim=16,
        in_channels=4,
        text_embed_dim=32,
        time_embed_dim=8,
        max_sequence_length=8,
    )
    return model.to(device=device, dtype=dtype).eval()


MOCHI_MASKS = {"padded": [[1] * 8, [1] * 5 + [0] * 3], "full": [[1] * 8, [1] * 8], "holes": [[0, 1] * 4, [1] * 8]}


def mochi_inputs(device, dtype, mask="padded"):
    g = torch.Generator().manual_seed(2)
    return dict(
        hidden_states=torch.randn(2, 4, 3, 8, 8, generator=g).to(device, dtype),
        encoder_hidden_states=torch.randn(2, 8, 32, generator=g).to(device, dtype),
        timestep=torch.tensor([10, 500]).to(device),
        encoder_attention_mask=torch.tensor(MOCHI_MASKS[mask]).to(device),
        return_dict=False,
    )


@pytest.mark.parametrize("mask", sorted(MOCHI_MASKS))
@pytest.mark.parametrize("pieces", [None, ["adaln"]], ids=["all", "norms-only"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_block_patch_of_tiny_mochi_transformer_matches_unpatched(lk, dtype, pieces, mask):
    """Every text mask diffusers handles (all kept: one batched attention; some padded; holes
    in the middle) gives the unpatched model's output, with the joint attention op and fused
    projections (all pieces) and without them."""
    base = tiny_mochi(lk.device, dtype)
    patched = copy.deepcopy(base)
    counts = lk.mod.patch_transformer(patched, pieces=pieces)
    assert counts["MochiTransformerBlock"] == 2, counts
    joint = [b._ltx_joint for b in patched.transformer_blocks]
    assert joint == [pieces is None] * 2
    inputs = mochi_inputs(lk.device, dtype, mask)
    with torch.no_grad():
        expected = base(**inputs)[0]
        got = patched(**inputs)[0]
    assert got.shape == expected.shape
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    assert rel_err(got, expected) < tol


def test_patched_mochi_block_compiles_into_one_graph(lk):
    """diffusers' Mochi attention breaks the compiled graph at each sample's torch.nonzero;
    the patched block (joint_attention op) traces with fullgraph=True and computes what the
    eager block does, for a padded mask too."""
    model = tiny_mochi(lk.device, torch.float32)
    lk.mod.patch_transformer(model)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    inputs = mochi_inputs(lk.device, torch.float32)
    torch._dynamo.reset()
    with torch.no_grad():
        expected = model(**inputs)[0]
        for block in model.transformer_blocks:
            block.compile(fullgraph=True, backend=backend)
        got = model(**inputs)[0]
    assert len(graphs) == 2  # one per block
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)



@pytest.mark.parametrize(
    "dtype, pieces, message",
    [
        (torch.bfloat16, {"fp8"}, "needs the qkv piece"),
        (torch.float32, None, "bfloat16 or float16 weights; the model's are torch.float32"),
    ],
    ids=["without-qkv", "float32"],
)
def test_fp8_piece_refuses_what_it_cannot_run_before_patching_anything(lk, dtype, pieces, message):
    model = tiny_ltx(lk.device, dtype)
    pieces = pieces or lk.mod.blocks.LTX_PIECES | {"fp8"}
    with pytest.raises(ValueError, match=message):
        lk.mod.patch_transformer(model, pieces=pieces)
    assert not [m for m in model.modules() if "forward" in m.__dict__]


def test_fp8_piece_runs_the_token_wide_projections_in_fp8_and_can_be_taken_back(lk):
    """The optional fp8 piece on a GPU with FP8 tensor cores: six scaled FP8 matrix products
    per block in the traced graph (fused q/k/v, self-attention output, cross-attention query
    and output, feed-forward up and down), their activations quantized by the kernels' ops
    (norm2 and the chained norm1 by residual_adaln_fp8, the rest by quantize_fp8, the
    feed-forward's GELU inside it), an output near the unpatched model's (FP8 rounding) that the
    compiled model reproduces, and patching again without it restores the bf16 projections
    exactly. Anywhere else patching with it is refused, saying why."""
    if lk.backend == "cpu" or torch.cuda.get_device_capability() < (8, 9):
        model = tiny_ltx(lk.device, torch.bfloat16)
        with pytest.raises(ValueError, match="FP8 tensor cores"):
            lk.mod.patch_transformer(model, pieces=lk.mod.blocks.LTX_PIECES | {"fp8"})
        assert not [m for m in model.modules() if "forward" in m.__dict__]  # nothing patched
        return
    base = tiny_ltx(lk.device, torch.bfloat16)
    model = copy.deepcopy(base)
    lk.mod.patch_transformer(model)
    inputs = ltx_inputs(lk.device, torch.bfloat16)
    with torch.no_grad():
        expected, bf16 = base(**inputs)[0], model(**inputs)[0]
    lk.mod.patch_transformer(model, pieces=lk.mod.blocks.LTX_PIECES | {"fp8"})
    seen = []
    backend = recording(seen)
    torch._dynamo.reset()
    with torch.no_grad():
        got = model(**inputs)[0]
        torch.compile(model, fullgraph=True, backend=backend)(**inputs)
        torch._dynamo.reset()
        compiled = torch.compile(model, fullgraph=True)(**inputs)[0]
    assert sum("_scaled_mm" in s for s in seen) == 6 * 2, sorted(set(seen))
    # Two blocks: norm2 of each and block 1's norm1 (chained from block 0); quantize_fp8 for
    # block 0's q/k/v (its norm1 is adaln's) and four per block (attention output,
    # cross-attention query and output, GELU of the up projection).
    assert sum("residual_adaln_fp8" in s for s in seen) == 3, sorted(set(seen))
    assert sum("quantize_fp8" in s for s in seen) == 1 + 4 * 2, sorted(set(seen))
    assert 1e-3 < rel_err(got, expected) < 0.1
    assert rel_err(compiled, got) < 2e-2
    lk.mod.patch_transformer(model)
    with torch.no_grad():
        again = model(**inputs)[0]
    torch.testing.assert_close(again, bf16, rtol=0, atol=0)


def test_fp8_piece_without_the_fused_residual_norms_quantizes_the_bf16_norm(lk):
    """Without the residual piece (norm2 and the chained norm1 in bf16), each FP8 product
    quantizes its input with quantize_fp8: still six FP8 products per block, no
    residual_adaln_fp8, an output as near the unpatched model's as with every piece."""
    if lk.backend == "cpu" or torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("needs FP8 tensor cores (the refusal elsewhere is tested above)")
    base = tiny_ltx(lk.device, torch.bfloat16)
    model = copy.deepcopy(base)
    lk.mod.patch_transformer(model, pieces=(lk.mod.blocks.LTX_PIECES - {"residual"}) | {"fp8"})
    inputs = ltx_inputs(lk.device, torch.bfloat16)
    seen = []
    torch._dynamo.reset()
    with torch.no_grad():
        expected, got = base(**inputs)[0], model(**inputs)[0]
        torch.compile(model, fullgraph=True, backend=recording(seen))(**inputs)
    assert sum("_scaled_mm" in s for s in seen) == 6 * 2, sorted(set(seen))
    assert not any("residual_adaln_fp8" in s for s in seen), sorted(set(seen))
    assert 1e-3 < rel_err(got, expected) < 0.1
