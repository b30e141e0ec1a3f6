#!/bin/sh
# Fake `rocm-smi`: prints the recorded output <data>/rocm-smi.json whatever the flags.
#   --fake-data DIR   folder of recorded outputs (default: $GPUSTREAM_FAKE_AMD_DATA)
#   --fake-mode MODE  normal | hang | crash | garbage | partial | empty | fail | warning
data="${GPUSTREAM_FAKE_AMD_DATA:-}"
mode="${GPUSTREAM_FAKE_AMD_MODE:-normal}"
while [ $# -gt 0 ]; do
  case "$1" in
    --fake-data) data="$2"; shift 2 ;;
    --fake-mode) mode="$2"; shift 2 ;;
    *) break ;;
  esac
done
file="$data/rocm-smi.json"
case "$mode" in
  hang) exec sleep 600 ;;
  crash) kill -SEGV $$ ;;
  garbage) echo "ERROR: GPU[0] : something went wrong"; exit 0 ;;
  partial) head -c 40 "$file"; exit 0 ;;
  empty) exit 0 ;;
  fail) echo "rocm-smi: error" >&2; exit 1 ;;
  warning) echo "WARNING: One or more commands failed" ;;
esac
cat "$file"
