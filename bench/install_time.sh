#!/usr/bin/env bash
# From nothing to a first build, for a kernel author: seconds to install kbuild (pip into an empty
# venv, uv tool install, and cargo install from the packaged crate with an empty target dir),
# then `kbuild init` + a first cpu build with the installed binary; wheel and binary sizes.
# Side by side in one run on this machine; results to stdout (commit them under bench/results/).
#
#   bench/install_time.sh DIST            (DIST: what scripts/release/build made)
#   SKIP_CARGO=1 bench/install_time.sh DIST   (cargo install takes minutes on 2 cores)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dist=$(realpath "$1")
wheel=$(ls "$dist"/kbuild-*x86_64*.whl | head -1)
torch_python=${KBUILD_PYTHON:-$root/.venv/bin/python}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
now() { date +%s%N; }
secs() { python3 -c "print(f'{($2 - $1) / 1e9:.2f}')" ; }

echo "# kbuild install time, $(date -u +%F), $(nproc) cores, $(uname -m), $(git -C "$root" log -1 --format=%h)"
echo "wheel: $(basename "$wheel"), $(stat -c %s "$wheel") bytes"
binary_size=$(python3 -c "import sys,zipfile; z=zipfile.ZipFile(sys.argv[1]); print(next(i.file_size for i in z.infolist() if i.filename.endswith('/scripts/kbuild')))" "$wheel")
echo "binary in the wheel: $binary_size bytes"

t0=$(now)
/usr/bin/python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q --no-index --disable-pip-version-check "$wheel"
t1=$(now)
echo "pip: empty venv + install the wheel: $(secs "$t0" "$t1") s"

t0=$(now)
UV_TOOL_DIR=$tmp/uvt UV_TOOL_BIN_DIR=$tmp/uvb UV_CACHE_DIR=$tmp/uvc \
  "$root/.venv/bin/uv" tool install -q --offline --python /usr/bin/python3 "$wheel"
t1=$(now)
echo "uv tool install of the wheel: $(secs "$t0" "$t1") s"

cd "$tmp"
t0=$(now)
"$tmp/venv/bin/kbuild" -q init kern --backends cpu
(cd kern && ln -s "$(dirname "$(dirname "$torch_python")")" .venv && "$tmp/venv/bin/kbuild" -q build --backend cpu)
t1=$(now)
echo "installed kbuild: init + first cpu build (torch ${torch_python}): $(secs "$t0" "$t1") s"

if [ "${SKIP_CARGO:-0}" != 1 ]; then
  t0=$(now)
  CARGO_TARGET_DIR=$tmp/cargo-target cargo install -q --locked --path "$root" --root "$tmp/cargo-root" 2>/dev/null
  t1=$(now)
  echo "cargo install --locked (empty target dir, deps from the local registry cache): $(secs "$t0" "$t1") s"
  echo "cargo-installed binary: $(stat -c %s "$tmp/cargo-root/bin/kbuild") bytes"
fi
