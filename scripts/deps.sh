#!/usr/bin/env bash
# Installs the Debian packages gpustream needs, if any are missing.
#   scripts/deps.sh build    — compiler, CMake, Boost 1.81, spdlog, CLI11, libnats (NATS bridge),
#                              libssl-dev (TLS on the listeners and clients), libdeflate-dev
#                              (the fleet bus's compression),
#                              pybind11 + python3-dev (the Python module)
#   scripts/deps.sh test     — build + GoogleTest, Google Benchmark, nlohmann-json (bench only),
#                              and the real parts the integration tests drive: Prometheus,
#                              python3-websockets, Chromium + Node.js (browser test), the Level
#                              Zero loader (libze1), nats-server (NATS bridge test), clang +
#                              libFuzzer (scripts/fuzz.sh), libdrm-common (amdgpu.ids: the AMD
#                              names test reads the real table), clang-format + clang-tidy
#                              (scripts/lint.sh), python3-pytest (the Python module's tests),
#                              mypy (mypy --strict on a client of the Python module's stubs),
#                              dpkg-dev + file (cpack's dpkg-shlibdeps) and systemd
#                              (systemd-analyze verify) for the .deb test, openssl (the NATS
#                              TLS test's CA, the listeners' TLS test) and curl (tls_listen),
#                              and gRPC + protobuf (libgrpc++-dev, libprotobuf-dev,
#                              protobuf-compiler, protobuf-compiler-grpc: the kubelet
#                              PodResources client and its fake kubelet; a build without them
#                              leaves the feature out and says so)
#   scripts/deps.sh bench    — test + what the benchmarks compare against (rocm-smi, websocketpp)
# As root it runs apt-get; otherwise it prints the one line to run and exits 1.
# Idempotent: when everything is there it only says so.
set -euo pipefail

profile="${1:-build}"
build_pkgs=(cmake ninja-build g++ pkg-config ccache
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
  libspdlog-dev libfmt-dev libcli11-dev libnats-dev pybind11-dev python3-dev libssl-dev
  libdeflate-dev)
test_pkgs=(libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
  prometheus python3-websockets chromium nodejs libze1 libwebsocketpp-dev nats-server
  clang libfuzzer-14-dev libdrm-common clang-format clang-tidy python3-pytest mypy
  dpkg-dev file systemd openssl curl
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc)
bench_pkgs=(rocm-smi)

case "$profile" in
  build) want=("${build_pkgs[@]}") ;;
  test) want=("${build_pkgs[@]}" "${test_pkgs[@]}") ;;
  bench) want=("${build_pkgs[@]}" "${test_pkgs[@]}" "${bench_pkgs[@]}") ;;
  *) echo "usage: $0 build|test|bench" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#want[@]} packages for '$profile' are installed"
  exit 0
fi

line="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "deps: missing packages: ${missing[*]}" >&2
  echo "deps: run this as root, then try again:" >&2
  echo "  sudo sh -c '$line'" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
