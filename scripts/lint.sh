#!/usr/bin/env bash
# Runs clang-format and clang-tidy (.clang-format, .clang-tidy) on what a change touched.
#
#   scripts/lint.sh                 # the lines/files changed since the merge base with main,
#                                   # plus uncommitted changes
#   scripts/lint.sh REV             # ... since REV (e.g. HEAD~3, origin/main)
#   scripts/lint.sh REV1..REV2      # the files changed in that commit range
#   scripts/lint.sh --all           # every C++ file of the project (whole files)
#   scripts/lint.sh --fix [REV]     # rewrite the changed lines with clang-format instead of
#                                   # reporting them (clang-tidy still only reports)
#   --format-only / --tidy-only     # one of the two
#
# clang-format checks only the changed lines (clang-format-diff), so touching a file never
# obliges anyone to reformat code they did not write; --all checks whole files. clang-tidy
# runs on the changed .cpp files (headers through them), in parallel, with the compile database
# of $BUILD_DIR (default: build; configure it first), minus GCC's precompiled-header flags,
# which clang cannot read. Exit status: 0 clean, 1 findings, 2 usage or missing tools.
# Speed: clang-format is milliseconds; clang-tidy costs about a compile per changed .cpp.
set -euo pipefail

cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
build_dir="${BUILD_DIR:-build}"
fix=0 all=0 do_format=1 do_tidy=1 rev=""
for a in "$@"; do
  case "$a" in
    --all) all=1 ;;
    --fix) fix=1 ;;
    --format-only) do_tidy=0 ;;
    --tidy-only) do_format=0 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "lint.sh: unknown option $a" >&2; exit 2 ;;
    *) rev="$a" ;;
  esac
done

find_tool() {  # the unversioned name, else the Debian 12 versioned one
  command -v "$1" 2>/dev/null || command -v "$1-14" 2>/dev/null || true
}
clang_format=$(find_tool clang-format)
clang_format_diff=$(find_tool clang-format-diff)
clang_tidy=$(find_tool clang-tidy)
if (( do_format )) && [[ -z "$clang_format" || ( $all -eq 0 && -z "$clang_format_diff" ) ]]; then
  echo "lint.sh: clang-format (and clang-format-diff) not found: apt-get install clang-format" >&2
  exit 2
fi
if (( do_tidy )) && [[ -z "$clang_tidy" ]]; then
  echo "lint.sh: clang-tidy not found: apt-get install clang-tidy" >&2
  exit 2
fi

cpp_pattern='\.(cpp|hpp|h|cc)$'
dirs=(sdk probes transport benchmark cli python examples tests bench fuzz)
if (( all )); then
  mapfile -t files < <(git ls-files "${dirs[@]}" | grep -E "$cpp_pattern" || true)
  diff_args=()
else
  if [[ -z "$rev" ]]; then
    # The merge base against the working tree: the branch's commits and uncommitted changes.
    rev=$(git merge-base HEAD main 2>/dev/null || git rev-parse HEAD~1)
  fi
  diff_args=("$rev")  # REV: against the working tree; A..B: that range
  mapfile -t files < <(git diff --name-only --diff-filter=ACMR "${diff_args[@]}" -- "${dirs[@]}" |
                       grep -E "$cpp_pattern" || true)
fi
# Generated or third-party files are not ours to format.
mapfile -t files < <(printf '%s\n' "${files[@]}" | grep -v -E '^$|/fakes/.*\.c$' || true)
if (( ${#files[@]} == 0 )); then
  echo "lint.sh: no C++ files changed"
  exit 0
fi

status=0
if (( do_format )); then
  if (( all )); then
    if (( fix )); then
      "$clang_format" -i "${files[@]}"
    elif ! "$clang_format" --dry-run -Werror "${files[@]}"; then
      status=1
    fi
  else
    # Only the changed lines of the changed files. The pathspec is the folders, not the file
    # list: a renamed file's old path must be in it for git to see a rename (an unchanged
    # moved file has no changed lines) rather than a new file (every line "changed").
    fmt_args=(-p1 -binary "$clang_format" -iregex '.*\.(cpp|hpp|h|cc)')
    (( fix )) && fmt_args+=(-i)
    out=$(git diff -U0 -M --no-color "${diff_args[@]}" -- "${dirs[@]}" | "$clang_format_diff" "${fmt_args[@]}" || true)
    if [[ -n "$out" ]]; then
      printf '%s\n' "$out"
      (( fix )) || { echo "lint.sh: clang-format wants the changes above (scripts/lint.sh --fix)"; status=1; }
    fi
  fi
fi

if (( do_tidy )); then
  if [[ ! -f "$build_dir/compile_commands.json" ]]; then
    echo "lint.sh: $build_dir/compile_commands.json missing: configure first (cmake -S . -B $build_dir)" >&2
    exit 2
  fi
  db=$(mktemp -d)
  trap 'rm -rf "$db"' EXIT
  # GCC's precompiled headers are unreadable for clang: drop them (the headers are included
  # by the sources anyway). A unity build (GPUSTREAM_UNITY_BUILD, which scripts/test.sh uses)
  # lists only its batches (Unity/unity_N_cxx.cxx); each source of a batch gets the batch's
  # command back, so clang-tidy checks every file alone, as its own translation unit.
  python3 - "$build_dir/compile_commands.json" "$db/compile_commands.json" <<'PY'
import json, os, re, sys
entries = json.load(open(sys.argv[1]))
out = []
for e in entries:
    cmd = e.get("command", "")
    cmd = re.sub(r"-include\s+\S*cmake_pch\.hxx", "", cmd)
    cmd = cmd.replace("-Winvalid-pch", "")
    e["command"] = cmd
    batch = e["file"]
    if not re.search(r"/Unity/unity_\d+_c(xx)?\.c(xx)?$", batch):
        out.append(e)
        continue
    path = batch if os.path.isabs(batch) else os.path.join(e["directory"], batch)
    for line in open(path):
        m = re.match(r'\s*#include\s+"([^"]+)"', line)
        if m:
            out.append({"directory": e["directory"], "file": m.group(1),
                        "command": cmd.replace(batch, m.group(1))})
json.dump(out, open(sys.argv[2], "w"))
PY
  mapfile -t sources < <(printf '%s\n' "${files[@]}" | grep -E '\.(cpp|cc)$' |
                         grep -v -E '^(tests|bench|examples)/' || true)
  if (( ${#sources[@]} > 0 )); then
    jobs=$(nproc 2>/dev/null || echo 2)
    if ! printf '%s\n' "${sources[@]}" |
        xargs -P "$jobs" -n 1 "$clang_tidy" -p "$db" --quiet \
          --extra-arg=-Wno-unknown-warning-option --extra-arg=-Wno-unused-command-line-argument; then
      status=1
    fi
  fi
fi
exit $status
