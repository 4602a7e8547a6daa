#!/usr/bin/env bash
# The flagship (all backends, full CUDA matrix), -j16, empty caches, built by kbuild before and
# after this session's changes in two directories: which files of build/<variant>/ differ.
set -uo pipefail
for d in before after; do rm -rf /tmp/$d /tmp/$d-cache; mkdir -p /tmp/$d; cp -r build.toml kernels torch-ext /tmp/$d/; done
for d in before after; do
  s=$SECONDS; KBUILD_CACHE_DIR=/tmp/$d-cache .gpubin/kbuild-$d -q -C /tmp/$d build --unique-id repro -j 16; echo "$d rc=$? $((SECONDS-s))s"
  (cd /tmp/$d/build && find . -path ./.kbuild -prune -o -type f -print | sort | xargs sha256sum) > /tmp/$d.sums
done
wc -l /tmp/before.sums; diff /tmp/before.sums /tmp/after.sums && echo "CMP: all files identical"
grep '\.so' /tmp/before.sums /tmp/after.sums
for v in /tmp/after/build/*/; do n=$(basename $v); diff <(python3 -m json.tool /tmp/before/build/$n/metadata.json) <(python3 -m json.tool $v/metadata.json) | head -8; done
