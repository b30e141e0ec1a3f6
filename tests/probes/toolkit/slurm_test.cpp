// The Slurm job of a process from /proc/<pid>/cgroup and /proc/<pid>/environ, for the path shapes
// Slurm's cgroup/v1 plugin (/slurm[_<node>]/uid_<u>/job_<j>/step_<s>/task_<n>) and cgroup/v2
// plugin (.../[<node>_]slurmstepd.scope/job_<j>/step_<s>/user/task_<n>) create.
#include "gpustream/probes/slurm.hpp"

#include <gtest/gtest.h>

#include <string>

namespace gpustream::probes {
namespace {

SlurmJob expect_job(const std::string& cgroup_text) {
  const SlurmResult r = parse_slurm_cgroup(cgroup_text);
  EXPECT_TRUE(r.job.has_value()) << cgroup_text;
  return r.job.value_or(SlurmJob{});
}

SlurmAbsent absent_of(const std::string& cgroup_text) {
  const SlurmResult r = parse_slurm_cgroup(cgroup_text);
  EXPECT_FALSE(r.job.has_value()) << cgroup_text;
  return r.absent;
}

TEST(Slurm, CgroupV1TaskUnderEveryController) {
  // A v1 host: the task/cgroup plugin's memory, cpuset and devices trees, proctrack's freezer at
  // step level, and controllers Slurm leaves alone.
  const std::string text =
      "12:pids:/user.slice/user-1000.slice\n"
      "11:memory:/slurm/uid_1000/job_4242/step_0/task_3\n"
      "10:devices:/slurm/uid_1000/job_4242/step_0/task_3\n"
      "9:freezer:/slurm/uid_1000/job_4242/step_0\n"
      "4:cpuset:/slurm/uid_1000/job_4242/step_0/task_3\n"
      "1:name=systemd:/system.slice/slurmd.service\n";
  EXPECT_EQ(expect_job(text), (SlurmJob{.job_id = "4242", .step = "0", .uid = 1000u}));
}

TEST(Slurm, CgroupV1EachStepKind) {
  for (const std::string step : {"batch", "extern", "interactive", "0", "17"}) {
    EXPECT_EQ(expect_job("7:memory:/slurm/uid_501/job_9/step_" + step + "\n"),
              (SlurmJob{.job_id = "9", .step = step, .uid = 501u}));
  }
}

TEST(Slurm, CgroupV1MultipleSlurmdNamesTheNodeInTheRoot) {
  EXPECT_EQ(expect_job("5:memory:/slurm_node07/uid_0/job_4294967294/step_batch/task_0\n"),
            (SlurmJob{.job_id = "4294967294", .step = "batch", .uid = 0u}));
}

TEST(Slurm, CgroupV1JobLevelHasNoStep) {
  EXPECT_EQ(expect_job("5:memory:/slurm/uid_1000/job_12\n"),
            (SlurmJob{.job_id = "12", .uid = 1000u}));
}

TEST(Slurm, CgroupV2TaskOfEachStepKind) {
  for (const std::string step : {"batch", "extern", "interactive", "0", "3"}) {
    EXPECT_EQ(
        expect_job("0::/system.slice/slurmstepd.scope/job_777/step_" + step + "/user/task_0\n"),
        (SlurmJob{.job_id = "777", .step = step}));
  }
}

TEST(Slurm, CgroupV2SpecialTaskStepdAndScopeUnderAnotherSlice) {
  EXPECT_EQ(expect_job("0::/system.slice/slurmstepd.scope/job_5/step_extern/user/task_special\n"),
            (SlurmJob{.job_id = "5", .step = "extern"}));
  EXPECT_EQ(expect_job("0::/system.slice/slurmstepd.scope/job_5/step_0/slurm\n"),
            (SlurmJob{.job_id = "5", .step = "0"}));
  // The scope under a container's own cgroup, or a slice other than system.slice.
  EXPECT_EQ(expect_job("0::/docker.slice/docker-1.scope/system.slice/slurmstepd.scope/job_6/"
                       "step_batch/user/task_0\n"),
            (SlurmJob{.job_id = "6", .step = "batch"}));
  EXPECT_EQ(expect_job("0::/slurm.slice/slurmstepd.scope/job_6/step_1/user/task_2\n"),
            (SlurmJob{.job_id = "6", .step = "1"}));
}

TEST(Slurm, CgroupV2MultipleSlurmdNamesTheNodeInTheScope) {
  EXPECT_EQ(expect_job("0::/system.slice/gpu-a01_slurmstepd.scope/job_21868/step_0/user/task_1\n"),
            (SlurmJob{.job_id = "21868", .step = "0"}));
}

TEST(Slurm, DaemonsAndOtherProcessesAreNotInAJob) {
  EXPECT_EQ(absent_of("0::/system.slice/slurmstepd.scope/system\n"), SlurmAbsent::none);
  EXPECT_EQ(absent_of("0::/system.slice/slurmd.service\n"), SlurmAbsent::none);
  EXPECT_EQ(absent_of("4:memory:/slurm/system\n"), SlurmAbsent::none);
  EXPECT_EQ(absent_of("0::/user.slice/user-1000.slice/session-3.scope\n"), SlurmAbsent::none);
  EXPECT_EQ(absent_of("0::/system.slice/docker-abc.scope\n"), SlurmAbsent::none);
  EXPECT_EQ(absent_of(""), SlurmAbsent::none);
  EXPECT_EQ(absent_of("garbage\n"), SlurmAbsent::none);
  // Names that only look like the mark.
  EXPECT_EQ(absent_of("0::/slurm.slice/x.service\n"), SlurmAbsent::none);
  EXPECT_EQ(absent_of("0::/system.slice/_slurmstepd.scope.bak/job_1\n"), SlurmAbsent::none);
}

TEST(Slurm, UnknownShapesUnderTheMarkAreUnrecognizedNeverGuessed) {
  for (const std::string path : {
           "/system.slice/slurmstepd.scope/job_12/step_0/user/task_x",
           "/system.slice/slurmstepd.scope/job_abc/step_0",
           "/system.slice/slurmstepd.scope/job_012/step_0",          // Slurm writes no leading zero
           "/system.slice/slurmstepd.scope/job_99999999999/step_0",  // past uint32
           "/system.slice/slurmstepd.scope/job_12/step_0+1/user/task_0",
           "/system.slice/slurmstepd.scope/job_12/step_/user/task_0",
           "/system.slice/slurmstepd.scope/job_12/step_0/other",
           "/system.slice/slurmstepd.scope/job_12/step_0/user/task_0/deeper",
           "/system.slice/slurmstepd.scope/sabc123/step_0",
           "/slurm/job_12/step_0",  // v1 without its uid level
           "/slurm/uid_1000/job_12/step_batch2",
           "/slurm/uid_1000/job_12/step_0/task_0/x",
           "/slurm/uid_x/job_12",
       }) {
    EXPECT_EQ(absent_of("0::" + path + "\n"), SlurmAbsent::unrecognized) << path;
  }
  // A v1 line in a known shape wins over another controller's unknown one.
  EXPECT_EQ(expect_job("3:cpu:/slurm/odd\n4:memory:/slurm/uid_1/job_2/step_0/task_0\n").job_id,
            "2");
}

TEST(SlurmEnviron, KeepsOnlyTheSlurmKeysItKnows) {
  using namespace std::string_literals;
  const std::string env =
      "PATH=/usr/bin\0SLURM_JOB_ID=1235\0SLURM_ARRAY_JOB_ID=1230\0"
      "SLURM_ARRAY_TASK_ID=5\0SLURM_JOB_USER=alice\0SLURM_NTASKS=4\0HOME=/x\0"s;
  EXPECT_EQ(parse_slurm_environ(env),
            (SlurmEnviron{
                .job_id = "1235", .array_job_id = "1230", .array_task_id = "5", .user = "alice"}));
  // The old SLURM_JOBID when SLURM_JOB_ID is missing; SLURM_JOB_ID wins where both are.
  EXPECT_EQ(parse_slurm_environ("SLURM_JOBID=7\0"s).job_id, "7");
  EXPECT_EQ(parse_slurm_environ("SLURM_JOBID=7\0SLURM_JOB_ID=8\0"s).job_id, "8");
  EXPECT_EQ(parse_slurm_environ("SLURM_JOB_ID=8\0SLURM_JOBID=7\0"s).job_id, "8");
  // An unterminated last entry is taken.
  EXPECT_EQ(parse_slurm_environ("A=1\0SLURM_JOB_ID=9"s).job_id, "9");
  EXPECT_EQ(parse_slurm_environ(""), SlurmEnviron{});
}

TEST(SlurmEnviron, RefusesValuesThatAreNotWhatSlurmWrites) {
  using namespace std::string_literals;
  EXPECT_EQ(parse_slurm_environ("SLURM_JOB_ID=12a\0SLURM_ARRAY_TASK_ID=-1\0"s), SlurmEnviron{});
  EXPECT_EQ(parse_slurm_environ("SLURM_JOB_USER=bad name\0"s).user, "");
  EXPECT_EQ(parse_slurm_environ("SLURM_JOB_USER=" + std::string(300, 'a') + "\0"s).user, "");
  EXPECT_EQ(parse_slurm_environ("SLURM_JOB_USER=\x01x\0"s).user, "");
}

TEST(SlurmEnviron, AnEntryCutBetweenPiecesIsJoinedAndAHugeOneSkipped) {
  using namespace std::string_literals;
  const std::string env =
      "X=" + std::string(100000, 'x') + "\0SLURM_JOB_ID=31\0"s + "SLURM_JOB_USER=bob\0"s;
  for (std::size_t piece : {1u, 7u, 4096u, 1u << 20}) {
    SlurmEnvironScanner scanner;
    for (std::size_t at = 0; at < env.size(); at += piece)
      scanner.feed(std::string_view(env).substr(at, piece));
    const auto e = scanner.finish();
    EXPECT_EQ(e.job_id, "31") << piece;
    EXPECT_EQ(e.user, "bob") << piece;
  }
  // An entry longer than kMaxEntry whose name is ours is skipped whole, not cut and taken.
  SlurmEnvironScanner scanner;
  scanner.feed("SLURM_JOB_USER=" + std::string(SlurmEnvironScanner::kMaxEntry, 'a'));
  scanner.feed("tail"s + '\0' + "SLURM_JOB_ID=4"s + '\0');
  const auto e = scanner.finish();
  EXPECT_EQ(e.user, "");
  EXPECT_EQ(e.job_id, "4");
}

TEST(SlurmEnviron, CompleteOnceEveryKeyIsSeen) {
  using namespace std::string_literals;
  SlurmEnvironScanner scanner;
  scanner.feed("SLURM_JOB_ID=1\0SLURM_JOB_USER=a\0SLURM_ARRAY_JOB_ID=1\0"s);
  EXPECT_FALSE(scanner.complete());
  scanner.feed("SLURM_ARRAY_TASK_ID=0\0"s);
  EXPECT_TRUE(scanner.complete());
}

TEST(SlurmProcFiles, StatusUidAndStatStartTime) {
  EXPECT_EQ(parse_status_uid("Name:\tpython\nUmask:\t0022\nUid:\t1000\t1000\t1000\t1000\n"), 1000u);
  EXPECT_EQ(parse_status_uid("Uid:\t0\t0\t0\t0\n"), 0u);
  EXPECT_FALSE(parse_status_uid("Name:\tx\n"));
  EXPECT_FALSE(parse_status_uid("Name:\tx\nUid:\t\n"));
  // comm with spaces and a ')' of its own; starttime is field 22.
  const std::string stat =
      "4242 (my (odd) prog) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 1 0 987654 "
      "12345678 300 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n";
  EXPECT_EQ(parse_stat_start_time(stat), 987654u);
  EXPECT_FALSE(parse_stat_start_time("4242 (x) S 1 2 3\n"));
  EXPECT_FALSE(parse_stat_start_time("garbage"));
}

}  // namespace
}  // namespace gpustream::probes
