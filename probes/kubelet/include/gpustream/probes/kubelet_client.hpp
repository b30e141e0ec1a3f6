// kubelet_client.hpp — the kubelet's PodResources API v1 (List) over its unix socket, as a
// KubeletLister (gpustream/probes/pod_resources.hpp). docs/operations.md, "Kubernetes".
//
// One List per call, with a deadline; the answer is bounded in bytes by gRPC's maximum receive
// message size (a larger one fails as too_large without being kept) and the map built from it by
// PodResourceMap's bound on device holds. Built only with gRPC (GPUSTREAM_HAS_KUBELET); without,
// kubelet_client_built() is false and make_kubelet_lister throws.
//
// Thread safety: a lister is one caller's (KubeletWatcher's thread).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "gpustream/probes/pod_resources.hpp"

namespace gpustream::probes {

struct KubeletClientOptions {
  std::string socket{kDefaultKubeletSocket};  // the unix socket's path
  std::chrono::milliseconds timeout{2000};    // the deadline of one List
  /// The largest answer taken, bytes (gRPC's maximum receive message size). A node's List is
  /// about 150 bytes per container: 4 MiB is some 25 000 containers, 100 times the kubelet's
  /// default of 110 pods.
  std::size_t max_response_bytes = std::size_t{4} << 20;
  std::size_t max_holds = PodResourceMap::kDefaultMaxHolds;  // GPU device holds kept
};

/// False when this build has no gRPC (the feature is not built).
bool kubelet_client_built() noexcept;

/// The gRPC lister. Throws std::runtime_error when the feature is not built.
std::unique_ptr<KubeletLister> make_kubelet_lister(KubeletClientOptions options);

/// What the package needs to build it, for the messages that say it is not built.
inline constexpr const char* kKubeletNotBuilt =
    "this build has no kubelet PodResources client (rebuild with libgrpc++-dev, libprotobuf-dev, "
    "protobuf-compiler and protobuf-compiler-grpc installed)";

}  // namespace gpustream::probes
