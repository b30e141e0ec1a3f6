# The fuzz targets, shared by the libFuzzer build (fuzz/CMakeLists.txt configured on its own
# with clang) and the replay build (included from the project: ctest runs every seed and
# regression input through the same LLVMFuzzerTestOneInput).
#
# Each target is fuzz/targets/<name>.cpp; seeds are in fuzz/corpus/<name>/, crashes found and
# fixed are kept in fuzz/regressions/<name>/.
set(GPUSTREAM_FUZZ_TARGETS
  fdinfo           # DRM fdinfo text (probes/toolkit/drm_fdinfo.cpp)
  sysfs_readers    # sysfs/procfs value readers (probes/toolkit/readers.cpp, pp_dpm levels)
  amd_smi          # amd-smi static/metric/process --json (probes/amd/amd_cli_parse.cpp)
  rocm_smi         # rocm-smi --json (probes/amd/amd_cli_parse.cpp)
  gpu_metrics      # amdgpu sysfs gpu_metrics binary tables (probes/amd/amdgpu_gpu_metrics.cpp)
  nvidia_smi_csv   # nvidia-smi --format=csv (probes/nvidia/smi_csv.cpp, formats.cpp)
  macmon           # macmon pipe lines (probes/apple/macmon_parse.cpp)
  snapshot_json    # the gpustream/1 decoder (sdk/src/json_read.cpp, json_parse.cpp)
  client_message   # client protocol messages (transport/src/wire/protocol.cpp)
  event_message    # the server's event messages (transport/src/wire/protocol_event.cpp)
  http_access      # Host/Origin/token checks (transport/src/server/access.cpp, wire/request_target.cpp)
  config           # the config file (sdk/src/config.cpp)
  bus_decoder      # the fleet bus decoder, GSB1/GSK1 (transport/src/fleet/fleet_codec.cpp,
                   # bus_deflate.cpp over libdeflate)
  bus_stream)      # one bus decoder over a stream: deltas in place, replays, forged seqs

# The translation units the fuzzers exercise. The libFuzzer build compiles these (only) with
# coverage and sanitizer instrumentation; everything else they need comes from the normal
# build's static libraries.
set(GPUSTREAM_FUZZ_INSTRUMENTED_SOURCES
  probes/toolkit/readers.cpp
  probes/toolkit/drm_fdinfo.cpp
  probes/amd/amd_cli_parse.cpp
  probes/amd/amdgpu_gpu_metrics.cpp
  probes/nvidia/smi_csv.cpp
  probes/nvidia/formats.cpp
  probes/apple/macmon_parse.cpp
  sdk/src/json_parse.cpp
  sdk/src/json_read.cpp
  sdk/src/json_patch.cpp
  sdk/src/json_utf8.cpp
  sdk/src/model.cpp
  sdk/src/config.cpp
  transport/src/wire/protocol.cpp
  transport/src/wire/protocol_event.cpp
  transport/src/server/access.cpp
  transport/src/wire/request_target.cpp
  transport/src/fleet/fleet_codec.cpp
  transport/src/fleet/bus_deflate.cpp)
