#!/usr/bin/env bash
# scripts/run.sh — the README's "run it" command: installs what is missing, builds the
# gpustream CLI (Release, build-release/), then runs the main job:
#
#   gpustream serve --simulate-if-no-gpu     (HTTP + WebSocket on 127.0.0.1:9400: the live dashboard,
#                                             /metrics, /api/v1; two simulated GPUs, said so, when
#                                             no GPU is found). Ctrl-C stops it cleanly.
#
# Any arguments replace the default job, e.g.:
#   scripts/run.sh list
#   scripts/run.sh snapshot --json
#   scripts/run.sh watch --simulate 4 --interval 0.5
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"

scripts/deps.sh build
export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
if [ ! -f build-release/build.ninja ]; then
  cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGPUSTREAM_BUILD_TESTS=OFF -DGPUSTREAM_BUILD_BENCHMARKS=OFF -DGPUSTREAM_BUILD_EXAMPLES=OFF \
    > /dev/null
fi
echo "building gpustream (build-release/) ..."
cmake --build build-release --target gpustream -j "$(nproc)" > build-release.log 2>&1 || {
  tail -50 build-release.log; echo "run.sh: build failed (full log: build-release.log)" >&2; exit 1; }

if [ $# -eq 0 ]; then
  set -- serve --simulate-if-no-gpu
fi
exec build-release/cli/gpustream "$@"
