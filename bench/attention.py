#!/usr/bin/env python3
"""Scaled dot-product attention at the flagship models' shapes, each backend torch offers
(issue #41: "the fastest attention the H100 offers for this shape, chosen per shape").

For every shape: milliseconds per call (CUDA events around 20 back-to-back calls, median of 7
rounds: bench.py's time_loop), TFLOP/s (4·B·H·Sq·Sk·D), and the relative error against float32
math attention of the same inputs. Then whether each way of asking for cuDNN holds under
torch.compile(fullgraph=True) and which kernel it runs.

    python3 bench/attention.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from bench import time_loop  # bench/bench.py, beside this script

# (name, B, H, Sq, Sk, D, mask): the q/k/v come as [B, S, H, D] viewed [B, H, S, D], as the
# models' processors hand them to SDPA.
SHAPES = [
    ("ltx self-attention", 2, 32, 2688, 2688, 64, False),
    ("ltx cross-attention (text mask)", 2, 32, 2688, 128, 64, True),
    ("ltx cross-attention (no mask)", 2, 32, 2688, 128, 64, False),
    ("mochi joint, one sample (diffusers)", 1, 24, 3436, 3436, 128, False),
    ("mochi joint, batch of 2", 2, 24, 3436, 3436, 128, False),
    ("mochi joint, batch of 2, key mask", 2, 24, 3436, 3436, 128, True),
]

BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}


def inputs(b, h, sq, sk, d, mask, dtype=torch.bfloat16):
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(b, sq, h, d, device="cuda", generator=g, dtype=dtype).transpose(1, 2)
    k = torch.randn(b, sk, h, d, device="cuda", generator=g, dtype=dtype).transpose(1, 2)
    v = torch.randn(b, sk, h, d, device="cuda", generator=g, dtype=dtype).transpose(1, 2)
    m = None
    if mask:
        keep = torch.ones(b, sk, device="cuda", dtype=torch.bool)
        keep[:, -sk // 8 :] = False  # the last eighth padded, as a prompt shorter than its slot
        m = keep[:, None, None, :]
    return q, k, v, m


def time_ms(fn):
    return time_loop(fn, iters=20, warmup=5, repeats=7)


def rel_err(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def measure_shapes():
    rows = []
    for name, b, h, sq, sk, d, mask in SHAPES:
        q, k, v, m = inputs(b, h, sq, sk, d, mask)
        with sdpa_kernel(SDPBackend.MATH):
            ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=m)
        flop = 4 * b * h * sq * sk * d
        for label, backend in BACKENDS.items():
            row = dict(shape=name, backend=label)
            try:
                with sdpa_kernel(backend):
                    out = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
                    ms = time_ms(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=m))
                row.update(ms=ms, tflops=flop / ms / 1e9, rel_err=rel_err(out, ref))
                print(f"{name:38s} {label:10s} {ms:8.4f} ms {row['tflops']:6.1f} TFLOP/s "
                      f"rel err {row['rel_err']:.2e}", flush=True)
            except RuntimeError as e:
                row.update(error=str(e).splitlines()[0][:160])
                print(f"{name:38s} {label:10s} not available: {row['error']}", flush=True)
            rows.append(row)
        # torch's own choice with every backend allowed (what the unpatched models get)
        ms = time_ms(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=m))
        rows.append(dict(shape=name, backend="default", ms=ms, tflops=flop / ms / 1e9))
        print(f"{name:38s} {'default':10s} {ms:8.4f} ms {flop / ms / 1e9:6.1f} TFLOP/s", flush=True)
        del q, k, v, m, ref
        torch.cuda.empty_cache()
    return rows


def kernels_run(fn):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as p:
        fn()
        torch.cuda.synchronize()
    names = [e.key for e in p.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
    return [n[:90] for n in names if "memcpy" not in n.lower() and "memset" not in n.lower()]


def compile_checks():
    """Each way of asking for cuDNN, compiled with fullgraph=True: does it trace, which kernels
    run, and is the result the eager one's."""
    q, k, v, _ = inputs(2, 32, 2688, 2688, 64, False)

    def direct(q, k, v):
        return torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, False)[0]

    def priority(q, k, v):
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION,
                          SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH], set_priority=True):
            return F.scaled_dot_product_attention(q, k, v)

    def plain(q, k, v):
        return F.scaled_dot_product_attention(q, k, v)

    out = {}
    ref = plain(q, k, v)
    for name, fn in [("aten cudnn op", direct), ("sdpa_kernel priority", priority), ("plain", plain)]:
        torch._dynamo.reset()
        try:
            c = torch.compile(fn, fullgraph=True)
            r = c(q, k, v)
            out[name] = dict(kernels=kernels_run(lambda: c(q, k, v)), rel_err_vs_default=rel_err(r, ref),
                             ms=time_ms(lambda: c(q, k, v)))
        except Exception as e:  # noqa: BLE001 - report whatever stops the trace
            out[name] = dict(error=f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
        print(f"compiled {name}: {out[name]}", flush=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench/attention.py needs a CUDA device")
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"cuDNN {torch.backends.cudnn.version()}", flush=True)
    result = dict(device=torch.cuda.get_device_name(), torch=torch.__version__,
                  cudnn=torch.backends.cudnn.version(), shapes=measure_shapes(), compiled=compile_checks())
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
