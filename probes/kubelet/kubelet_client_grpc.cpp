// The kubelet client over gRPC (podresources_v1.proto).
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <system_error>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "gpustream/probes/kubelet_client.hpp"
#include "podresources_v1.grpc.pb.h"

namespace gpustream::probes {
namespace {

/// A status's message as one short printable line (a hostile kubelet chooses it).
std::string one_line(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 200)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return out;
}

std::string reason_of(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "deadline";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "too_large";
    case grpc::StatusCode::UNAVAILABLE:
      return "unavailable";
    case grpc::StatusCode::INTERNAL:  // among others: an answer that does not parse
      return "malformed";
    case grpc::StatusCode::UNIMPLEMENTED:
      // gRPC's blocking unary call says so of an answer whose bytes did not parse (the message
      // is dropped, then found missing); a kubelet without the v1 API says it with other words.
      return status.error_message().find("No message returned") != std::string::npos ? "malformed"
                                                                                     : "failed";
    default:
      return "failed";
  }
}

class GrpcKubeletLister final : public KubeletLister {
 public:
  explicit GrpcKubeletLister(KubeletClientOptions o) : o_(std::move(o)) {}

  KubeletListResult list() override {
    KubeletListResult r;
    struct stat st {};
    const bool found = ::stat(o_.socket.c_str(), &st) == 0;
    if (!found || !S_ISSOCK(st.st_mode)) {
      r.error = "socket_missing";
      r.message = o_.socket + ": " +
                  (found ? std::string("not a socket") : std::generic_category().message(errno));
      return r;
    }
    if (!stub_) {
      grpc::ChannelArguments args;
      args.SetMaxReceiveMessageSize(static_cast<int>(
          std::min<std::size_t>(o_.max_response_bytes, std::numeric_limits<int>::max())));
      // The watcher has its own backoff: gRPC's reconnection waits stay short under it.
      args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
      args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
      args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
      stub_ = v1::PodResourcesLister::NewStub(
          grpc::CreateCustomChannel("unix:" + o_.socket, grpc::InsecureChannelCredentials(), args));
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + o_.timeout);
    v1::ListPodResourcesRequest request;
    v1::ListPodResourcesResponse response;
    const grpc::Status status = stub_->List(&ctx, request, &response);
    if (!status.ok()) {
      r.error = reason_of(status);
      r.message = "List: gRPC status " + std::to_string(static_cast<int>(status.error_code())) +
                  " " + one_line(status.error_message());
      return r;
    }
    auto map = std::make_shared<PodResourceMap>(o_.max_holds);
    map->set_pods(static_cast<std::size_t>(response.pod_resources_size()));
    for (const auto& pod : response.pod_resources())
      for (const auto& c : pod.containers()) {
        const KubernetesPod who{pod.name(), pod.namespace_(), c.name()};
        for (const auto& d : c.devices())
          for (const auto& id : d.device_ids()) map->add(d.resource_name(), id, who);
      }
    r.map = std::move(map);
    return r;
  }

 private:
  KubeletClientOptions o_;
  std::unique_ptr<v1::PodResourcesLister::Stub> stub_;
};

}  // namespace

bool kubelet_client_built() noexcept { return true; }

std::unique_ptr<KubeletLister> make_kubelet_lister(KubeletClientOptions options) {
  return std::make_unique<GrpcKubeletLister>(std::move(options));
}

}  // namespace gpustream::probes
