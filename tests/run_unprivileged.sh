#!/bin/sh
# tests/run_unprivileged.sh COMMAND [ARGS...] — runs a test as an unprivileged user, so that
# permission-denied paths can be tested: root (CAP_DAC_OVERRIDE) reads a mode-000 file anyway.
# As root it switches to nobody/nogroup with no capabilities (setpriv, util-linux); as any other
# user the command already runs unprivileged and is run as is.
set -eu
if [ "$(id -u)" -eq 0 ]; then
  exec setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=-all -- "$@"
fi
exec "$@"
