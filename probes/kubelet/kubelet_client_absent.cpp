// The kubelet client of a build without gRPC: says it is not built.
#include <stdexcept>

#include "gpustream/probes/kubelet_client.hpp"

namespace gpustream::probes {

bool kubelet_client_built() noexcept { return false; }

// By value, as declared: the gRPC build moves the options into its client.
// NOLINTNEXTLINE(performance-unnecessary-value-param)
std::unique_ptr<KubeletLister> make_kubelet_lister(KubeletClientOptions /*options*/) {
  throw std::runtime_error(kKubeletNotBuilt);
}

}  // namespace gpustream::probes
