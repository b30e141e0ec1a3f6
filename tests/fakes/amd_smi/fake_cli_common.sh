# Sourced by fake_amd_smi.sh and fake_rocm_smi.sh: option parsing and the misbehaviours both
# fakes share. The caller sets `tool` (its name in messages), sources this file (which consumes
# the --fake-* options), then calls fake_run.
#   --fake-data DIR   folder of recorded outputs (default: $GPUSTREAM_FAKE_AMD_DATA)
#   --fake-mode MODE  normal | hang | crash | garbage | partial | empty | fail (plus the
#                     caller's own modes). garbage, partial and fail vary from run to run (a pid
#                     in the text, a cut at a pid-dependent byte), as real tools' failures do.
data="${GPUSTREAM_FAKE_AMD_DATA:-}"
mode="${GPUSTREAM_FAKE_AMD_MODE:-normal}"
while [ $# -gt 0 ]; do
  case "$1" in
    --fake-data) data="$2"; shift 2 ;;
    --fake-mode) mode="$2"; shift 2 ;;
    *) break ;;
  esac
done

# fake_run FILE OWN_MODE OWN_LINE: misbehaves as asked, or prints OWN_LINE first when the mode
# is the caller's own OWN_MODE, then prints FILE (the recorded output); a missing FILE fails
# like a tool given an unknown subcommand.
fake_run() {
  file="$1"
  case "$mode" in
    hang) exec sleep 600 ;;
    crash) kill -SEGV $$ ;;
    garbage) echo "Traceback (most recent call last): ~~ not json ~~ (pid $$)"; exit 0 ;;
    partial) head -c $((40 + $$ % 40)) "$file"; exit 0 ;;
    empty) exit 0 ;;
    fail) echo "$tool: error: no such device (pid $$)" >&2; exit 2 ;;
    "$2") echo "$3" ;;
  esac
  if [ ! -f "$file" ]; then
    echo "$tool: no recorded output '$file'" >&2
    exit 2
  fi
  cat "$file"
}
