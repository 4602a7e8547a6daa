"""Check that every kbuild invocation in the flake, the workflows and docs/ci.md exists in kbuild.

Usage: python3 nix/kbuild-calls.py KBUILD FILE...

Invocations are looked for where commands live: the '' strings of .nix files, the non-comment
lines of workflow YAML, and fenced code blocks of Markdown. Each `kbuild [global opts] SUB --flag`
must name a subcommand in `kbuild --help` and flags in `kbuild SUB --help`. Exit 1 on the first
file with an unknown one, after listing them all.
"""

import re
import subprocess
import sys
from pathlib import Path

GLOBAL = r"(?:\s+(?:-C\s+\S+|--project(?:=|\s+)\S+|-v|--verbose|-q|--quiet))*"
CALL = re.compile(r"(?:^|[\s/;|&(`\"'])kbuild" + GLOBAL + r"\s+([a-z][a-z-]*)(.*)")
FLAG = re.compile(r"(?:^|\s)(--?[A-Za-z][A-Za-z0-9-]*)")
# Where one command ends on its line.
END = re.compile(r"\s(?:\||;|&&|\|\||>|2>|#)|\$\(|\)")


def help_text(kbuild: str, *args: str) -> str:
    out = subprocess.run([kbuild, *args, "--help"], capture_output=True, text=True, check=True)
    return out.stdout


def subcommands(kbuild: str) -> set[str]:
    text = help_text(kbuild)
    block = text.split("Commands:", 1)[1].split("\n\n", 1)[0]
    return {line.split()[0] for line in block.splitlines() if line.strip()}


def options(kbuild: str, *sub: str) -> set[str]:
    found = set()
    for line in help_text(kbuild, *sub).splitlines():
        stripped = line.strip()
        if stripped.startswith("-"):
            # `-j, --jobs <N>   help…`: the names come before the value and the help text.
            found.update(re.findall(r"--?[A-Za-z][A-Za-z0-9-]*", stripped.split("  ")[0].split("<")[0]))
    return found


def code_lines(path: Path) -> list[tuple[int, str]]:
    text = path.read_text()
    if path.suffix == ".nix":
        lines = []
        for m in re.finditer(r"''(.*?)(?<!')''(?!['$\\])", text, re.S):
            first = text.count("\n", 0, m.start()) + 1
            lines += [(first + i, line) for i, line in enumerate(m.group(1).splitlines())]
        return lines
    if path.suffix == ".md":
        lines, fenced = [], False
        for n, line in enumerate(text.splitlines(), 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
            elif fenced:
                lines.append((n, line))
        return lines
    return [(n, l) for n, l in enumerate(text.splitlines(), 1) if not l.lstrip().startswith("#")]


def joined(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Join backslash continuations so a command's flags on later lines count."""
    out, carry, start = [], "", 0
    for n, line in lines:
        if not carry:
            start = n
        if line.rstrip().endswith("\\"):
            carry += line.rstrip()[:-1] + " "
            continue
        out.append((start, carry + line))
        carry = ""
    return out


def main() -> int:
    kbuild, files = sys.argv[1], [Path(f) for f in sys.argv[2:]]
    subs = subcommands(kbuild)
    opts: dict[str, set[str]] = {}
    problems, calls = [], 0
    for path in files:
        for n, line in joined(code_lines(path)):
            for m in CALL.finditer(line):
                sub, rest = m.group(1), m.group(2)
                rest = END.split(rest, 1)[0]
                calls += 1
                if sub not in subs:
                    problems.append(f"{path}:{n}: `kbuild {sub}`: no such subcommand (kbuild has {', '.join(sorted(subs))})")
                    continue
                # A verb with its own subcommands (`kbuild toolchain install`): check the flags
                # against the nested one's help.
                nested = re.match(r"\s+([a-z][a-z-]*)\b", rest)
                if nested and "Commands:" in help_text(kbuild, sub):
                    sub, rest = f"{sub} {nested.group(1)}", rest[nested.end():]
                known = opts.setdefault(sub, options(kbuild, *sub.split()))
                for flag in FLAG.findall(rest):
                    flag = flag.split("=", 1)[0]
                    if flag not in known:
                        problems.append(f"{path}:{n}: `kbuild {sub} {flag}`: `kbuild {sub} --help` has no {flag}")
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    if problems:
        print("  hint: use only what `kbuild --help` lists today, or add the flag to src/cli.rs first", file=sys.stderr)
        return 1
    print(f"kbuild calls: {calls} invocations in {len(files)} files, all subcommands and flags exist")
    return 0


if __name__ == "__main__":
    sys.exit(main())
