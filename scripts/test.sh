#!/usr/bin/env bash
# scripts/test.sh — builds gpustream and runs the whole test suite. This is the README's test
# command and the only thing .ci/run calls.
#
#   1. installs missing Debian packages (scripts/deps.sh test)
#   2. normal build (RelWithDebInfo); then, while the instrumented trees of steps 3-5 compile
#      in the background at a lower priority, the tests that need an uninstrumented build
#      (integration with real Prometheus/NATS/Chromium, Python module, install, .deb, docs;
#      mostly waiting), benchmarks built (run by hand: docs/benchmarks.md); then lint
#   3. AddressSanitizer + UndefinedBehaviorSanitizer build + every test, the GoogleTest suites
#      included (they are compiled once, there, not in both builds: half the normal build's time)
#   4. ThreadSanitizer build + the channel and scheduler tests
#   5. the fuzz targets (clang + libFuzzer, build-fuzz/), 12 s each (scripts/fuzz.sh)
#
# Options:  --quick   step 2 only, with the GoogleTest suites built and run in build/ too
#                     (for a fast edit-test loop, no sanitizer)
#           --jobs N  parallel jobs (default: nproc)
# Build trees: build/ (normal), build-asan/, build-tsan/, build-fuzz/. ccache is used when present.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"

quick=0
jobs="$(nproc)"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --jobs) jobs="$2"; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "test.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

scripts/deps.sh test

export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"
export GTEST_COLOR=no

start=$(date +%s)
total_pass=0
total_fail=0
total_skipped=0
summary=()
skipped_names=()

step() { echo; echo "==== $* ($(( $(date +%s) - start ))s)"; }

# run_ctest DIR LABEL-ARGS... : runs ctest ($ctest_jobs tests at a time, default $jobs), adds
# its counts to the totals.
run_ctest() {
  local dir="$1"; shift
  local log
  log="$(mktemp)"
  set +e
  ctest --test-dir "$dir" --output-on-failure -j "${ctest_jobs:-$jobs}" --timeout 300 "$@" 2>&1 |
    tee "$log"
  local rc=${PIPESTATUS[0]}
  set -e
  local line pass fail totalc skipped
  line="$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1 || true)"
  # A skipped test is not a pass: it is counted and named in the summary.
  skipped="$(grep -cE '^[[:space:]]+[0-9]+ - .* \((Skipped|Disabled)\)$' "$log" || true)"
  if [ "$skipped" -gt 0 ]; then
    skipped_names+=("$dir: $(grep -E '^[[:space:]]+[0-9]+ - .* \((Skipped|Disabled)\)$' "$log" |
      sed -E 's/^[[:space:]]+[0-9]+ - //' | paste -sd, -)")
  fi
  rm -f "$log"
  if [ -z "$line" ]; then
    echo "test.sh: ctest in $dir printed no summary" >&2
    total_fail=$((total_fail + 1))
    summary+=("$dir: no summary (rc=$rc)")
    return
  fi
  fail="$(echo "$line" | sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/')"
  totalc="$(echo "$line" | sed -E 's/.* failed out of ([0-9]+).*/\1/')"
  pass=$((totalc - fail - skipped))
  total_pass=$((total_pass + pass))
  total_fail=$((total_fail + fail))
  total_skipped=$((total_skipped + skipped))
  summary+=("$dir: $pass passed, $fail failed, $skipped skipped")
  if [ "$totalc" -eq 0 ]; then
    echo "test.sh: ctest in $dir ran no test" >&2
    total_fail=$((total_fail + 1))
  fi
  if [ "$rc" -ne 0 ] && [ "$fail" -eq 0 ]; then total_fail=$((total_fail + 1)); fi
}

configure() {
  local dir="$1"; shift
  cmake -S . -B "$dir" -G Ninja "$@" > "$dir.configure.log" 2>&1 || {
    cat "$dir.configure.log"; echo "test.sh: cmake configure of $dir failed" >&2; exit 1; }
}

# The browser test drives Debian's Chromium with playwright-core from npm (no browser download).
if [ ! -d tests/browser/node_modules/playwright-core ]; then
  step "npm ci (tests/browser: playwright-core)"
  (cd tests/browser && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
fi

# As root, the package test (tests/packaging/deb_test.sh) must really install the .deb with dpkg.
if [ "$(id -u)" -eq 0 ]; then export GPUSTREAM_DEB_TEST_REQUIRE_INSTALL=1; fi

step "normal build (build/)"
# The GoogleTest suites run in the sanitizer build (step 3); --quick has no step 3, so it runs
# them here.
suites=OFF
if [ "$quick" -eq 1 ]; then suites=ON; fi
# -g1 (line tables: what perf and a backtrace need) instead of -g: full debug information of
# the Asio/Beast code is most of its compile time (transport/src/server/ws_session.cpp: 88 CPU s
# with -g, 54 with -g1). The libraries and the CLI compile in batches (GPUSTREAM_UNITY_BUILD);
# scripts/lint.sh gives clang-tidy each file of a batch on its own.
configure build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUSTREAM_TEST_SUITES=$suites \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
  -DGPUSTREAM_UNITY_BUILD=ON
cmake --build build -j "$jobs"
if [ "$quick" -eq 0 ]; then
  # The instrumented trees compile in the background, at the lowest priority (SCHED_IDLE),
  # while build/'s tests and the lint run: those tests mostly wait (servers, NATS, Prometheus,
  # Chromium, Python: 128 CPU s in about 190 s), so the compiles take the idle cores and the
  # tests keep the CPU whenever they want it. Each tree logs to <tree>.build.log, its exit status
  # to <tree>.build.rc; the run waits for all three before the sanitizer tests.
  #  - build-asan/: AddressSanitizer + UndefinedBehaviorSanitizer, every test (the GoogleTest
  #    suites are compiled once, here, not in build/ too). -g1: line tables only (what a report
  #    needs for file:line). Unity batches (a report still names the original file and line).
  #  - build-tsan/: ThreadSanitizer, the channel and scheduler suites and the fleet view's NATS
  #    event loop (target gpustream_tsan_tests).
  #  - build-fuzz/: the libFuzzer targets (clang), linked with build/'s static libraries, which
  #    are built already (--no-normal-build: the fuzz build must not run ninja in build/ while
  #    its tests use it).
  rm -f build-asan.build.rc build-tsan.build.rc build-fuzz.build.rc
  build_asan() {
    cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug \
      -DGPUSTREAM_SANITIZE=address,undefined -DCMAKE_CXX_FLAGS_DEBUG=-g1 \
      -DCMAKE_C_FLAGS_DEBUG=-g1 -DGPUSTREAM_USE_PCH=ON -DGPUSTREAM_UNITY_BUILD=ON \
      -DGPUSTREAM_BUILD_BENCHMARKS=OFF -DGPUSTREAM_BUILD_EXAMPLES=OFF &&
      cmake --build build-asan -j "$jobs"
  }
  build_tsan() {
    cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DGPUSTREAM_SANITIZE=thread -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
      -DGPUSTREAM_USE_PCH=ON -DGPUSTREAM_UNITY_BUILD=ON -DGPUSTREAM_BUILD_BENCHMARKS=OFF \
      -DGPUSTREAM_BUILD_EXAMPLES=OFF &&
      cmake --build build-tsan -j "$jobs" --target gpustream_tsan_tests
  }
  build_fuzz() {
    scripts/fuzz.sh --build-only --no-normal-build --build-dir build --fuzz-dir build-fuzz
  }
  # Its own process group (job control on for this one job), so that the run stopping early
  # (a failed step, Ctrl-C) stops every compile it started rather than leaving them running.
  set -m
  (
    # SCHED_IDLE: the compiles run only on a core nothing else wants, so the tests with timing
    # bounds (the soak, the slow readers, the hostile fleet) keep the machine as they had it;
    # nice 19 where the scheduler class cannot be set.
    chrt --idle -p 0 "$BASHPID" 2> /dev/null || renice -n 19 -p "$BASHPID" > /dev/null
    for tree in build-asan build-tsan build-fuzz; do
      rc=0
      "build_${tree#build-}" > "$tree.build.log" 2>&1 < /dev/null || rc=$?
      echo "$rc" > "$tree.build.rc"
    done
  ) &
  instrumented_builds=$!
  set +m
  trap 'kill -- "-$instrumented_builds" 2> /dev/null || true' EXIT
  trap 'exit 130' INT TERM
  step "sanitizer and fuzz trees: building in the background (SCHED_IDLE; build-*.build.log)"
fi

step "tests (build/)"
# Three at a time per core: these tests mostly wait (servers, NATS, Prometheus, Chromium,
# Python: 128 CPU s in 399 s run one by one); the few that compile take one core, one at a
# time (their RESOURCE_LOCK, tests/install/CMakeLists.txt).
ctest_jobs=$((jobs * 3)) run_ctest build

# Every C++ file of the project is clang-format clean, whole files (scripts/lint.sh --all
# --format-only: milliseconds a file); a file that is not fails the run.
step "format: clang-format --dry-run --Werror on every C++ file"
if scripts/lint.sh --all --format-only; then
  summary+=("format: every C++ file is clang-format clean")
else
  total_fail=$((total_fail + 1))
  summary+=("format: files not clang-format clean (see above; clang-format -i FILE)")
fi

# clang-format on the changed lines and clang-tidy on the changed files since .ci/lint-base,
# the commit up to which the tree was last linted (scripts/lint.sh; moved forward when a
# session's changes are clean).
step "lint: clang-format + clang-tidy on what changed since $(cat .ci/lint-base)"
lint_base="$(cat .ci/lint-base)"
if ! git cat-file -e "$lint_base^{commit}" 2>/dev/null; then
  echo "test.sh: lint base $lint_base is not in this clone (shallow?): linting the last commit" >&2
  lint_base="HEAD~1"
fi
if ! git cat-file -e "$lint_base^{commit}" 2>/dev/null; then
  echo "test.sh: LINT SKIPPED: this clone has neither the lint base nor HEAD~1 (git fetch --unshallow)" >&2
  total_skipped=$((total_skipped + 1))
  skipped_names+=("lint: the clone has no history to diff against")
elif BUILD_DIR=build scripts/lint.sh "$lint_base"; then
  summary+=("lint: clean since $lint_base")
else
  total_fail=$((total_fail + 1))
  summary+=("lint: findings since $lint_base (see above; scripts/lint.sh --fix for the format)")
fi

if [ "$quick" -eq 0 ]; then
  step "waiting for the background builds (build-asan/, build-tsan/, build-fuzz/)"
  wait "$instrumented_builds" || true
  # built TREE: 0 when TREE built; otherwise its log is shown.
  built() {
    local rc
    rc="$(cat "$1.build.rc" 2>/dev/null || echo "not run")"
    if [ "$rc" = 0 ]; then
      tail -n 2 "$1.build.log"
      return 0
    fi
    cat "$1.build.log" 2>/dev/null || true
    echo "test.sh: the build of $1/ failed (exit status $rc; its log is above and in $1.build.log)" >&2
    return 1
  }
  echo "-- build-asan/"; built build-asan || exit 1
  echo "-- build-tsan/"; built build-tsan || exit 1

  step "tests under ASan+UBSan (build-asan/)"
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1" \
    run_ctest build-asan -LE no_sanitizer

  step "channel, scheduler and NATS event loop tests under TSan (build-tsan/)"
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" run_ctest build-tsan -L tsan

  step "fuzz targets, 12 s each (build-fuzz/)"
  echo "-- build-fuzz/"
  if ! built build-fuzz; then
    total_fail=$((total_fail + 1))
    summary+=("build-fuzz: the fuzz targets did not build (see above)")
  elif scripts/fuzz.sh --no-build --seconds 12 --parallel "$jobs" --build-dir build \
      --fuzz-dir build-fuzz; then
    summary+=("build-fuzz: every fuzz target ran 12 s without a crash")
  else
    total_fail=$((total_fail + 1))
    summary+=("build-fuzz: a fuzz target crashed (see above)")
  fi
fi

step "summary ($(( $(date +%s) - start ))s)"
for s in "${summary[@]}"; do echo "  $s"; done
if [ "$total_skipped" -gt 0 ]; then
  echo "  skipped (each says why in its output; see tests/CMakeLists.txt for the ones run again"
  echo "  as an unprivileged user):"
  for s in "${skipped_names[@]}"; do echo "    $s"; done
fi
echo "$total_pass passed, $total_fail failed, $total_skipped skipped"
[ "$total_fail" -eq 0 ]
