// `gpustream doctor` (gpustream::doctor::run): the runner over the registry rows, its JSON and
// text forms, and the toolkit's bounded tool runs. Each probe's checks are tested in its folder
// (tests/probes/<vendor>/<vendor>_doctor_test.cpp).
#include "gpustream/probes/doctor.hpp"

#include <gtest/gtest.h>
#include <boost/json.hpp>

#include "doctor_machine.hpp"
#include "gpustream/probes/machine_view.hpp"
#include "gpustream_fake_paths.hpp"

namespace gpustream {
namespace {

using namespace doctor_test;  // NOLINT(google-build-using-namespace)

TEST(Doctor, NoGpuMeansNoDrmChecksAndExitZero) {
  Machine m;
  m.options.probes = {"amd", "intel"};
  m.identity(1000, {}, 0);  // would be blocked, but there is nothing to read
  const auto r = m.run();
  EXPECT_EQ(find(r, "amd", "fdinfo_access"), nullptr) << dump(r);
  EXPECT_EQ(find(r, "intel", "render_node_access"), nullptr);
  EXPECT_NE(find(r, "amd", "drm_devices", Status::info), nullptr);
  EXPECT_TRUE(r.fully_readable()) << dump(r);
}

TEST(Doctor, JsonDocumentShape) {
  Machine m;
  m.options.probes = {"amd", "host", "simulated"};
  m.gpu("0000:03:00.0", "amdgpu", 0);
  m.identity(1000, {}, 0);  // two blockers: render node and fdinfo
  const auto r = m.run();
  const auto doc = boost::json::parse(doctor::to_json(r)).as_object();
  EXPECT_EQ(doc.at("schema").as_string(), "gpustream-doctor/1");
  EXPECT_EQ(doc.at("fully_readable").as_bool(), false);
  EXPECT_EQ(doc.at("blockers").to_number<int>(), 2);
  EXPECT_EQ(doc.at("warnings").to_number<std::size_t>(), r.count(Status::warn));
  const auto& probes = doc.at("probes").as_array();
  ASSERT_EQ(probes.size(), 3U);
  EXPECT_EQ(probes[0].at("probe").as_string(), "amd");
  EXPECT_EQ(probes[0].at("status").as_string(), "blocker");
  EXPECT_EQ(probes[2].at("probe").as_string(), "simulated");
  const auto& findings = doc.at("findings").as_array();
  ASSERT_EQ(findings.size(), r.findings.size());
  for (const auto& v : findings) {
    const auto& f = v.as_object();
    EXPECT_EQ(f.size(), 5U);
    for (const auto* key : {"probe", "check", "status", "detail", "fix"})
      EXPECT_TRUE(f.at(key).is_string()) << key;
    const auto status = f.at("status").as_string();
    EXPECT_TRUE(status == "ok" || status == "info" || status == "warn" || status == "blocker");
  }
  // The text form groups per probe and ends with the verdict.
  const auto text = doctor::to_text(r);
  EXPECT_LT(text.find("amd: blocker"), text.find("host: "));
  EXPECT_NE(text.find("2 blocker(s)"), std::string::npos);
}

// Issue #28: a report of no GPU never says "Every GPU found can be read fully"; fewer GPUs
// than expected is not enough, said with both counts, in the text and the JSON.
TEST(Doctor, GpuCountsInTheVerdict) {
  doctor::Report r;
  EXPECT_TRUE(r.enough_gpus());  // not looked for, nothing expected
  EXPECT_EQ(doctor::to_text(r).find("GPU(s) found"), std::string::npos);
  EXPECT_FALSE(boost::json::parse(doctor::to_json(r)).as_object().contains("gpus_readable"));

  r.gpus_readable = 0;
  auto text = doctor::to_text(r);
  EXPECT_EQ(text.find("Every GPU found"), std::string::npos) << text;
  EXPECT_NE(text.find("No GPU found: there is no GPU to read (0 warning(s)).\n0 GPU(s) found.\n"),
            std::string::npos)
      << text;
  EXPECT_TRUE(r.enough_gpus());

  r.gpus_readable = 1;
  r.gpus_expected = 2;
  EXPECT_FALSE(r.enough_gpus());
  text = doctor::to_text(r);
  EXPECT_NE(text.find("Fewer GPUs than expected: 1 found, 2 expected (--expect-gpus).\n"),
            std::string::npos)
      << text;
  const auto doc = boost::json::parse(doctor::to_json(r)).as_object();
  EXPECT_EQ(doc.at("gpus_readable").to_number<int>(), 1);
  EXPECT_EQ(doc.at("gpus_expected").to_number<int>(), 2);
  EXPECT_FALSE(doc.at("enough_gpus").as_bool());

  r.gpus_readable = 2;
  EXPECT_TRUE(r.enough_gpus());
  text = doctor::to_text(r);
  EXPECT_NE(text.find("Every GPU found can be read fully"), std::string::npos) << text;
  EXPECT_NE(text.find("2 GPU(s) found, 2 expected (--expect-gpus).\n"), std::string::npos) << text;
}

TEST(Doctor, ToolOutputIsCappedInBytes) {
  // Worst input: 8 MiB of output without a version; at most 16 KiB is kept, and the detail
  // shows a short printable head.
  const auto v = machine::tool_version({fakes::kFakeTool, "bytes", "8388608"},
                                       std::chrono::milliseconds{10000}, {}, 16 * 1024);
  EXPECT_EQ(v.state, machine::ToolVersion::State::garbage);
  EXPECT_LT(v.detail.size(), v.command.size() + 120) << v.detail;
  // A pid is not a version: "(pid 1234)" has no "<digits>.<digits>".
  EXPECT_EQ(machine::tool_version({fakes::kFakeTool, "print", "Traceback (pid 1234)"},
                                  std::chrono::milliseconds{10000})
                .state,
            machine::ToolVersion::State::garbage);
  const auto ok = machine::tool_version({fakes::kFakeTool, "print", "tool 1.2.3"},
                                        std::chrono::milliseconds{10000});
  EXPECT_EQ(ok.state, machine::ToolVersion::State::ok);
  EXPECT_EQ(ok.version, "tool 1.2.3");
}

}  // namespace
}  // namespace gpustream
