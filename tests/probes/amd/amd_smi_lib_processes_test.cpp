// The AMD library backend's process list in the releases whose amdsmi_get_gpu_process_list fills
// pids rather than amdsmi_proc_info_t (23.4, 24.5.0), against the fake libamd_smi.so.
#include <gtest/gtest.h>

#include <string>

#include "amd_smi_lib_fixture.hpp"

namespace gpustream {
namespace {

using test::AmdSmiLib;

TEST_F(AmdSmiLib, ReleasesThatListPidsAskForEachProcessInfo) {
  for (const char* version : {"23.4.0", "24.5.0", "24.5.1", "24.6.2"}) {
    scenario(std::string("version=") + version +
             "\ndevices=1\n"
             "device.0.processes=4242:python3:1073741824:2097152:1000000000:0;"
             "77:ffmpeg:4096:0:0:0\n");
    auto probe = make(LibrarySessionMode::persistent);
    const auto s = probe->sample_now();
    ASSERT_EQ(s.devices.size(), 1u) << version;
    const auto& procs = s.devices[0].processes;
    ASSERT_EQ(procs.size(), 2u) << version;
    EXPECT_EQ(procs[0].pid, 77) << version;
    EXPECT_EQ(procs[0].name, "ffmpeg") << version;
    EXPECT_EQ(procs[0].gpu_memory_bytes, 4096u) << version;
    EXPECT_EQ(procs[1].pid, 4242) << version;
    EXPECT_EQ(procs[1].name, "python3") << version;
    EXPECT_EQ(procs[1].gpu_memory_bytes, 1073741824u) << version;
    EXPECT_EQ(procs[1].gtt_memory_bytes, 2097152u) << version;
    EXPECT_FALSE(s.devices[0].processes_absent) << version;
  }
}

}  // namespace
}  // namespace gpustream
