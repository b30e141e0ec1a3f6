#!/bin/sh
# tests/run_unprivileged.sh PROGRAM [ARGS...] — runs a test program as an unprivileged user, so
# that permission-denied paths can be tested: root (CAP_DAC_OVERRIDE) reads a mode-000 file
# anyway. As root it switches to nobody/nogroup with no capabilities (setpriv, util-linux); as any
# other user the program already runs unprivileged and is run as is.
# When nobody cannot reach PROGRAM (a checkout under a private home, say), a copy of it in a
# fresh world-readable temporary folder is run instead.
set -eu
if [ "$(id -u)" -ne 0 ]; then
  exec "$@"
fi
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=-all -- "$@"; }
program="$1"
shift
if as_nobody test -x "$program"; then
  exec setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=-all -- "$program" "$@"
fi
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
chmod 755 "$dir"
cp "$program" "$dir/"
chmod 755 "$dir/$(basename "$program")"
cd "$dir"
as_nobody "$dir/$(basename "$program")" "$@"
