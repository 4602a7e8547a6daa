#!/usr/bin/env python3
"""Peak memory of `kbuild publish` for a large variant (benchmark, not a test; #26 item 7).

    python3 bench/publish_rss.py [--size-mb 500] [--kbuild target/release/kbuild]
        [--server target/release/kbuild-hub-server] [--out bench/results/NAME.txt]

Writes a variant whose extension is SIZE MB of incompressible bytes (what a large fat-binary
.so looks like to an uploader), publishes it to a fresh kbuild-hub-server on loopback, and
reports kbuild's peak RSS (`wait4` of the kbuild process alone, not the server) and the wall
time. Target: peak RSS < 200 MB for 500 MB. kbuild-hub-server has no Xet, so the extension
goes through the Git LFS `basic` transfer: preupload, batch, one streamed PUT, then the commit
names it by sha256 (no content is sent twice).
"""

import argparse
import base64
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VARIANT = "torch211-cxx11-cpu-x86_64-linux"
OP_ID = "_relu_cpu_bench000"


def write_variant(build: Path, size_mb: int) -> Path:
    """A variant as `kbuild build` writes it, with a SIZE MB extension and its digest."""
    variant = build / VARIANT
    variant.mkdir(parents=True)
    (variant / "__init__.py").write_text("from ._ops import ops\n")
    (variant / "_ops.py").write_text(
        f"import torch\nfrom . import {OP_ID}\nops = torch.ops.{OP_ID}\n\n\n"
        f"def add_op_namespace_prefix(op_name: str):\n    return f\"{OP_ID}::{{op_name}}\"\n"
    )
    (variant / "_capabilities.py").write_text(
        "CAPABILITY_DTYPES: dict[str, tuple[str, ...]] = {}\nPTX_CAPABILITY = None\n"
    )
    with open(variant / f"{OP_ID}.abi3.so", "wb") as f:
        f.write(b"\x7fELF\0")
        for _ in range(size_mb):
            f.write(os.urandom(1 << 20))
    files = {}
    for path in sorted(variant.iterdir()):
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        files[path.name] = base64.b64encode(digest.digest()).decode()
    metadata = {
        "name": "relu",
        "id": OP_ID,
        "version": 1,
        "license": "apache-2.0",
        "python-depends": [],
        "backend": {"type": "cpu"},
        "digest": {"algorithm": "sha256", "files": files},
    }
    (variant / "metadata.json").write_text(json.dumps(metadata, indent=2))
    return variant


def start_server(binary: str, root: Path) -> tuple[subprocess.Popen, str]:
    server = subprocess.Popen(
        [binary, "--root", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = server.stdout.readline().strip()
    if not line.startswith("listening on "):
        server.kill()
        sys.exit(f"unexpected first line from the server: {line!r}")
    return server, line.removeprefix("listening on ")


def publish(kbuild: str, project: Path, url: str) -> tuple[int, float, int, str]:
    """Run the publish; (exit status, seconds, peak RSS in KiB, stderr)."""
    env = dict(os.environ, HF_TOKEN="hf_bench_token", HF_ENDPOINT=url)
    env["HF_HOME"] = str(project / ".hf-home")
    with tempfile.TemporaryFile() as err:
        started = time.monotonic()
        proc = subprocess.Popen(
            [kbuild, "-C", str(project), "publish", "--repo", "org/relu", "--skip-check"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.monotonic() - started
        err.seek(0)
        return os.waitstatus_to_exitcode(status), seconds, usage.ru_maxrss, err.read().decode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--kbuild", default="target/release/kbuild")
    parser.add_argument("--server", default="target/release/kbuild-hub-server")
    parser.add_argument("--out", help="also write the report here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kbuild-publish-rss-") as tmp:
        tmp = Path(tmp)
        project = tmp / "project"
        write_variant(project / "build", args.size_mb)
        server, url = start_server(args.server, tmp / "hub")
        try:
            code, seconds, rss_kib, stderr = publish(args.kbuild, project, url)
        finally:
            server.kill()
            server.wait()
    rss_mb = rss_kib * 1024 / 1e6
    verdict = "PASS" if code == 0 and rss_mb < 200 else "FAIL"
    report = (
        f"kbuild publish of a {args.size_mb} MB extension to kbuild-hub-server (loopback)\n"
        f"kbuild: {args.kbuild}\n"
        f"exit status: {code}\n"
        f"wall time: {seconds:.1f} s\n"
        f"peak RSS of kbuild: {rss_mb:.1f} MB (target < 200 MB): {verdict}\n"
        f"--- kbuild stderr\n{stderr}"
    )
    print(report, end="")
    if args.out:
        Path(args.out).write_text(report)
    if verdict != "PASS":
        sys.exit(1)


if __name__ == "__main__":
    main()
