#!/bin/sh
# Fake `amd-smi`: prints the recorded output <data>/<subcommand>.json for `amd-smi <sub> ...`.
# Options and misbehaviours: fake_cli_common.sh; own mode: text_prefix (watch-mode text line
# before the JSON).
tool=amd-smi
. "$(dirname "$0")/fake_cli_common.sh"
fake_run "$data/${1:-}.json" text_prefix "'CTRL' + 'C' to stop watching output:"
