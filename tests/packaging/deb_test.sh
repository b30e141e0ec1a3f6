#!/usr/bin/env bash
# The Debian package, end to end (ctest packaging.deb; docs/operations.md):
#   1. cpack builds gpustream_<version>_<arch>.deb from the build tree;
#   2. its control data: Depends are Debian package names from dpkg-shlibdeps, the maintainer
#      scripts are there, the payload holds the CLI, the unit, the headers, the CMake package,
#      the pkg-config file and the docs, and no file outside /usr (the config is copied by
#      postinst);
#   3. `systemd-analyze verify` on the unit as installed, with ExecReload and LoadCredential;
#   4. as root, when no gpustream package is installed already: `dpkg -i`, `gpustream list`
#      from /usr/bin, /etc/gpustream/config.json created, pkg-config finds the installed version, `gpustream serve --config` with that
#      file answering /api/v1/snapshot, `dpkg -r` (binary gone, config kept), `dpkg -P` (config
#      gone). Otherwise (not root, or a gpustream package the test must not touch): the package
#      is unpacked with dpkg-deb into a scratch root and its binary run from there; the output
#      says which, and the run fails when the caller asked for the real install
#      (GPUSTREAM_DEB_TEST_REQUIRE_INSTALL=1, which scripts/test.sh sets as root).
# Usage: deb_test.sh BUILD_DIR
set -euo pipefail

build="$(cd "$1" && pwd)"
work="$(mktemp -d)"
installed_by_us=0
cleanup() {
  if [ "$installed_by_us" -eq 1 ]; then dpkg -P gpustream > /dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "deb_test: FAIL: $*" >&2; exit 1; }

# 1. Build the package.
(cd "$build" && cpack -G DEB -B "$work/out" > "$work/cpack.log" 2>&1) ||
  { cat "$work/cpack.log"; fail "cpack -G DEB failed"; }
deb="$(find "$work/out" -maxdepth 1 -name "gpustream_*.deb" | head -1)"
[ -n "$deb" ] || { cat "$work/cpack.log"; fail "cpack made no gpustream_*.deb"; }
echo "deb_test: built $(basename "$deb") ($(stat -c %s "$deb") bytes)"

# 2. Control data and payload.
depends="$(dpkg-deb -f "$deb" Depends)"
echo "deb_test: Depends: $depends"
[ -n "$depends" ] || fail "no Depends (dpkg-shlibdeps did not run?)"
# Every dependency is a Debian package name with an optional version: name (op version).
IFS=',' read -r -a deps <<< "$depends"
for d in "${deps[@]}"; do
  d="$(echo "$d" | sed -E 's/^ +//; s/ +$//; s/ \(.*\)$//')"
  for alt in ${d//|/ }; do
    dpkg-query -W "$alt" > /dev/null 2>&1 ||
      fail "dependency '$alt' is not an installed Debian package here"
  done
done
case ",$depends," in *libc6*) ;; *) fail "Depends lacks libc6: $depends" ;; esac
dpkg-deb -I "$deb" postinst > /dev/null || fail "no postinst"
dpkg-deb -I "$deb" prerm > /dev/null || fail "no prerm"
dpkg-deb -I "$deb" postrm > /dev/null || fail "no postrm"
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' > "$work/files"
for f in /usr/bin/gpustream /usr/lib/systemd/system/gpustream.service \
         /usr/share/gpustream/config.json /usr/include/gpustream/telemetry.hpp \
         /usr/share/doc/gpustream/README.md /usr/share/doc/gpustream/operations.md; do
  grep -qx "$f" "$work/files" || fail "$f is not in the package"
done
grep -q '^/usr/lib/.*/cmake/gpustream/gpustreamConfig.cmake$\|^/usr/lib/cmake/gpustream/gpustreamConfig.cmake$' \
  "$work/files" || fail "the CMake package is not in the package"
grep -q '^/usr/lib/\(.*/\)\?pkgconfig/gpustream.pc$' "$work/files" || fail "gpustream.pc is not in the package"
grep -q '^/usr/include/gpustream/version.hpp$' "$work/files" || fail "gpustream/version.hpp is not in the package"
if grep -v '^/usr\(/\|$\)' "$work/files" | grep -v '^/$' | grep -q .; then
  grep -v '^/usr\(/\|$\)' "$work/files" | grep -v '^/$' >&2
  fail "files outside /usr"
fi

# 3. The unit, as installed (its ExecStart must exist for verify: unpack first).
mkdir -p "$work/root"
dpkg-deb -x "$deb" "$work/root"
if command -v systemd-analyze > /dev/null; then
  # verify resolves ExecStart on the real root: point it at the unpacked binary.
  sed "s|/usr/bin/gpustream|$work/root/usr/bin/gpustream|" \
    "$work/root/usr/lib/systemd/system/gpustream.service" > "$work/gpustream.service"
  if ! systemd-analyze verify "$work/gpustream.service" > "$work/verify.log" 2>&1 ||
     grep -q . "$work/verify.log"; then
    cat "$work/verify.log" >&2
    fail "systemd-analyze verify reported problems"
  fi
  echo "deb_test: systemd-analyze verify: clean"
  grep -qx 'ExecReload=/bin/kill -HUP $MAINPID' "$work/gpustream.service" ||
    fail "the unit has no ExecReload (SIGHUP)"
  grep -qx 'LoadCredential=gpustream:/etc/gpustream/credentials' "$work/gpustream.service" ||
    fail "the unit has no LoadCredential= for /etc/gpustream/credentials"
else
  fail "systemd-analyze is missing (Debian package systemd)"
fi

# The shipped Kubernetes manifest (examples/kubernetes/daemonset.yaml): valid YAML, host PID
# namespace and CAP_SYS_PTRACE (what attribution needs), and every flag it passes to serve is one
# the packaged binary knows.
manifest="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/examples/kubernetes/daemonset.yaml"
"$work/root/usr/bin/gpustream" serve --help > "$work/serve-help.txt"
/usr/bin/python3 - "$manifest" "$work/serve-help.txt" <<'PY' || fail "examples/kubernetes/daemonset.yaml"
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
help_text = open(sys.argv[2]).read()
spec = d["spec"]["template"]["spec"]
assert d["kind"] == "DaemonSet" and spec["hostPID"] is True, "not a hostPID DaemonSet"
c = spec["containers"][0]
assert "SYS_PTRACE" in c["securityContext"]["capabilities"]["add"], "no SYS_PTRACE"
args = c["args"]
assert args[0] == "serve", args
for a in args[1:]:
    if a.startswith("--"):
        assert a in help_text, f"gpustream serve has no flag {a}"
print("deb_test: the Kubernetes manifest's serve flags are the package's")
PY

serve_check() {  # serve_check BINARY CONFIG: serve answers /api/v1/snapshot, then stops
  local bin="$1" cfg="$2" port
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  "$bin" serve --config "$cfg" --listen "127.0.0.1:$port" --simulate 1 --probes simulated \
    > "$work/serve.log" 2>&1 &
  local pid=$! ok=0
  for _ in $(seq 1 100); do
    if python3 - "$port" <<'PY' 2> /dev/null; then ok=1; break; fi
import json, sys, urllib.request
doc = json.load(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/api/v1/snapshot", timeout=1))
assert any(s.get("devices") for s in doc.get("snapshots", doc if isinstance(doc, list) else [])), doc
PY
    sleep 0.1
  done
  kill -TERM "$pid" 2> /dev/null || true
  wait "$pid" || true
  [ "$ok" -eq 1 ] || { cat "$work/serve.log" >&2; fail "$bin serve --config $cfg did not serve a snapshot"; }
}

# 4. Install for real, or run from the unpacked tree.
if [ "$(id -u)" -eq 0 ] && ! dpkg-query -W -f='${Status}' gpustream 2> /dev/null | grep -q installed &&
   [ ! -e /usr/bin/gpustream ]; then
  dpkg -i "$deb" > "$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i failed"; }
  installed_by_us=1
  echo "deb_test: dpkg -i: installed"
  /usr/bin/gpustream list --probes host,simulated --simulate 1 > "$work/list.out" ||
    fail "gpustream list failed"
  grep -q simulated "$work/list.out" || { cat "$work/list.out"; fail "gpustream list shows no simulated probe"; }
  [ -f /etc/gpustream/config.json ] || fail "postinst did not create /etc/gpustream/config.json"
  [ "$(stat -c %a /etc/gpustream/credentials)" = 700 ] ||
    fail "postinst did not create /etc/gpustream/credentials (mode 700)"
  version="$(dpkg-deb -f "$deb" Version)"
  [ "$(pkg-config --modversion gpustream)" = "$version" ] ||
    fail "pkg-config --modversion gpustream is not the package's $version"
  serve_check /usr/bin/gpustream /etc/gpustream/config.json
  echo "deb_test: gpustream list and serve --config /etc/gpustream/config.json: ok"
  if grep -q '^/usr/lib/python3/dist-packages/gpustream/__init__.py$' "$work/files"; then
    where="$(cd / && env -u PYTHONPATH /usr/bin/python3 -c 'import gpustream; print(gpustream.__file__)')" ||
      fail "the packaged Python module does not import"
    [ "$where" = /usr/lib/python3/dist-packages/gpustream/__init__.py ] ||
      fail "import gpustream found $where, not the package's"
    echo "deb_test: /usr/bin/python3 imports the packaged module"
  fi
  dpkg -r gpustream > "$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -r failed"; }
  [ ! -e /usr/bin/gpustream ] || fail "/usr/bin/gpustream is still there after dpkg -r"
  [ ! -e /usr/lib/systemd/system/gpustream.service ] || fail "the unit is still there after dpkg -r"
  [ -f /etc/gpustream/config.json ] || fail "dpkg -r removed the administrator's config"
  dpkg -P gpustream > "$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -P failed"; }
  installed_by_us=0
  [ ! -e /etc/gpustream ] || fail "dpkg -P left /etc/gpustream"
  leftovers="$(dpkg -L gpustream 2> /dev/null || true)"
  [ -z "$leftovers" ] || fail "dpkg still lists files of gpustream: $leftovers"
  echo "deb_test: dpkg -r and dpkg -P: clean"
else
  [ "${GPUSTREAM_DEB_TEST_REQUIRE_INSTALL:-0}" = "1" ] &&
    fail "the real install was required but is not possible here (not root, or a gpustream package or /usr/bin/gpustream is already installed: dpkg -P gpustream)"
  echo "deb_test: not installing (not root, or a gpustream is already installed): running the unpacked binary"
  "$work/root/usr/bin/gpustream" list --probes host,simulated --simulate 1 > "$work/list.out" ||
    fail "the unpacked gpustream list failed"
  grep -q simulated "$work/list.out" || fail "gpustream list shows no simulated probe"
  serve_check "$work/root/usr/bin/gpustream" "$work/root/usr/share/gpustream/config.json"
fi
echo "deb_test: PASS"
