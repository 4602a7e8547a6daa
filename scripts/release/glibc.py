"""For each kbuild wheel in DIST: the highest glibc symbol version its binary needs (read from
the ELF's version-needed section, any architecture), which must be at most 2.17
(manylinux2014); and the archive of the same target must hold the very same binary.

    python glibc.py DIST
"""

from __future__ import annotations

import glob
import io
import os
import sys
import tarfile
import zipfile

from elftools.elf.elffile import ELFFile  # pyelftools, which auditwheel brings

LIMIT = (2, 17)


def glibc_versions(binary: bytes) -> list[tuple[int, ...]]:
    elf = ELFFile(io.BytesIO(binary))
    section = elf.get_section_by_name(".gnu.version_r")
    found = []
    if section is not None:
        for _verneed, aux in section.iter_versions():
            for entry in aux:
                name = entry.name
                if name.startswith("GLIBC_") and name[6:7].isdigit():
                    found.append(tuple(int(p) for p in name[6:].split(".")))
    return found


def main() -> int:
    dist = sys.argv[1]
    failed = False
    for wheel in sorted(glob.glob(os.path.join(dist, "kbuild-*.whl"))):
        with zipfile.ZipFile(wheel) as zf:
            (name,) = [n for n in zf.namelist() if n.endswith(".data/scripts/kbuild")]
            binary = zf.read(name)
        elf = ELFFile(io.BytesIO(binary))
        arch = elf.get_machine_arch()
        top = max(glibc_versions(binary), default=(0,))
        shown = ".".join(map(str, top))
        ok = top <= LIMIT
        failed |= not ok
        print(f"{os.path.basename(wheel)}: {arch}, {len(binary)} bytes, highest glibc symbol GLIBC_{shown}"
              f" ({'ok' if ok else 'too new'}: manylinux2014 allows GLIBC_2.17)")
        for archive in glob.glob(os.path.join(dist, "kbuild-*-*-linux-gnu.tar.gz")):
            with tarfile.open(archive) as tar:
                member = next(m for m in tar.getmembers() if m.name.endswith("/kbuild"))
                data = tar.extractfile(member).read()
            if ELFFile(io.BytesIO(data)).get_machine_arch() == arch:
                same = data == binary
                failed |= not same
                print(f"  {os.path.basename(archive)}: {'same binary' if same else 'DIFFERENT binary'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
