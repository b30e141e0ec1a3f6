#!/usr/bin/env bash
# The Debian packages, end to end (ctest packaging.deb; docs/operations.md):
#   1. cpack builds gpustream_<version>_<arch>.deb (daemon + CLI, unit, config, alert rules,
#      docs), libgpustream-dev_... (headers, static libraries, CMake package, pkg-config) and,
#      when the Python module is built, python3-gpustream_... from the build tree;
#   2. their control data: names, sections, Depends (Debian package names: dpkg-shlibdeps for
#      the binaries, the -dev packages for libgpustream-dev, python3), Replaces/Breaks of the
#      single package before the split, maintainer scripts on gpustream only; each payload holds
#      its own files and nothing of the others', nothing outside /usr;
#   3. `systemd-analyze verify` on the unit as installed (ExecReload, LoadCredential);
#   4. the maintainer scripts' paths, run from the package with a fake systemctl and
#      deb-systemd-invoke on PATH and scratch /etc and /run/systemd: a first install starts
#      nothing (unless enabled), an upgrade try-restarts (deb-systemd-invoke when present), prerm
#      upgrade leaves the service running, prerm remove stops and disables it, no systemd: no
#      call;
#   5. as root, when no gpustream package is installed already: `dpkg -i` of the three,
#      `gpustream list` from /usr/bin, /etc/gpustream/config.json and credentials/ created,
#      pkg-config finds the installed version, `gpustream serve --config` with that file answering
#      /api/v1/snapshot, python3 imports the packaged module, `dpkg -r` (binary gone, config
#      kept), `dpkg -P` (config gone). Otherwise (not root, or a gpustream package the test must
#      not touch): the package is unpacked with dpkg-deb into a scratch root and its binary run
#      from there; the output says which, and the run fails when the caller asked for the real
#      install (GPUSTREAM_DEB_TEST_REQUIRE_INSTALL=1, which scripts/test.sh sets as root).
# Usage: deb_test.sh BUILD_DIR
set -euo pipefail

build="$(cd "$1" && pwd)"
work="$(mktemp -d)"
installed_by_us=0
cleanup() {
  if [ "$installed_by_us" -eq 1 ]; then
    dpkg -P python3-gpustream libgpustream-dev gpustream > /dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "deb_test: FAIL: $*" >&2; exit 1; }

# 1. Build the packages.
(cd "$build" && cpack -G DEB -B "$work/out" > "$work/cpack.log" 2>&1) ||
  { cat "$work/cpack.log"; fail "cpack -G DEB failed"; }
find_deb() { find "$work/out" -maxdepth 1 -name "$1_*.deb" | head -1; }
deb="$(find_deb gpustream)"
dev_deb="$(find_deb libgpustream-dev)"
py_deb="$(find_deb python3-gpustream)"
[ -n "$deb" ] || { cat "$work/cpack.log"; fail "cpack made no gpustream_*.deb"; }
[ -n "$dev_deb" ] || { cat "$work/cpack.log"; fail "cpack made no libgpustream-dev_*.deb"; }
with_python=0
if grep -q '^GPUSTREAM_HAS_PYTHON:INTERNAL=\(ON\|TRUE\|1\)$' "$build/CMakeCache.txt" 2> /dev/null ||
   find "$build/python" -maxdepth 2 -name '_gpustream*.so' 2> /dev/null | grep -q .; then
  with_python=1
  [ -n "$py_deb" ] || { cat "$work/cpack.log"; fail "the Python module is built but cpack made no python3-gpustream_*.deb"; }
fi
for d in "$deb" "$dev_deb" $py_deb; do
  echo "deb_test: built $(basename "$d") ($(stat -c %s "$d") bytes)"
done
debs=("$deb" "$dev_deb")
if [ -n "$py_deb" ]; then debs+=("$py_deb"); fi

# 2. Control data and payloads.
field() { dpkg-deb -f "$1" "$2"; }
check_depends() {  # check_depends DEB: every dependency is a Debian package name installed here
  local depends d alt
  depends="$(field "$1" Depends)"
  [ -n "$depends" ] || fail "$(basename "$1"): no Depends"
  IFS=',' read -r -a deps <<< "$depends"
  for d in "${deps[@]}"; do
    d="$(echo "$d" | sed -E 's/^ +//; s/ +$//; s/ \(.*\)$//')"
    for alt in ${d//|/ }; do
      dpkg-query -W "$alt" > /dev/null 2>&1 ||
        fail "$(basename "$1"): dependency '$alt' is not an installed Debian package here"
    done
  done
  echo "deb_test: $(field "$1" Package) Depends: $depends"
}
expect_field() {  # expect_field DEB FIELD VALUE
  [ "$(field "$1" "$2")" = "$3" ] || fail "$(basename "$1"): $2 is '$(field "$1" "$2")', not '$3'"
}
expect_field "$deb" Package gpustream
expect_field "$deb" Section admin
expect_field "$dev_deb" Package libgpustream-dev
expect_field "$dev_deb" Section libdevel
check_depends "$deb"
case ",$(field "$deb" Depends)," in *libc6*) ;; *) fail "gpustream Depends lacks libc6" ;; esac
case ",$(field "$deb" Depends)," in *libdeflate0*) ;; *) fail "gpustream Depends lacks libdeflate0 (the fleet bus's compression)" ;; esac
check_depends "$dev_deb"
case "$(field "$dev_deb" Depends)" in *libboost-json1.81-dev*libspdlog-dev*libdeflate-dev*) ;;
  *) fail "libgpustream-dev does not depend on the -dev packages its headers need" ;; esac
version="$(field "$deb" Version)"
for d in "${debs[@]}"; do
  [ "$(field "$d" Version)" = "$version" ] || fail "$(basename "$d") is not version $version"
done
upstream="${version%-*}"
expect_field "$dev_deb" Replaces "gpustream (<< $upstream-2)"
expect_field "$dev_deb" Breaks "gpustream (<< $upstream-2)"
dpkg-deb -I "$deb" postinst > /dev/null || fail "no postinst in gpustream"
dpkg-deb -I "$deb" prerm > /dev/null || fail "no prerm in gpustream"
dpkg-deb -I "$deb" postrm > /dev/null || fail "no postrm in gpustream"
for d in "$dev_deb" $py_deb; do
  for script in postinst prerm postrm; do
    if dpkg-deb -I "$d" "$script" > /dev/null 2>&1; then fail "$(basename "$d") has a $script"; fi
  done
done
files_of() { dpkg-deb -c "$1" | awk '{print $6}' | sed 's|^\./|/|'; }
files_of "$deb" > "$work/files"
files_of "$dev_deb" > "$work/dev-files"
for f in /usr/bin/gpustream /usr/lib/systemd/system/gpustream.service \
         /usr/share/gpustream/config.json /usr/share/gpustream/prometheus/gpustream.rules.yml \
         /usr/share/doc/gpustream/README.md /usr/share/doc/gpustream/operations.md; do
  grep -qx "$f" "$work/files" || fail "$f is not in gpustream"
done
if grep -q '^/usr/include/\|\.a$\|/cmake/gpustream/\|pkgconfig/\|dist-packages' "$work/files"; then
  grep '^/usr/include/\|\.a$\|/cmake/gpustream/\|pkgconfig/\|dist-packages' "$work/files" >&2
  fail "gpustream holds files of libgpustream-dev or python3-gpustream"
fi
grep -qx /usr/include/gpustream/telemetry.hpp "$work/dev-files" || fail "telemetry.hpp is not in libgpustream-dev"
grep -q '^/usr/include/gpustream/version.hpp$' "$work/dev-files" || fail "gpustream/version.hpp is not in libgpustream-dev"
grep -q '^/usr/lib/.*/cmake/gpustream/gpustreamConfig.cmake$\|^/usr/lib/cmake/gpustream/gpustreamConfig.cmake$' \
  "$work/dev-files" || fail "the CMake package is not in libgpustream-dev"
grep -q '^/usr/lib/\(.*/\)\?pkgconfig/gpustream.pc$' "$work/dev-files" || fail "gpustream.pc is not in libgpustream-dev"
grep -q '^/usr/lib/\(.*/\)\?libgpustream_sdk\.a$' "$work/dev-files" || fail "libgpustream_sdk.a is not in libgpustream-dev"
if grep -q '^/usr/bin/\|systemd\|^/usr/share/gpustream/' "$work/dev-files"; then
  fail "libgpustream-dev holds files of gpustream"
fi
if [ -n "$py_deb" ]; then
  expect_field "$py_deb" Package python3-gpustream
  expect_field "$py_deb" Section python
  check_depends "$py_deb"
  case ",$(field "$py_deb" Depends)," in *python3*) ;; *) fail "python3-gpustream does not depend on python3" ;; esac
  files_of "$py_deb" > "$work/py-files"
  grep -qx /usr/lib/python3/dist-packages/gpustream/__init__.py "$work/py-files" ||
    fail "__init__.py is not in python3-gpustream"
  grep -q '^/usr/lib/python3/dist-packages/gpustream/_gpustream.*\.so$' "$work/py-files" ||
    fail "the extension module is not in python3-gpustream"
  if grep -v '^/usr/lib/python3\(/\|$\)\|^/usr/share/doc/\|^/usr/\?$\|^/usr/lib/\?$\|^/usr/share/\?$\|^/$' "$work/py-files" | grep -q .; then
    grep -v '^/usr/lib/python3\(/\|$\)\|^/usr/share/doc/\|^/usr/\?$\|^/usr/lib/\?$\|^/usr/share/\?$\|^/$' "$work/py-files" >&2
    fail "python3-gpustream holds files outside the module"
  fi
fi
cat "$work/files" "$work/dev-files" > "$work/all-files"
if grep -v '^/usr\(/\|$\)' "$work/all-files" | grep -v '^/$' | grep -q .; then
  grep -v '^/usr\(/\|$\)' "$work/all-files" | grep -v '^/$' >&2
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

# 4. The maintainer scripts' paths, with a fake systemctl and deb-systemd-invoke that log their
# arguments: the scripts as packaged, with /etc/gpustream, /usr/share/gpustream and
# /run/systemd/system moved to scratch folders (the only edit).
dpkg-deb -e "$deb" "$work/control"
fake="$work/fake"
mkdir -p "$fake/bin" "$fake/bin-no-dsi" "$fake/run/systemd/system" "$fake/usr/share/gpustream"
cp "$work/root/usr/share/gpustream/config.json" "$fake/usr/share/gpustream/config.json"
cat > "$fake/bin/systemctl" <<'SH'
#!/bin/sh
echo "systemctl $*" >> "$FAKE_LOG"
if [ "$1" = "--quiet" ] && [ "$2" = "is-enabled" ]; then [ "${FAKE_ENABLED:-0}" = 1 ]; exit $?; fi
exit 0
SH
cat > "$fake/bin/deb-systemd-invoke" <<'SH'
#!/bin/sh
echo "deb-systemd-invoke $*" >> "$FAKE_LOG"
exit 0
SH
cp "$fake/bin/systemctl" "$fake/bin-no-dsi/systemctl"
chmod +x "$fake/bin/systemctl" "$fake/bin/deb-systemd-invoke" "$fake/bin-no-dsi/systemctl"
# The scripts' PATH: the fakes and the few tools they use, never the real systemctl or helper.
mkdir -p "$fake/tools"
for tool in mkdir cp chmod rm cat; do ln -s "$(command -v "$tool")" "$fake/tools/$tool"; done
for script in postinst prerm postrm; do
  sed -e "s|/etc/gpustream|$fake/etc/gpustream|g" -e "s|/usr/share/gpustream|$fake/usr/share/gpustream|g" \
      -e "s|/run/systemd/system|$fake/run/systemd/system|g" "$work/control/$script" > "$fake/$script"
done
# run_script BIN-DIR SCRIPT ARGS...: runs it with that fake bin first on PATH; prints its calls.
run_script() {
  local bin="$1" script="$2"; shift 2
  : > "$fake/log"
  FAKE_LOG="$fake/log" PATH="$fake/$bin:$fake/tools" /bin/sh "$fake/$script" "$@" ||
    fail "$script $* failed"
  tr '\n' ';' < "$fake/log"
}
expect_calls() {  # expect_calls WHAT GOT WANT
  [ "$2" = "$3" ] || fail "$1: the calls were '$2', not '$3'"
  echo "deb_test: $1: ${3:-no call}"
}
got="$(run_script bin postinst configure)"
expect_calls "first install" "$got" "systemctl daemon-reload;systemctl --quiet is-enabled gpustream.service;"
[ -f "$fake/etc/gpustream/config.json" ] || fail "postinst did not copy the config"
[ "$(stat -c %a "$fake/etc/gpustream/credentials")" = 700 ] || fail "postinst did not make credentials/ mode 700"
echo '{"changed": true}' > "$fake/etc/gpustream/config.json"
got="$(FAKE_ENABLED=1 run_script bin postinst configure)"
expect_calls "install of an enabled service" "$got" \
  "systemctl daemon-reload;systemctl --quiet is-enabled gpustream.service;systemctl start gpustream.service;"
got="$(run_script bin postinst configure 0.1.0)"
expect_calls "upgrade" "$got" "systemctl daemon-reload;deb-systemd-invoke try-restart gpustream.service;"
grep -q changed "$fake/etc/gpustream/config.json" || fail "an upgrade replaced the administrator's config"
got="$(run_script bin-no-dsi postinst configure 0.1.0)"
expect_calls "upgrade without deb-systemd-invoke" "$got" "systemctl daemon-reload;systemctl try-restart gpustream.service;"
got="$(run_script bin prerm upgrade "$version")"
expect_calls "prerm upgrade" "$got" ""
got="$(run_script bin prerm remove)"
expect_calls "prerm remove" "$got" "systemctl stop gpustream.service;systemctl --no-reload disable gpustream.service;"
rmdir "$fake/run/systemd/system"
got="$(run_script bin postinst configure 0.1.0)"
expect_calls "upgrade without systemd running" "$got" ""
got="$(run_script bin postrm purge)"
[ ! -e "$fake/etc/gpustream" ] || fail "postrm purge left the config"

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

# 5. Install for real, or run from the unpacked tree.
if [ "$(id -u)" -eq 0 ] && ! dpkg-query -W -f='${Status}' gpustream 2> /dev/null | grep -q installed &&
   ! dpkg-query -W -f='${Status}' libgpustream-dev 2> /dev/null | grep -q installed &&
   [ ! -e /usr/bin/gpustream ]; then
  dpkg -i "${debs[@]}" > "$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i failed"; }
  installed_by_us=1
  echo "deb_test: dpkg -i: installed $(for d in "${debs[@]}"; do basename "$d"; done | tr '\n' ' ')"
  /usr/bin/gpustream list --probes host,simulated --simulate 1 > "$work/list.out" ||
    fail "gpustream list failed"
  grep -q simulated "$work/list.out" || { cat "$work/list.out"; fail "gpustream list shows no simulated probe"; }
  [ -f /etc/gpustream/config.json ] || fail "postinst did not create /etc/gpustream/config.json"
  [ "$(stat -c %a /etc/gpustream/credentials)" = 700 ] || fail "postinst did not create /etc/gpustream/credentials (700)"
  [ "$(pkg-config --modversion gpustream)" = "$upstream" ] ||
    fail "pkg-config --modversion gpustream is not the package's $upstream"
  serve_check /usr/bin/gpustream /etc/gpustream/config.json
  echo "deb_test: gpustream list and serve --config /etc/gpustream/config.json: ok"
  if [ -n "$py_deb" ]; then
    where="$(cd / && env -u PYTHONPATH /usr/bin/python3 -c 'import gpustream; print(gpustream.__file__)')" ||
      fail "the packaged Python module does not import"
    [ "$where" = /usr/lib/python3/dist-packages/gpustream/__init__.py ] ||
      fail "import gpustream found $where, not the package's"
    echo "deb_test: /usr/bin/python3 imports the packaged module"
  fi
  dpkg -r python3-gpustream libgpustream-dev gpustream > "$work/dpkg.log" 2>&1 ||
    { cat "$work/dpkg.log"; fail "dpkg -r failed"; }
  [ ! -e /usr/bin/gpustream ] || fail "/usr/bin/gpustream is still there after dpkg -r"
  [ ! -e /usr/lib/systemd/system/gpustream.service ] || fail "the unit is still there after dpkg -r"
  [ ! -e /usr/include/gpustream/telemetry.hpp ] || fail "the headers are still there after dpkg -r"
  [ -f /etc/gpustream/config.json ] || fail "dpkg -r removed the administrator's config"
  dpkg -P python3-gpustream libgpustream-dev gpustream > "$work/dpkg.log" 2>&1 ||
    { cat "$work/dpkg.log"; fail "dpkg -P failed"; }
  installed_by_us=0
  [ ! -e /etc/gpustream ] || fail "dpkg -P left /etc/gpustream"
  leftovers="$(dpkg -L gpustream libgpustream-dev python3-gpustream 2> /dev/null || true)"
  [ -z "$leftovers" ] || fail "dpkg still lists files of the packages: $leftovers"
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
