#!/usr/bin/env python3
"""Memory of `kbuild check` and `kbuild publish --dry-run` on a gzip bomb (not a test): a valid
artifact of one cpu variant plus one entry of 1 GiB of zeros, about 1 MiB compressed. Issue
#26 item 4 asks that it be refused with under 100 MB RSS.

    python bench/archive_bomb.py [--kbuild target/debug/kbuild] [--size-mib 1024] [--out FILE]

Each case runs kbuild once and reads its peak RSS from wait4 (ru_maxrss, KiB on Linux):
  check, default cap      the entry is streamed and hashed, then the digest refuses it
  check, cap 512M         the header's declared size passes the cap: refused before inflating
  publish --dry-run, both the same through publish's reading of `--build-dir`
Publish never reaches the network: verification refuses the build first (HF_ENDPOINT points at
a closed loopback port all the same).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import tarfile
import tempfile
import time
from pathlib import Path

VARIANT = "torch215-cxx11-cpu-x86_64-linux"
ID = "_relu_cpu_abc1234"


def variant_files() -> dict[str, bytes]:
    """A variant as `kbuild build` writes one (stand-in extension), metadata.json with digest."""
    files = {
        "__init__.py": b"from ._ops import ops\n__all__ = []\n",
        "_ops.py": (
            f"import torch\nfrom . import {ID}\nops = torch.ops.{ID}\n\n\n"
            f"def add_op_namespace_prefix(op_name: str):\n    return f\"{ID}::{{op_name}}\"\n"
        ).encode(),
        f"{ID}.abi3.so": b"\x7fELF stand-in\0\0",
    }
    digest = {
        rel: base64.b64encode(hashlib.sha256(data).digest()).decode()
        for rel, data in files.items()
    }
    metadata = {
        "name": "relu",
        "id": ID,
        "version": 1,
        "license": "apache-2.0",
        "python-depends": [],
        "backend": {"type": "cpu"},
        "digest": {"algorithm": "sha256", "files": digest},
    }
    files["metadata.json"] = json.dumps(metadata).encode()
    return files


class Zeros(io.RawIOBase):
    """`size` zero bytes, read in blocks (the bomb is never held in this process either)."""

    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = min(len(b), self.left)
        b[:n] = bytes(n)
        self.left -= n
        return n


def write_bomb(path: Path, size: int) -> None:
    with tarfile.open(path, "w:gz", compresslevel=9) as tar:
        for rel, data in sorted(variant_files().items()):
            info = tarfile.TarInfo(f"{VARIANT}/{rel}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo(f"{VARIANT}/bomb.bin")
        info.size = size
        tar.addfile(info, io.BufferedReader(Zeros(size), 1 << 20))


def run_case(cmd: list[str], env: dict[str, str]) -> tuple[int, float, int, str]:
    """Exit code, seconds, peak RSS in KiB (wait4's ru_maxrss) and kbuild's refusal line."""
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        log = os.open(env["BENCH_LOG"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.execve(cmd[0], cmd, env)
    _, status, usage = os.wait4(pid, 0)
    seconds = time.monotonic() - start
    text = Path(env["BENCH_LOG"]).read_text(errors="replace")
    lines = [l for l in text.splitlines() if "refusing" in l or "digest" in l or "error" in l]
    return os.waitstatus_to_exitcode(status), seconds, usage.ru_maxrss, (lines[0] if lines else text[-300:])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kbuild", default="target/debug/kbuild")
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--out")
    args = ap.parse_args()
    kbuild = str(Path(args.kbuild).resolve())
    report = []
    with tempfile.TemporaryDirectory() as tmp:
        build = Path(tmp) / "project" / "build"
        build.mkdir(parents=True)
        archive = build / f"relu-{VARIANT}.tar.gz"
        write_bomb(archive, args.size_mib << 20)
        compressed = archive.stat().st_size
        report.append(
            f"archive: {compressed / 2**20:.2f} MiB compressed, expands to "
            f"{args.size_mib} MiB of zeros + a valid cpu variant"
        )
        base = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": tmp,
            "HF_ENDPOINT": "http://127.0.0.1:9",
            "HF_TOKEN": "hf_bench",
            "BENCH_LOG": str(Path(tmp) / "log"),
        }
        cases = [
            ("check, default cap", [kbuild, "check", str(archive)], {}),
            ("check, cap 512M", [kbuild, "check", str(archive)], {"KBUILD_MAX_UNPACKED_SIZE": "512M"}),
            (
                "publish --dry-run, default cap",
                [kbuild, "-C", str(build.parent), "publish", "--dry-run", "--repo", "b/bomb", "--build-dir", str(build)],
                {},
            ),
            (
                "publish --dry-run, cap 512M",
                [kbuild, "-C", str(build.parent), "publish", "--dry-run", "--repo", "b/bomb", "--build-dir", str(build)],
                {"KBUILD_MAX_UNPACKED_SIZE": "512M"},
            ),
        ]
        for name, cmd, extra in cases:
            code, seconds, rss_kib, line = run_case(cmd, {**base, **extra})
            verdict = "refused" if code != 0 else "ACCEPTED"
            report.append(
                f"{name:32} exit {code} ({verdict}), peak RSS {rss_kib / 1024:6.1f} MiB, "
                f"{seconds:6.2f} s: {line.strip()[:160]}"
            )
    text = "\n".join(report) + "\n"
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
