#!/bin/sh
# Fake `rocm-smi`: prints the recorded output <data>/rocm-smi.json whatever the flags.
# Options and misbehaviours: fake_cli_common.sh; own mode: warning (a non-JSON warning line
# before the JSON).
tool=rocm-smi
. "$(dirname "$0")/fake_cli_common.sh"
fake_run "$data/rocm-smi.json" warning "WARNING: One or more commands failed"
