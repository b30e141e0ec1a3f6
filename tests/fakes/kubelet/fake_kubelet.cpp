// A fake kubelet for the integration tests: serves the real PodResources v1 service
// (v1.PodResourcesLister/List, generated from probes/kubelet/podresources_v1.proto) on a unix
// socket, answering the pods read from a file that the test may rewrite at any time:
//
//   fake_kubelet SOCKET PODS_FILE
//
// PODS_FILE holds one device hold a line, "RESOURCE DEVICE_ID NAMESPACE POD CONTAINER"; it is
// read again at every List. "hang" alone on its first line makes List wait until the file
// changes (a kubelet that does not answer). Prints "listening SOCKET" once serving; stops on
// SIGTERM or SIGINT.
#include <csignal>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>

#include <grpcpp/grpcpp.h>

#include "podresources_v1.grpc.pb.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class Service final : public v1::PodResourcesLister::Service {
 public:
  explicit Service(std::string file) : file_(std::move(file)) {}
  grpc::Status List(grpc::ServerContext* ctx, const v1::ListPodResourcesRequest* /*req*/,
                    v1::ListPodResourcesResponse* out) override {
    std::string text = read_file(file_);
    while (text.rfind("hang", 0) == 0 && !ctx->IsCancelled()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a fake's wait, not a test's
      text = read_file(file_);
    }
    // (namespace, pod) → container → resource → ids
    std::map<std::pair<std::string, std::string>,
             std::map<std::string, std::map<std::string, std::vector<std::string>>>>
        pods;
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream f(line);
      std::string resource, id, ns, pod, container;
      if (f >> resource >> id >> ns >> pod >> container)
        pods[{ns, pod}][container][resource].push_back(id);
    }
    for (const auto& [who, containers] : pods) {
      auto* p = out->add_pod_resources();
      p->set_namespace_(who.first);
      p->set_name(who.second);
      for (const auto& [name, resources] : containers) {
        auto* c = p->add_containers();
        c->set_name(name);
        for (const auto& [resource, ids] : resources) {
          auto* d = c->add_devices();
          d->set_resource_name(resource);
          for (const auto& id : ids) d->add_device_ids(id);
        }
      }
    }
    return grpc::Status::OK;
  }

 private:
  std::string file_;
};

// Set by the signal handlers, read by main.
// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables)
volatile std::sig_atomic_t g_stop = 0;

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: fake_kubelet SOCKET PODS_FILE\n";
    return 2;
  }
  std::signal(SIGTERM, [](int) { g_stop = 1; });
  std::signal(SIGINT, [](int) { g_stop = 1; });
  Service service(argv[2]);
  grpc::ServerBuilder b;
  b.AddListeningPort(std::string("unix:") + argv[1], grpc::InsecureServerCredentials());
  b.RegisterService(&service);
  auto server = b.BuildAndStart();
  if (!server) {
    std::cerr << "fake_kubelet: cannot listen on " << argv[1] << "\n";
    return 1;
  }
  std::cout << "listening " << argv[1] << std::endl;
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  return 0;
}
