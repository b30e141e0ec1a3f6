// probes/kubelet/kubelet_client_grpc.cpp against a fake kubelet: a gRPC server in the test
// serving the real PodResources v1 service (v1.PodResourcesLister/List, generated from the same
// .proto) on a unix socket — normal answers, MIG/AMD/Intel ids, a missing or dead socket, a
// server that hangs past the deadline, garbage bytes, 100 000 pods, and a change between two
// refreshes.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include "gpustream/probes/kubelet_client.hpp"
#include "gpustream/probes/pod_resources.hpp"
#include "podresources_v1.grpc.pb.h"
#include "support/temp_tree.hpp"

namespace gpustream::probes {
namespace {

using std::chrono::milliseconds;

/// The kubelet's List, answering what the test set (or hanging until released).
class ListService final : public v1::PodResourcesLister::Service {
 public:
  grpc::Status List(grpc::ServerContext* /*ctx*/, const v1::ListPodResourcesRequest* /*req*/,
                    v1::ListPodResourcesResponse* out) override {
    std::unique_lock lock(mu_);
    ++calls_;
    cv_.wait(lock, [this] { return !hang_; });
    *out = answer_;
    return grpc::Status::OK;
  }
  void set(v1::ListPodResourcesResponse r) {
    std::lock_guard lock(mu_);
    answer_ = std::move(r);
  }
  void hang(bool h) {
    {
      std::lock_guard lock(mu_);
      hang_ = h;
    }
    cv_.notify_all();
  }
  int calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  v1::ListPodResourcesResponse answer_;
  bool hang_ = false;
  int calls_ = 0;
};

/// Any method answered with bytes that are no protobuf message (field number 0).
class GarbageService final : public grpc::CallbackGenericService {
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* /*ctx*/) override {
    class Reactor final : public grpc::ServerGenericBidiReactor {
     public:
      Reactor() { StartRead(&request_); }
      void OnReadDone(bool ok) override {
        if (!ok) {
          Finish(grpc::Status::OK);
          return;
        }
        static constexpr char kJunk[] = "\x00\xff\xff\xff\xff\x0f garbage";
        const std::string junk(kJunk, sizeof kJunk - 1);  // field number 0: no message
        grpc::Slice slice(junk);
        reply_ = grpc::ByteBuffer(&slice, 1);
        StartWriteAndFinish(&reply_, grpc::WriteOptions(), grpc::Status::OK);
      }
      void OnDone() override { delete this; }

     private:
      grpc::ByteBuffer request_, reply_;
    };
    return new Reactor;
  }
};

/// A kubelet on `socket`: the List service, or garbage for every call.
class FakeKubelet {
 public:
  FakeKubelet(const std::string& socket, bool garbage = false) {
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
    if (garbage)
      b.RegisterCallbackGenericService(&garbage_);
    else
      b.RegisterService(&list_);
    server_ = b.BuildAndStart();
    if (!server_) throw std::runtime_error("the fake kubelet could not listen on " + socket);
  }
  ~FakeKubelet() {
    list_.hang(false);
    server_->Shutdown();
  }
  ListService& list() { return list_; }

 private:
  ListService list_;
  GarbageService garbage_;
  std::unique_ptr<grpc::Server> server_;
};

void add_pod(v1::ListPodResourcesResponse& r, const std::string& name, const std::string& ns,
             const std::string& container, const std::string& resource,
             std::initializer_list<std::string> ids) {
  auto* pod = r.add_pod_resources();
  pod->set_name(name);
  pod->set_namespace_(ns);
  auto* c = pod->add_containers();
  c->set_name(container);
  auto* d = c->add_devices();
  d->set_resource_name(resource);
  for (const auto& id : ids) d->add_device_ids(id);
}

class KubeletClientTest : public ::testing::Test {
 protected:
  test::TempTree tree_;  // before socket_, which names a file in it
  std::string socket_ = tree_.path("kubelet.sock");
  KubeletClientOptions options() {
    KubeletClientOptions o;
    o.socket = socket_;
    o.timeout = milliseconds(5000);
    return o;
  }
};

TEST_F(KubeletClientTest, ListMapsEachGpuToItsPodNamespaceAndContainer) {
  FakeKubelet kubelet(socket_);
  v1::ListPodResourcesResponse r;
  add_pod(r, "train-0", "ml", "trainer", "nvidia.com/gpu",
          {"GPU-8c4a5f8e-0000-1111-2222-333344445555"});
  add_pod(r, "mig-job", "ml", "worker", "nvidia.com/mig-1g.10gb",
          {"MIG-2a3b4c5d-6e7f-5000-8000-0123456789ab"});
  add_pod(r, "rocm", "hpc", "main", "amd.com/gpu", {"0000:c1:00.0"});
  add_pod(r, "arc", "media", "encoder", "gpu.intel.com/i915", {"card1-0"});
  add_pod(r, "web", "default", "nginx", "example.com/nic", {"eth1"});  // not a GPU
  auto* no_devices = r.add_pod_resources();  // most pods hold no device at all
  no_devices->set_name("dns");
  no_devices->set_namespace_("kube-system");
  no_devices->add_containers()->set_name("coredns");
  kubelet.list().set(r);

  auto lister = make_kubelet_lister(options());
  const auto got = lister->list();
  ASSERT_TRUE(got.map) << got.error << ": " << got.message;
  got.map->finish();
  EXPECT_EQ(got.map->pods(), 6u);
  EXPECT_EQ(got.map->holds(), 4u);
  std::vector<DeviceSample> d(4);
  d[0].id = "GPU-8c4a5f8e-0000-1111-2222-333344445555";
  d[1].id = "MIG-2a3b4c5d-6e7f-5000-8000-0123456789ab";
  d[1].parent = "GPU-8c4a5f8e-0000-1111-2222-333344445555";
  d[2].id = "amd-0";
  d[2].pci_bus_id = "0000:C1:00.0";
  d[3].id = "intel-0";
  d[3].attributes["card"] = "card1";
  d[0].processes.push_back({.pid = 1, .container = ProcessContainer{"containerd", "", "u", ""}});
  apply_pods(got.map.get(), d);
  EXPECT_EQ(d[0].pods, (std::vector{KubernetesPod{"train-0", "ml", "trainer"}}));
  EXPECT_EQ(d[0].processes[0].pod, (KubernetesPod{"train-0", "ml", "trainer"}));
  EXPECT_EQ(d[1].pods, (std::vector{KubernetesPod{"mig-job", "ml", "worker"}}));
  EXPECT_EQ(d[2].pods, (std::vector{KubernetesPod{"rocm", "hpc", "main"}}));
  EXPECT_EQ(d[3].pods, (std::vector{KubernetesPod{"arc", "media", "encoder"}}));
}

TEST_F(KubeletClientTest, AMissingSocketIsSaidAsSuch) {
  auto lister = make_kubelet_lister(options());
  const auto got = lister->list();
  EXPECT_FALSE(got.map);
  EXPECT_EQ(got.error, "socket_missing");
  EXPECT_NE(got.message.find(socket_), std::string::npos) << got.message;
}

TEST_F(KubeletClientTest, ASocketNobodyListensOnIsUnavailable) {
  // A kubelet that died: its socket file stays, connecting is refused.
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(socket_.size(), sizeof(addr.sun_path));
  socket_.copy(addr.sun_path, socket_.size());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(fd);
  const auto got = make_kubelet_lister(options())->list();
  EXPECT_FALSE(got.map);
  EXPECT_EQ(got.error, "unavailable") << got.message;
}

TEST_F(KubeletClientTest, AKubeletThatHangsMeetsTheDeadline) {
  FakeKubelet kubelet(socket_);
  kubelet.list().hang(true);
  auto o = options();
  o.timeout = milliseconds(200);
  const auto got = make_kubelet_lister(o)->list();
  EXPECT_FALSE(got.map);
  EXPECT_EQ(got.error, "deadline") << got.message;
  EXPECT_EQ(kubelet.list().calls(), 1);
}

TEST_F(KubeletClientTest, GarbageBytesAreMalformed) {
  FakeKubelet kubelet(socket_, /*garbage=*/true);
  const auto got = make_kubelet_lister(options())->list();
  EXPECT_FALSE(got.map);
  EXPECT_EQ(got.error, "malformed") << got.message;
}

TEST_F(KubeletClientTest, HostileNamesAreRefusedNotKept) {
  FakeKubelet kubelet(socket_);
  v1::ListPodResourcesResponse r;
  add_pod(r, std::string(100000, 'p'), "ml", "c", "nvidia.com/gpu", {"GPU-a"});
  add_pod(r, "ok", "ml\x1b[31m", "c", "nvidia.com/gpu", {"GPU-b"});
  add_pod(r, "ok", "ml", "c", "nvidia.com/gpu", {std::string(300, 'g')});
  add_pod(r, "fine", "ml", "c", "nvidia.com/gpu", {"GPU-c"});
  kubelet.list().set(r);
  const auto got = make_kubelet_lister(options())->list();
  ASSERT_TRUE(got.map) << got.message;
  EXPECT_EQ(got.map->refused(), 3u);
  EXPECT_EQ(got.map->holds(), 1u);
  EXPECT_FALSE(got.map->holders("GPU-c").empty());
}

/// 100 000 pods, each with one container holding one GPU id: a hostile (or broken) kubelet.
v1::ListPodResourcesResponse hundred_thousand_pods() {
  v1::ListPodResourcesResponse r;
  for (int i = 0; i < 100000; ++i)
    add_pod(r, "workload-" + std::to_string(i) + "-7d9f8c6b5-x2x4z", "team-namespace-a",
            "main-container", "nvidia.com/gpu", {"GPU-" + std::to_string(i)});
  return r;
}

TEST_F(KubeletClientTest, A100kPodAnswerIsRefusedByItsBytesThenBoundedInHolds) {
  FakeKubelet kubelet(socket_);
  const auto r = hundred_thousand_pods();
  const std::size_t bytes = r.ByteSizeLong();
  ASSERT_GT(bytes, std::size_t{4} << 20) << "the answer must exceed the default bound";
  kubelet.list().set(r);
  // The default bound (4 MiB): gRPC refuses the message; nothing is kept.
  const auto refused = make_kubelet_lister(options())->list();
  EXPECT_FALSE(refused.map);
  EXPECT_EQ(refused.error, "too_large") << refused.message;

  // A bound large enough to read it: the map keeps at most max_holds device holds.
  auto o = options();
  o.max_response_bytes = bytes + 1024;
  o.max_holds = 1000;
  const auto read = make_kubelet_lister(o)->list();
  ASSERT_TRUE(read.map) << read.message;
  EXPECT_EQ(read.map->pods(), 100000u);
  EXPECT_EQ(read.map->holds(), 1000u);
  EXPECT_EQ(read.map->bounded(), 99000u);
  std::cout << "[ measure  ] 100000 pods: " << bytes << " bytes on the wire\n";
}

TEST_F(KubeletClientTest, TheWatcherSeesAChangeAtItsNextRefresh) {
  FakeKubelet kubelet(socket_);
  v1::ListPodResourcesResponse first;
  add_pod(first, "train-0", "ml", "trainer", "nvidia.com/gpu", {"GPU-a::0", "GPU-a::1"});
  kubelet.list().set(first);
  KubeletWatcher w(make_kubelet_lister(options()), {.refresh = milliseconds(10000)});
  GpuSnapshot s;
  s.devices.resize(1);
  s.devices[0].id = "GPU-a";
  EXPECT_EQ(w.refresh_once(), milliseconds(10000));
  w.annotate(s);
  EXPECT_EQ(s.devices[0].pods, (std::vector{KubernetesPod{"train-0", "ml", "trainer"}}));

  v1::ListPodResourcesResponse second;  // the pod ended, another took the GPU
  add_pod(second, "eval-3", "ml", "evaluator", "nvidia.com/gpu", {"GPU-a"});
  kubelet.list().set(second);
  w.refresh_once();
  w.annotate(s);
  EXPECT_EQ(s.devices[0].pods, (std::vector{KubernetesPod{"eval-3", "ml", "evaluator"}}));
  EXPECT_EQ(kubelet.list().calls(), 2);
}

TEST_F(KubeletClientTest, AKubeletThatGoesAwayAndComesBack) {
  KubeletWatcher w(make_kubelet_lister(options()), {.refresh = milliseconds(10000)});
  EXPECT_EQ(w.refresh_once(), milliseconds(1000)) << "no socket yet: backoff";
  EXPECT_EQ(w.stats().last_error, "socket_missing");
  {
    FakeKubelet kubelet(socket_);
    v1::ListPodResourcesResponse r;
    add_pod(r, "train-0", "ml", "trainer", "nvidia.com/gpu", {"GPU-a"});
    kubelet.list().set(r);
    EXPECT_EQ(w.refresh_once(), milliseconds(10000)) << w.stats().last_error;
    EXPECT_TRUE(w.current());
  }
  ::unlink(socket_.c_str());  // gRPC leaves the socket file of a stopped server
  w.refresh_once();
  EXPECT_FALSE(w.current());
  EXPECT_EQ(w.stats().last_error, "socket_missing");
  EXPECT_EQ(w.stats().refreshes, 1u);
  EXPECT_EQ(w.stats().errors, 2u);
}

}  // namespace
}  // namespace gpustream::probes
