// gpustream/probes/source_note.hpp — a probe that chose one of several sources (e.g. a library,
// sysfs or a CLI) says which, and why the others were passed over, in one line that
// `gpustream list` shows under the probe.
//
// Thread safety: source_note() is const and may be called from any thread.
#pragma once

#include <string>

namespace gpustream {

class SourceNote {
 public:
  virtual ~SourceNote() = default;
  /// "source: sysfs (auto; passed over library: cannot load libvendor.so: ...)".
  virtual std::string source_note() const = 0;
};

}  // namespace gpustream
