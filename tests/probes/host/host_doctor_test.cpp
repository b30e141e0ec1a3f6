// `gpustream doctor` for the host probe (probes/host/host_doctor.cpp): meminfo, identity,
// containers.
#include <gtest/gtest.h>

#include "doctor_machine.hpp"
#include "gpustream/probes/machine_view.hpp"

namespace gpustream {
namespace {

using namespace doctor_test;  // NOLINT(google-build-using-namespace)

TEST(Doctor, ContainerProcThatIsNotTheHostsIsABlocker) {
  Machine m;
  m.options.probes = {"host"};
  m.tree().file("root/.dockerenv", "");
  m.container_proc();
  auto r = m.run();
  const auto* f = find(r, "host", "host_proc", Status::blocker);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_NE(f->detail.find("pid:[4026532513]"), std::string::npos);
  EXPECT_NE(f->fix.find("--pid=host"), std::string::npos);
  EXPECT_NE(find(r, "host", "container", Status::info), nullptr);
  EXPECT_FALSE(r.fully_readable());

  m.host_proc();  // --pid=host: pid 1 is the host's init
  r = m.run();
  EXPECT_EQ(find(r, "host", "host_proc", Status::blocker), nullptr) << dump(r);
  EXPECT_NE(find(r, "host", "host_proc", Status::ok), nullptr);
  EXPECT_TRUE(r.fully_readable()) << dump(r);
}

TEST(Doctor, ContainerWhosePidNamespaceCannotBeReadIsAWarning) {
  Machine m;
  m.options.probes = {"host"};
  m.tree().remove("proc/1");
  m.env["container"] = "podman";
  auto r = m.run();
  EXPECT_NE(find(r, "host", "host_proc", Status::warn), nullptr) << dump(r);
  EXPECT_NE(find(r, "host", "container_devices", Status::warn), nullptr) << dump(r);
  m.env.clear();  // not a container: nothing to warn about
  r = m.run();
  EXPECT_EQ(find(r, "host", "host_proc", Status::warn), nullptr) << dump(r);
  EXPECT_EQ(find(r, "host", "container"), nullptr);
}

TEST(Doctor, UnreadableMeminfoIsABlocker) {
  Machine m;
  m.options.probes = {"host"};
  auto r = m.run();
  EXPECT_NE(find(r, "host", "meminfo", Status::ok), nullptr) << dump(r);
  m.tree().remove("proc/meminfo");
  r = m.run();
  EXPECT_NE(find(r, "host", "meminfo", Status::blocker), nullptr) << dump(r);
  EXPECT_FALSE(r.fully_readable());
}

TEST(Doctor, OversizedStatusFileIsNotReadWhole) {
  Machine m;
  m.options.probes = {"host"};
  // Worst input: a status file larger than the bound.
  m.tree().file("proc/self/status", "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n" +
                                        std::string(machine::kMaxViewFileBytes + 1, 'x'));
  const auto r = m.run();
  EXPECT_NE(find(r, "host", "identity", Status::warn), nullptr) << dump(r);
}

}  // namespace
}  // namespace gpustream
