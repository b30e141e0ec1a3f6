#!/usr/bin/env bash
# scripts/fuzz.sh — builds the libFuzzer targets (fuzz/) with clang and runs each for a fixed
# time. Fails when a target crashes (a sanitizer report, an uncaught exception, a FUZZ_CHECK),
# and leaves the crashing input in build-fuzz/artifacts/<target>/. See docs/testing.md.
#
#   scripts/fuzz.sh                      every target, 12 s each (what scripts/test.sh runs)
#   scripts/fuzz.sh --seconds 3600 --targets amd_smi,macmon --jobs 2
#   scripts/fuzz.sh --merge              fold what the runs found into fuzz/corpus/ (minimized)
#
# Options:
#   --seconds N       run time per target (default 12)
#   --targets a,b     only these targets (default: every target in fuzz/targets.cmake)
#   --jobs N          libFuzzer -jobs=N -workers=N (parallel runs of one target; default 1)
#   --parallel N      run N targets side by side, each for --seconds (default 1; scripts/test.sh
#                     runs as many as there are cores)
#   --build-dir DIR   the normal build tree whose static libraries are linked (default build)
#   --fuzz-dir DIR    the fuzz build tree (default build-fuzz)
#   --merge           after running, merge each target's new inputs into fuzz/corpus/<target>
#   --build-only      build the fuzz targets and stop
#   --no-normal-build the normal tree is built already: do not run its build (scripts/test.sh
#                     builds the fuzz tree while build/'s tests run, which must not share it)
#   --no-build        run the targets as built (scripts/test.sh, after building them)
#   -- ARGS...        extra libFuzzer flags for every run (e.g. -- -max_len=65536)
# The work corpus (inputs found by earlier runs) is kept in <fuzz-dir>/corpus/<target>/; the
# seeds in fuzz/corpus/ and, when present, ../shared/fixtures are read as well.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"

seconds=12
targets=""
jobs=1
parallel=1
build_dir=build
fuzz_dir=build-fuzz
merge=0
build_only=0
normal_build=1
build=1
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift ;;
    --targets) targets="$2"; shift ;;
    --jobs) jobs="$2"; shift ;;
    --parallel) parallel="$2"; shift ;;
    --build-dir) build_dir="$2"; shift ;;
    --fuzz-dir) fuzz_dir="$2"; shift ;;
    --merge) merge=1 ;;
    --build-only) build_only=1 ;;
    --no-normal-build) normal_build=0 ;;
    --no-build) build=0 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

if ! command -v clang++ > /dev/null; then
  echo "fuzz.sh: clang++ is missing (scripts/deps.sh test installs clang and libfuzzer-14-dev)" >&2
  exit 1
fi

# Every target named in fuzz/targets.cmake, in order.
all_targets="$(sed -e 's/#.*//' fuzz/targets.cmake | sed -n '/^set(GPUSTREAM_FUZZ_TARGETS/,/)/p' |
  sed -e 's/set(GPUSTREAM_FUZZ_TARGETS//' -e 's/)//' | tr -s ' \n' ' ')"
if [ -z "$targets" ]; then
  targets="$all_targets"
else
  targets="${targets//,/ }"
fi

t0=$(date +%s)
# 1. The normal build's static libraries (already there after scripts/test.sh's normal build).
if [ "$build" -eq 1 ] && [ "$normal_build" -eq 1 ]; then
  if [ ! -f "$build_dir/CMakeCache.txt" ]; then
    cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
  fi
  cmake --build "$build_dir" --target gpustream_transport gpustream_probes gpustream_sdk > /dev/null
elif [ ! -f "$build_dir/CMakeCache.txt" ]; then
  echo "fuzz.sh: $build_dir is not a build tree (build it first, or drop --no-normal-build)" >&2
  exit 1
fi
t1=$(date +%s)
# 2. The instrumented parsers and the fuzz binaries.
# (Configured every time: it checks which of the normal libraries exist.)
bins=()
for t in $targets; do bins+=("fuzz_$t"); done
if [ "$build" -eq 1 ]; then
  CXX=clang++ cmake -S fuzz -B "$fuzz_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGPUSTREAM_BUILD_DIR="$(cd "$build_dir" && pwd)" > /dev/null
  cmake --build "$fuzz_dir" --target "${bins[@]}"
  t2=$(date +%s)
  echo "fuzz.sh: normal libraries $((t1 - t0)) s, fuzz build $((t2 - t1)) s"
else
  for b in "${bins[@]}"; do
    [ -x "$fuzz_dir/$b" ] || { echo "fuzz.sh: $fuzz_dir/$b is not built (drop --no-build)" >&2; exit 1; }
  done
  t2=$(date +%s)
fi
[ "$build_only" -eq 1 ] && exit 0

# 3. Run each target.
shared="$here/../shared/fixtures"
seeds_of() {  # extra read-only seed directories for a target
  case "$1" in
    fdinfo) echo "$shared/amd_fdinfo $shared/intel/fdinfo" ;;
    amd_smi) echo "$shared/amd_amdsmi" ;;
    rocm_smi) echo "$shared/amd_rocmsmi" ;;
    nvidia_smi_csv) echo "$shared/nvidia/smi_csv" ;;
    macmon) echo "$shared/apple_macmon" ;;
  esac
}

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# run_one TARGET: one libFuzzer run; its outcome goes to <fuzz-dir>/logs/TARGET.result
# ("ok <line>" or "failed <line>"), so runs can go side by side.
run_one() {
  local t="$1"
  local work="$fuzz_dir/corpus/$t"
  local artifacts="$fuzz_dir/artifacts/$t/"
  local log="$fuzz_dir/logs/$t.log"
  mkdir -p "$work" "$artifacts" "$(dirname "$log")"
  local dirs=("$work" "fuzz/corpus/$t")
  local d
  for d in $(seeds_of "$t"); do [ -d "$d" ] && dirs+=("$d"); done
  local args=(-max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$artifacts"
    -timeout=10 -rss_limit_mb=2048 -max_len=16384)
  if [ "$jobs" -gt 1 ]; then args+=(-jobs="$jobs" -workers="$jobs"); fi
  local rc=0
  "$fuzz_dir/fuzz_$t" "${args[@]}" "${extra[@]}" "${dirs[@]}" > "$log" 2>&1 || rc=$?
  local execs rate cov
  execs="$(grep -E '^stat::number_of_executed_units' "$log" | awk '{s += $2} END {print s + 0}' || true)"
  rate="$(grep -E '^stat::average_exec_per_sec' "$log" | awk '{s += $2} END {print s + 0}' || true)"
  cov="$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | awk '{print $2}' || true)"
  if [ "$rc" -ne 0 ]; then
    printf 'failed %-16s FAILED (exit %s) — see %s\n' "$t" "$rc" "$log" > "$log.result"
  else
    printf 'ok %-16s %9s runs %8s exec/s  cov %s\n' "$t" "$execs" "$rate" "${cov:-?}" > "$log.result"
  fi
  if [ "$merge" -eq 1 ] && [ "$rc" -eq 0 ]; then
    "$fuzz_dir/fuzz_$t" -merge=1 -max_len=16384 "fuzz/corpus/$t" "$work" > "$log.merge" 2>&1
  fi
}

running=0
for t in $targets; do
  rm -f "$fuzz_dir/logs/$t.log.result"
  echo "---- fuzz_$t (${seconds} s)"
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$parallel" ]; then wait -n || true; running=$((running - 1)); fi
done
wait || true

failed=()
report=()
for t in $targets; do
  log="$fuzz_dir/logs/$t.log"
  if [ ! -f "$log.result" ]; then
    failed+=("$t"); report+=("$(printf '%-16s FAILED (no result) — see %s' "$t" "$log")")
    continue
  fi
  read -r status line < "$log.result"
  report+=("$line")
  if [ "$status" != ok ]; then
    failed+=("$t")
    grep -E 'ERROR:|runtime error|FUZZ_CHECK|terminate called|Test unit written' "$log" | head -5 || true
  fi
done

echo
echo "fuzz.sh: $(echo $targets | wc -w) targets, ${seconds} s each, $parallel at a time, $(( $(date +%s) - t2 )) s in all"
for r in "${report[@]}"; do echo "  $r"; done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: crashes in: ${failed[*]}. Fix the parser, then copy the input from" >&2
  echo "  $fuzz_dir/artifacts/<target>/ to fuzz/regressions/<target>/ (ctest replays it)." >&2
  exit 1
fi
