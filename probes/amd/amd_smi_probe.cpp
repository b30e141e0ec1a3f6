// AmdSmiLibProbe: the AMD SMI library backend as a BlockingProbe.
#include "amd/amd_smi_backend.hpp"
#include "gpustream/probes/amd_probe.hpp"

namespace gpustream {

AmdSmiLibProbe::AmdSmiLibProbe(ProbeExecutors executors, AmdSmiLibProbeOptions options)
    : BlockingProbe(std::move(executors)),
      backend_(std::make_unique<amd_lib_detail::AmdSmiBackend>(amd_lib_detail::AmdSmiOptions{
          std::move(options.library), resolve_library_session_mode(options.library_session),
          std::move(options.procfs_root), options.processes, std::move(options.clock)})) {}

AmdSmiLibProbe::~AmdSmiLibProbe() = default;

std::string AmdSmiLibProbe::describe() const { return backend_->describe(); }

LibrarySession::Stats AmdSmiLibProbe::library_session_stats() const {
  return backend_->library().session_stats();
}

Detection AmdSmiLibProbe::detect() { return backend_->detect(); }

GpuSnapshot AmdSmiLibProbe::sample() { return backend_->sample(); }

std::shared_ptr<AmdSmiLibProbe> make_amd_smi_lib_probe(ProbeExecutors executors,
                                                       AmdSmiLibProbeOptions options) {
  return std::make_shared<AmdSmiLibProbe>(std::move(executors), std::move(options));
}

}  // namespace gpustream
