// amd_fake_cli.hpp — a fake amd-smi / rocm-smi whose outputs and misbehaviour a test changes
// between samples.
//
//   FakeAmdCli smi(tree, fakes::kFakeAmdSmi, "amd-smi");
//   smi.copy_recorded("static.json");          // tests/fakes/amd_smi/data/static.json
//   smi.set_output("process.json", "[...]");   // what `amd-smi process --json` prints now
//   smi.set_mode("partial");                   // next runs print a cut-off document
//   AmdProbeOptions{.tool = AmdTool::amd_smi, .path = smi.path()};
//
// A wrapper script in the tree runs the fake with its own data folder and the mode read from a
// file at each run, so nothing needs the environment. Thread safety: none (one test owns it).
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "gpustream_fake_amd_paths.hpp"
#include "support/temp_tree.hpp"

namespace gpustream::test {

class FakeAmdCli {
 public:
  FakeAmdCli(TempTree& tree, const char* fake, const std::string& name)
      : tree_(tree), data_(name + "-data"), mode_(name + "-mode") {
    const auto mode_file = tree_.file(mode_, "normal\n");
    tree_.dir(data_);
    path_ = tree_.file("bin/" + name, std::string("#!/bin/sh\nexec '") + fake + "' --fake-data '" +
                                          tree_.path(data_) + "' --fake-mode \"$(cat '" +
                                          mode_file + "')\" \"$@\"\n");
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all);
  }

  const std::string& path() const noexcept { return path_; }

  /// normal | hang | crash | garbage | partial | empty | fail (fake_cli_common.sh).
  void set_mode(const std::string& mode) { tree_.file(mode_, mode + "\n"); }

  void set_output(const std::string& file, const std::string& text) {
    tree_.file(data_ + "/" + file, text);
  }

  /// Copies one of the recorded outputs in tests/fakes/amd_smi/data.
  void copy_recorded(const std::string& file) { set_output(file, recorded(file)); }

  static std::string recorded(const std::string& file) {
    std::ifstream in(std::string(fakes::kFakeAmdData) + "/" + file);
    if (!in) throw std::runtime_error("no recorded output " + file);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  TempTree& tree_;
  std::string data_;
  std::string mode_;
  std::string path_;
};

}  // namespace gpustream::test
