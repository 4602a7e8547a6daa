"""Make `kbuild-<version>-<target>.tar.gz` from a built wheel: the binary users get from pip,
with LICENSE and README.md, in one top directory. Byte-identical for the same inputs: entries
sorted, owner 0:0 without names, modes 0755/0644, every time SOURCE_DATE_EPOCH (tar and gzip).

    python archive.py WHEEL TARGET DIST FILE...
"""

from __future__ import annotations

import gzip
import io
import os
import sys
import tarfile
import zipfile


def binary_from_wheel(wheel: str) -> tuple[str, bytes]:
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if n.endswith(".data/scripts/kbuild")]
        if len(names) != 1:
            sys.exit(f"error: {wheel} holds {len(names)} kbuild binaries under *.data/scripts/")
        version = names[0].split("/")[0][len("kbuild-") : -len(".data")]
        return version, zf.read(names[0])


def add(tar: tarfile.TarFile, name: str, data: bytes, mode: int, mtime: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    tar.addfile(info, io.BytesIO(data))


def main() -> None:
    wheel, target, dist, *extra = sys.argv[1:]
    mtime = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    version, binary = binary_from_wheel(wheel)
    top = f"kbuild-{version}-{target}"
    files = {f"{top}/kbuild": (binary, 0o755)}
    for path in extra:
        with open(path, "rb") as f:
            files[f"{top}/{os.path.basename(path)}"] = (f.read(), 0o644)
    out = os.path.join(dist, f"{top}.tar.gz")
    tmp = out + ".tmp"
    with open(tmp, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=mtime) as gz:
            with tarfile.open(fileobj=gz, mode="w", format=tarfile.USTAR_FORMAT) as tar:
                dir_info = tarfile.TarInfo(top)
                dir_info.type, dir_info.mode, dir_info.mtime = tarfile.DIRTYPE, 0o755, mtime
                dir_info.uname = dir_info.gname = ""
                tar.addfile(dir_info)
                for name in sorted(files):
                    data, mode = files[name]
                    add(tar, name, data, mode, mtime)
    os.replace(tmp, out)
    print(out)


if __name__ == "__main__":
    main()
