#!/bin/sh
# Fake `amd-smi`: prints the recorded output <data>/<subcommand>.json for `amd-smi <sub> ...`.
#   --fake-data DIR   folder of recorded outputs (default: $GPUSTREAM_FAKE_AMD_DATA)
#   --fake-mode MODE  normal | hang | crash | garbage | partial | empty | fail | text_prefix
data="${GPUSTREAM_FAKE_AMD_DATA:-}"
mode="${GPUSTREAM_FAKE_AMD_MODE:-normal}"
while [ $# -gt 0 ]; do
  case "$1" in
    --fake-data) data="$2"; shift 2 ;;
    --fake-mode) mode="$2"; shift 2 ;;
    *) break ;;
  esac
done
sub="${1:-}"
file="$data/$sub.json"
case "$mode" in
  hang) exec sleep 600 ;;
  crash) kill -SEGV $$ ;;
  garbage) echo "Traceback (most recent call last): ~~ not json ~~"; exit 0 ;;
  partial) head -c 60 "$file"; exit 0 ;;
  empty) exit 0 ;;
  fail) echo "amd-smi: error: no such device" >&2; exit 2 ;;
  text_prefix) echo "'CTRL' + 'C' to stop watching output:" ;;
esac
if [ ! -f "$file" ]; then
  echo "amd-smi: unknown subcommand '$sub'" >&2
  exit 2
fi
cat "$file"
