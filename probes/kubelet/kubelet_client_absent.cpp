// The kubelet client of a build without gRPC: says it is not built.
#include <stdexcept>

#include "gpustream/probes/kubelet_client.hpp"

namespace gpustream::probes {

bool kubelet_client_built() noexcept { return false; }

std::unique_ptr<KubeletLister> make_kubelet_lister(KubeletClientOptions /*options*/) {
  throw std::runtime_error(kKubeletNotBuilt);
}

}  // namespace gpustream::probes
