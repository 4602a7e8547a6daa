#!/usr/bin/env python3
"""End-to-end benchmark (not a test): one denoising step of diffusers' full-size LTX-Video and
Mochi transformers (default configs, random weights, no download), bf16, CFG batch 2, in four
configurations: eager, eager + `patch_transformer`, `torch.compile`, `torch.compile` +
`patch_transformer`. Prints ms per step (median over forwards, CUDA events around each) and the
relative error of each output against eager's, ‖out − eager‖ / ‖eager‖ in float64.

    HF_HUB_OFFLINE=1 python bench/e2e.py [--models ltx,mochi] [--ops] [--json out.json]

`--ops` first times each fused piece of the LTX block on its own at the step's shapes (ours,
torch.compile of the code it replaces, eager), in interleaved rounds (`--ops-only chain,grid`:
the pieces whose names contain those words). `--without chain,rope_grid` adds a row:
compile + kernels without those pieces, on the same machine. `--cudagraphs` adds
`torch.compile(mode="reduce-overhead")` rows, with and without the kernels (and the fp8 row);
`--fp8` an LTX row with the optional FP8 projections (its relative error is the accuracy it
costs).

The model is built once on the GPU; configurations run in the order eager, compile, then (after
patching) eager + kernels, compile + kernels. Compilation is `torch.compile(model)` (`--compile
full`) or of each transformer block (`--compile regional`, diffusers' compile_repeated_blocks).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import re
import statistics
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch.nn.functional as F

# LTX-Video 0.9 at 49 frames 512x768: VAE compression 8 (time) x 32 (space) -> 7x16x24 latents.
LTX_LATENT = (7, 16, 24)
LTX_TEXT_TOKENS = 128
# Mochi at 7 frames 480x848: compression 6 (time) x 8 (space), patch 2 -> 2x30x53 tokens.
MOCHI_LATENT = (2, 60, 106)
MOCHI_TEXT_TOKENS = 256


def rel_err(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


# Kernel names by what they are, for the profile's "where the time goes" line (first match wins:
# inductor's kernels name the ops they fused, e.g. `triton_red_fused__scaled_mm_..._amax_...` is
# the quantization feeding a _scaled_mm, not a GEMM).
KINDS = (
    ("inductor", re.compile(r"^triton_")),
    ("GEMM", re.compile(r"nvjet|gemm|cutlass|xmma|f8f8", re.I)),
    ("attention", re.compile(r"cudnn|flash|fmha|sdpa|attention", re.I)),
    ("ltx_kernels", re.compile(r"ltx::")),
)


def kernel_kinds(events):
    """{kind: ms} of one profiled forward's device time (a profiler's key averages), in KINDS'
    order, then "other" and "total"."""
    sums = {kind: 0.0 for kind, _ in KINDS} | {"other": 0.0}
    for e in events:
        us = getattr(e, "self_device_time_total", None)
        if us is None:
            us = e.self_cuda_time_total
        if not us:
            continue
        kind = next((k for k, pattern in KINDS if pattern.search(e.key)), "other")
        sums[kind] += us / 1000
    sums["total"] = sum(sums.values())
    return sums


def time_forwards(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return times


# ---- models ---------------------------------------------------------------------------------


def ltx_model_and_inputs(batch):
    from diffusers import LTXVideoTransformer3DModel

    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LTXVideoTransformer3DModel()
    model = model.to(torch.bfloat16).eval()
    f, h, w = LTX_LATENT
    g = torch.Generator(device="cuda").manual_seed(1)
    inputs = dict(
        hidden_states=torch.randn(batch, f * h * w, 128, device="cuda", generator=g).bfloat16(),
        encoder_hidden_states=torch.randn(batch, LTX_TEXT_TOKENS, 4096, device="cuda", generator=g).bfloat16(),
        timestep=torch.tensor([500.0] * batch, device="cuda"),
        encoder_attention_mask=torch.ones(batch, LTX_TEXT_TOKENS, device="cuda", dtype=torch.bfloat16),
        num_frames=f,
        height=h,
        width=w,
        rope_interpolation_scale=(8 / 25, 32.0, 32.0),
        return_dict=False,
    )
    return model, inputs, model.transformer_blocks


def mochi_model_and_inputs(batch):
    from diffusers import MochiTransformer3DModel

    torch.manual_seed(0)
    # 10 B parameters: built in bf16 on the GPU directly (no float32 copy).
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = MochiTransformer3DModel()
    finally:
        torch.set_default_dtype(torch.float32)
    model = model.eval()
    f, h, w = MOCHI_LATENT
    g = torch.Generator(device="cuda").manual_seed(1)
    inputs = dict(
        hidden_states=torch.randn(batch, 12, f, h, w, device="cuda", generator=g).bfloat16(),
        encoder_hidden_states=torch.randn(batch, MOCHI_TEXT_TOKENS, 4096, device="cuda", generator=g).bfloat16(),
        timestep=torch.tensor([500.0] * batch, device="cuda"),
        encoder_attention_mask=torch.ones(batch, MOCHI_TEXT_TOKENS, device="cuda", dtype=torch.long),
        return_dict=False,
    )
    return model, inputs, model.transformer_blocks


MODELS = {"ltx": ltx_model_and_inputs, "mochi": mochi_model_and_inputs}


GRAPHS = "torch.compile (CUDA graphs)"


def compile_model(model, blocks, how, mode=None):
    torch._dynamo.reset()
    if how == "full":
        return torch.compile(model, mode=mode)
    for block in blocks:
        block.compile()
    return model


def fused_ops_in_graph(model, inputs):
    """{op: count} of the ltx_kernels ops dynamo puts into the graphs of one forward (a trace
    with a recording backend, nothing compiled): whether the transformer-level forward (chain,
    rope_grid) ran under torch.compile or fell back. An eager forward can take a path that a
    traced one does not (torch 2.11 once hid the patched blocks from it)."""
    seen: dict[str, int] = {}

    def record(gm, example_inputs):
        for node in gm.graph.nodes:
            target = str(node.target)
            if node.op == "call_function" and "ltx_kernels" in target:
                parts = target.split(".")
                op = parts[-2] if len(parts) > 2 else parts[-1]
                seen[op] = seen.get(op, 0) + 1
        return gm.forward

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(model, backend=record)(**inputs)
    torch._dynamo.reset()
    return dict(sorted(seen.items()))


def uncompile(blocks):
    for block in blocks:
        block._compiled_call_impl = None


def run_model(name, lk, args):
    torch._dynamo.reset()
    gc.collect()
    torch.cuda.empty_cache()
    model, inputs, blocks = MODELS[name](args.batch)
    params = sum(p.numel() for p in model.parameters()) / 1e9
    iters = args.iters if name == "ltx" else args.mochi_iters
    rows = []

    def measure(label, fn, graphs=False):
        # graphs: a torch.compile(mode="reduce-overhead") model, whose CUDA graph replays reuse
        # their output buffers: each forward is a new step, the first output is copied out.
        def call():
            if graphs:
                torch.compiler.cudagraph_mark_step_begin()
            return fn(**inputs)

        t0 = time.perf_counter()
        try:
            with torch.no_grad():
                out = call()[0].clone()  # first call: compilation, when there is any
                torch.cuda.synchronize()
                first_s = time.perf_counter() - t0
                times = time_forwards(call, iters, args.warmup)
        except Exception as e:  # noqa: BLE001 - an optional row fails alone, reported
            if label in ("eager", "torch.compile"):
                raise
            print(f"  {name} {label}: FAILED: {type(e).__name__}: {str(e).splitlines()[0][:300]}", flush=True)
            return
        rows.append(dict(config=label, ms=statistics.median(times), min_ms=min(times),
                         first_call_s=first_s, out=out))
        print(f"  {name} {label}: {rows[-1]['ms']:.2f} ms (first call {first_s:.1f} s)", flush=True)

    def profile(label, fn):
        if not args.profile:
            return
        from torch.profiler import ProfilerActivity, profile as prof

        with torch.no_grad(), prof(activities=[ProfilerActivity.CUDA]) as p:
            fn(**inputs)
            torch.cuda.synchronize()
        events = p.key_averages()
        table = events.table(sort_by="cuda_time_total", row_limit=30, max_name_column_width=90)
        kinds = kernel_kinds(events)
        line = ", ".join(f"{k} {v:.2f} ms" for k, v in kinds.items())
        print(f"  {name} {label}: GPU time by kind: {line}", flush=True)
        with open(args.profile, "a") as f:
            f.write(f"\n=== {name} {label}: one forward\nby kind: {line}\n{table}\n")

    how = args.compile if name == "ltx" else args.mochi_compile
    measure("eager", model)
    profile("eager", model)
    compiled = compile_model(model, blocks, how)
    measure("torch.compile", compiled)
    profile("torch.compile", compiled)
    uncompile(blocks)
    graphs = args.cudagraphs and how == "full"
    if graphs:
        measure(GRAPHS, compile_model(model, blocks, how, "reduce-overhead"), graphs=True)
    if args.without:
        # The same machine's number without some pieces (patched first: re-patching with all
        # pieces below sets every flag again).
        kept = lk.blocks.LTX_PIECES - set(args.without.split(","))
        lk.patch_transformer(model, pieces=kept)
        label = f"torch.compile + kernels without {args.without}"
        compiled = compile_model(model, blocks, how)
        measure(label, compiled)
        uncompile(blocks)
    counts = lk.patch_transformer(model)
    print(f"  {name} patch_transformer: {counts}", flush=True)
    graph_ops = fused_ops_in_graph(model, inputs)
    print(f"  {name} ltx_kernels ops in the traced graph: {graph_ops}", flush=True)
    measure("eager + kernels", model)
    profile("eager + kernels", model)
    compiled = compile_model(model, blocks, how)
    measure("torch.compile + kernels", compiled)
    profile("torch.compile + kernels", compiled)
    uncompile(blocks)
    if graphs:
        measure(GRAPHS + " + kernels", compile_model(model, blocks, how, "reduce-overhead"), graphs=True)
    if args.fp8 and name == "ltx":
        lk.patch_transformer(model, pieces=lk.blocks.LTX_PIECES | {"fp8"})
        compiled = compile_model(model, blocks, how)
        measure("torch.compile + kernels + fp8", compiled)
        profile("torch.compile + kernels + fp8", compiled)
        uncompile(blocks)
        if graphs:
            measure(GRAPHS + " + kernels + fp8", compile_model(model, blocks, how, "reduce-overhead"), graphs=True)

    eager = rows[0]
    compiled = rows[1]
    order = ["eager", "torch.compile", "eager + kernels", "torch.compile + kernels"]
    rows.sort(key=lambda r: order.index(r["config"]) if r["config"] in order else len(order))
    for r in rows:
        r["vs_eager"] = eager["ms"] / r["ms"]
        r["vs_compile"] = compiled["ms"] / r["ms"]
        r["rel_err"] = rel_err(r.pop("out"), eager["out"]) if r is not eager else 0.0
    eager.pop("out")
    del model
    torch.cuda.empty_cache()
    return dict(model=name, params_b=params, counts=counts, graph_ops=graph_ops, rows=rows, compile=how)


# ---- the LTX block's pieces on their own -------------------------------------------------------


def time_rounds(impls, rounds=15, replays=5, calls=10, seed=0):
    """{name: fn} -> {name: median ms per call}. Each fn is captured `calls` times into a CUDA
    graph (device time only: a compiled function's guard checks and every Python launch cost
    stay out), then the graphs are replayed in interleaved rounds of shuffled order."""
    graphs = {}
    for n, fn in impls.items():
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(calls):
                fn()
        graphs[n] = g
    rng = random.Random(seed)
    names = list(impls)
    times = {n: [] for n in names}
    for _ in range(rounds):
        rng.shuffle(names)
        for n in names:
            graphs[n].replay()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(replays):
                graphs[n].replay()
            b.record()
            b.synchronize()
            times[n].append(a.elapsed_time(b) / (replays * calls))
    return {n: statistics.median(t) for n, t in times.items()}


def ltx_pieces(lk, batch, only=None):
    """Each fusion of the LTX block at the step's shapes: ours vs torch.compile of the code it
    replaces vs that code in eager."""
    from diffusers.models.transformers.transformer_ltx import apply_rotary_emb

    f, h, w = LTX_LATENT
    s, d, inner = f * h * w, 2048, 8192
    dt = torch.bfloat16
    g = torch.Generator(device="cuda").manual_seed(5)

    def rnd(*shape, scale=1.0):
        return (torch.randn(*shape, device="cuda", generator=g) * scale).to(dt)

    x = rnd(batch, s, d)
    y = rnd(batch, s, d)
    temb = rnd(batch, 1, 6 * d, scale=0.1)
    shift, scale, gate = temb.reshape(batch, 1, 6, d).unbind(2)[:3]
    wq, wk = rnd(d), rnd(d)
    cos1, sin1 = lk.rope_3d_tables(f, h, w, d, batch_size=1, scale=(8 / 25 / 20, 32 / 2048, 32 / 2048), device="cuda")
    cos_b, sin_b = cos1.expand(batch, -1, -1).contiguous(), sin1.expand(batch, -1, -1).contiguous()
    w_qkv = rnd(3 * d, d, scale=d**-0.5)
    b_qkv = rnd(3 * d, scale=0.01)
    w_ff, b_ff = rnd(inner, d, scale=d**-0.5), rnd(inner, scale=0.01)

    def eager_qk(q, k, c, sn):
        q = F.rms_norm(q, (d,), wq, 1e-5)
        k = F.rms_norm(k, (d,), wk, 1e-5)
        return apply_rotary_emb(q, (c, sn)), apply_rotary_emb(k, (c, sn))

    def eager_adaln(a, sc, sh):
        var = a.float().pow(2).mean(-1, keepdim=True)
        return (a.float() * torch.rsqrt(var + 1e-6)).to(a.dtype) * (1 + sc) + sh

    def eager_res_adaln(a, b, sc, sh):
        a = a + b
        return a, eager_adaln(a, sc, sh)

    def eager_gated_res_adaln(a, b, gt, sc, sh):
        a = a + b * gt
        return a, eager_adaln(a, sc, sh)

    def eager_qk_tables(q, k, fr, af, ah, aw):
        # LTXVideoRotaryPosEmbed's table arithmetic from the same bands and coordinates.
        coords = torch.stack(torch.meshgrid(af, ah, aw, indexing="ij"), dim=-1).reshape(1, -1, 3)
        angles = (fr * coords.unsqueeze(-1)).transpose(-1, -2).flatten(2)
        c, sn = angles.cos().repeat_interleave(2, -1), angles.sin().repeat_interleave(2, -1)
        pad = d % 6
        c = torch.cat([torch.ones_like(c[..., :pad]), c], -1)
        sn = torch.cat([torch.zeros_like(sn[..., :pad]), sn], -1)
        return eager_qk(q, k, c, sn)

    from diffusers.models.transformers.transformer_ltx import LTXVideoRotaryPosEmbed

    freqs, axes = lk.ltx_model.ltx_rope_grid(LTXVideoRotaryPosEmbed(d), f, h, w, (8 / 25, 32.0, 32.0), "cuda")
    gate_mlp = temb.reshape(batch, 1, 6, d)[:, :, 5]
    qkv = F.linear(x, w_qkv, b_qkv)
    q, k = qkv[..., :d], qkv[..., d : 2 * d]
    qc, kc = q.contiguous(), k.contiguous()
    pieces = {
        "adaln (norm1 + modulate)": {
            "ours": lambda: lk.adaln(x, scale, shift, None, 1e-6),
            "compile": (torch.compile(eager_adaln), (x, scale, shift)),
            "eager": lambda: eager_adaln(x, scale, shift),
        },
        "qkv: one GEMM vs three": {
            "ours": lambda: F.linear(x, w_qkv, b_qkv),
            "eager": lambda: [F.linear(x, w_qkv[i * d : (i + 1) * d], b_qkv[i * d : (i + 1) * d]) for i in range(3)],
        },
        "qk_norm_rope (table shared)": {
            "ours": lambda: lk.qk_norm_rope(q, k, wq, wk, cos1.expand(batch, -1, -1), sin1.expand(batch, -1, -1), 1e-5),
            "ours, per-batch table": lambda: lk.qk_norm_rope(q, k, wq, wk, cos_b, sin_b, 1e-5),
            "compile": (torch.compile(eager_qk), (qc, kc, cos_b, sin_b)),
            "eager": lambda: eager_qk(qc, kc, cos_b, sin_b),
        },
        "qk_norm_rope_grid (cos/sin from positions)": {
            "ours": lambda: lk.qk_norm_rope_grid(q, k, wq, wk, freqs, axes, 1e-5),
            "ours, shared table": lambda: lk.qk_norm_rope(q, k, wq, wk, cos1.expand(batch, -1, -1), sin1.expand(batch, -1, -1), 1e-5),
            "compile (tables inside)": (torch.compile(eager_qk_tables), (qc, kc, freqs, *axes)),
        },
        "chain: ff residual + next norm1": {
            "ours": lambda: lk.residual_adaln(x, y, gate_mlp, scale, shift, None, 1e-6),
            "ours, two passes": lambda: lk.adaln(lk.gated_residual(x, y, gate_mlp), scale, shift, None, 1e-6),
            "compile": (torch.compile(eager_gated_res_adaln), (x, y, gate_mlp, scale, shift)),
        },
        "gated_residual": {
            "ours": lambda: lk.gated_residual(x, y, gate),
            "compile": (torch.compile(lambda a, b, c: a + b * c), (x, y, gate)),
            "eager": lambda: x + y * gate,
        },
        "residual_adaln (h + attn2, norm2)": {
            "ours": lambda: lk.residual_adaln(x, y, None, scale, shift, None, 1e-6),
            "compile": (torch.compile(eager_res_adaln), (x, y, scale, shift)),
            "eager": lambda: eager_res_adaln(x, y, scale, shift),
        },
        "linear_gelu_tanh (ff proj)": {
            "ours": lambda: lk.linear_gelu_tanh(x, w_ff, b_ff),
            "compile": (torch.compile(lambda a, b, c: F.gelu(F.linear(a, b, c), approximate="tanh")), (x, w_ff, b_ff)),
            "eager": lambda: F.gelu(F.linear(x, w_ff, b_ff), approximate="tanh"),
            "GEMM alone (floor)": lambda: F.linear(x, w_ff, b_ff),
        },
    }
    checks = {
        "qk_norm_rope": rel_err(torch.cat(lk.qk_norm_rope(q, k, wq, wk, cos_b, sin_b, 1e-5)), torch.cat(eager_qk(qc, kc, cos_b, sin_b))),
        "linear_gelu_tanh": rel_err(lk.linear_gelu_tanh(x, w_ff, b_ff), F.gelu(F.linear(x, w_ff, b_ff), approximate="tanh")),
        "residual_adaln": rel_err(lk.residual_adaln(x, y, None, scale, shift, None, 1e-6)[1], eager_res_adaln(x, y, scale, shift)[1]),
        "qk_norm_rope_grid": rel_err(torch.cat(lk.qk_norm_rope_grid(q, k, wq, wk, freqs, axes, 1e-5)), torch.cat(eager_qk_tables(qc, kc, freqs, *axes))),
        "chain": rel_err(lk.residual_adaln(x, y, gate_mlp, scale, shift, None, 1e-6)[1], eager_gated_res_adaln(x, y, gate_mlp, scale, shift)[1]),
    }
    results = []
    with torch.no_grad():
        for piece, impls in pieces.items():
            if only and not any(o in piece for o in only.split(",")):
                continue
            fns = {}
            for n, v in impls.items():
                if isinstance(v, tuple):
                    fn, fargs = v
                    fn(*fargs)  # compile outside the timing
                    fns[n] = lambda fn=fn, fargs=fargs: fn(*fargs)
                else:
                    fns[n] = v
            t = time_rounds(fns)
            for n, ms in t.items():
                results.append(dict(piece=piece, impl=n, ms=ms, vs_ours=ms / t["ours"]))
                print(f"  {piece:36s} {n:24s} {ms:8.4f} ms  ({ms / t['ours']:.3f}x ours)", flush=True)
    print("  rel err vs eager:", {k: f"{v:.2e}" for k, v in checks.items()})
    return dict(rows=results, rel_err=checks)


def print_table(result):
    print(f"\n### {result['model']} ({result['params_b']:.2f} B parameters, compile: {result['compile']}), "
          f"patched: {result['counts']}")
    print("| configuration | ms / step (median) | min | vs eager | vs torch.compile | rel err vs eager |")
    print("|---|---|---|---|---|---|")
    for r in result["rows"]:
        print(f"| {r['config']} | {r['ms']:.2f} | {r['min_ms']:.2f} | {r['vs_eager']:.3f}x | "
              f"{r['vs_compile']:.3f}x | {r['rel_err']:.2e} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--models", default="ltx,mochi")
    ap.add_argument("--batch", type=int, default=2, help="CFG batch")
    ap.add_argument("--iters", type=int, default=15, help="timed LTX forwards per configuration")
    ap.add_argument("--mochi-iters", type=int, default=15, help="timed Mochi forwards per configuration")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--compile", choices=["full", "regional"], default="full")
    ap.add_argument("--mochi-compile", choices=["full", "regional"], default="regional",
                    help="Mochi's attention breaks the graph (torch.nonzero) in every block anyway")
    ap.add_argument("--ops", action="store_true", help="time the LTX block's pieces first")
    ap.add_argument("--ops-only", default=None, help="comma-separated substrings: time only the pieces they name")
    ap.add_argument("--without", default=None,
                    help="also time compile + kernels without these pieces (e.g. chain,rope_grid; "
                         "attention,qkv for Mochi)")
    ap.add_argument("--cudagraphs", action="store_true",
                    help="also time torch.compile(mode='reduce-overhead'), CUDA graphs, with and without "
                         "the kernels (full compile only)")
    ap.add_argument("--fp8", action="store_true",
                    help="also time LTX compile + kernels with the optional fp8 piece (FP8 projections)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--profile", type=Path, default=None, help="append a kernel profile of one forward per configuration")
    args = ap.parse_args()

    import kernels

    lk = kernels.get_local_kernel(args.root, backend="cuda")
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, compile: {args.compile}")
    report = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, compile=args.compile)
    if args.ops:
        report["pieces"] = ltx_pieces(lk, args.batch, args.ops_only)
    report["models"] = []
    for name in [m for m in args.models.split(",") if m]:
        report["models"].append(run_model(name, lk, args))
    for result in report["models"]:
        print_table(result)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
