#!/usr/bin/env bash
# The flagship's CUDA .so at -j16 and -j5 (two dirs, empty caches): which splits each plan made,
# whether the .so files match, and which sections differ.
set -uo pipefail
for d in ra rc; do rm -rf /tmp/$d /tmp/$d-cache; mkdir -p /tmp/$d; cp -r build.toml kernels torch-ext /tmp/$d/; done
KBUILD_CACHE_DIR=/tmp/ra-cache .gpubin/kbuild -q -C /tmp/ra build --unique-id repro -j 16 --backend cuda --json > /tmp/ra.json
KBUILD_CACHE_DIR=/tmp/rc-cache .gpubin/kbuild -q -C /tmp/rc build --unique-id repro -j 5 --backend cuda --json > /tmp/rc.json
for d in ra rc; do python3 -c "
import json,sys; r=json.load(open('/tmp/$d.json')); s=r.get('schedule') or {}
print('$d', 'jobs', s.get('jobs'), 'splits', [(x['label'], x['threads']) for x in s.get('split', [])])"; done
sha256sum /tmp/ra/build/*cu130*/*.so /tmp/rc/build/*cu130*/*.so
