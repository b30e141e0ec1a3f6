// slurm.cpp — the Slurm job of a process from its cgroup path and environ (see slurm.hpp for the
// path shapes of each plugin).
#include "gpustream/probes/slurm.hpp"

#include <charconv>
#include <cstdint>
#include <span>
#include <vector>

namespace gpustream::probes {
namespace {

constexpr std::size_t kMaxValue = 256;  // bytes of one environ value taken

bool starts_with(std::string_view s, std::string_view prefix) noexcept {
  return s.substr(0, prefix.size()) == prefix;
}

bool ends_with(std::string_view s, std::string_view suffix) noexcept {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

/// A uint32 written in decimal as Slurm writes its ids ("%u": no sign, no leading zero).
std::optional<std::uint32_t> decimal_u32(std::string_view s) noexcept {
  if (s.empty() || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  for (char c : s)
    if (c < '0' || c > '9') return std::nullopt;
  std::uint32_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

/// `element` after `prefix` when that is a Slurm id.
std::optional<std::uint32_t> id_after(std::string_view element, std::string_view prefix) {
  if (!starts_with(element, prefix)) return std::nullopt;
  return decimal_u32(element.substr(prefix.size()));
}

/// The step of a "step_<x>" element: a step number, batch, extern or interactive; empty when it
/// is not one.
std::string step_of(std::string_view element) {
  if (!starts_with(element, "step_")) return {};
  const std::string_view step = element.substr(5);
  if (step == "batch" || step == "extern" || step == "interactive") return std::string(step);
  if (decimal_u32(step)) return std::string(step);
  return {};
}

enum class Mark : std::uint8_t { none, v1, v2 };

Mark mark_of(std::string_view e) noexcept {
  if (e == "slurm" || (starts_with(e, "slurm_") && e.size() > 6)) return Mark::v1;
  constexpr std::string_view kScope = "slurmstepd.scope";
  constexpr std::string_view kNodeScope = "_slurmstepd.scope";  // <nodename>_slurmstepd.scope
  if (e == kScope || (ends_with(e, kNodeScope) && e.size() > kNodeScope.size())) return Mark::v2;
  return Mark::none;
}

std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  while (pos <= path.size()) {
    const std::size_t slash = path.find('/', pos);
    const auto element =
        path.substr(pos, slash == std::string_view::npos ? std::string_view::npos : slash - pos);
    pos = slash == std::string_view::npos ? path.size() + 1 : slash + 1;
    if (!element.empty()) out.push_back(element);
  }
  return out;
}

SlurmResult unrecognized() { return {std::nullopt, SlurmAbsent::unrecognized}; }

/// The elements after a v1 mark: uid_<n>/job_<n>[/step_<s>[/task_<n>]], or "system".
SlurmResult below_v1(std::span<const std::string_view> rest) {
  if (rest.empty() || (rest.size() == 1 && rest[0] == "system")) return {};
  const auto uid = id_after(rest[0], "uid_");
  if (!uid) return unrecognized();
  if (rest.size() < 2) return {};  // the user's level: no job (Slurm puts no process here)
  const auto job = id_after(rest[1], "job_");
  if (!job) return unrecognized();
  SlurmJob j{.job_id = std::to_string(*job), .uid = uid};
  if (rest.size() >= 3) {
    j.step = step_of(rest[2]);
    if (j.step.empty()) return unrecognized();
  }
  if (rest.size() >= 4 && !id_after(rest[3], "task_")) return unrecognized();
  if (rest.size() > 4) return unrecognized();
  return {std::move(j), SlurmAbsent::none};
}

/// The elements after a v2 mark: job_<n>[/step_<s>[/user[/task_<n>|task_special]|/slurm]], or
/// "system".
SlurmResult below_v2(std::span<const std::string_view> rest) {
  if (rest.empty() || (rest.size() == 1 && rest[0] == "system")) return {};
  const auto job = id_after(rest[0], "job_");
  if (!job) return unrecognized();
  SlurmJob j{.job_id = std::to_string(*job)};
  if (rest.size() >= 2) {
    j.step = step_of(rest[1]);
    if (j.step.empty()) return unrecognized();
  }
  if (rest.size() >= 3) {
    if (rest[2] == "slurm") {
      if (rest.size() > 3) return unrecognized();
    } else if (rest[2] == "user") {
      if (rest.size() >= 4 && rest[3] != "task_special" && !id_after(rest[3], "task_"))
        return unrecognized();
      if (rest.size() > 4) return unrecognized();
    } else {
      return unrecognized();
    }
  }
  return {std::move(j), SlurmAbsent::none};
}

bool printable_name(std::string_view s) noexcept {
  if (s.empty() || s.size() > kMaxValue) return false;
  for (char c : s)
    if (c <= ' ' || c > '~') return false;
  return true;
}

bool decimal_value(std::string_view s) noexcept {
  return !s.empty() && s.size() <= kMaxValue && decimal_u32(s).has_value();
}

}  // namespace

SlurmResult slurm_from_cgroup_path(std::string_view path) {
  const auto elements = split_path(path);
  // The first mark counts: v2's step_<s>/slurm (the slurmstepd) is below the scope, not a mark.
  for (std::size_t i = 0; i < elements.size(); ++i) {
    const Mark m = mark_of(elements[i]);
    if (m == Mark::none) continue;
    const std::span<const std::string_view> rest(elements.data() + i + 1, elements.size() - i - 1);
    return m == Mark::v1 ? below_v1(rest) : below_v2(rest);
  }
  return {};
}

SlurmResult parse_slurm_cgroup(std::string_view text) {
  SlurmResult result;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    const std::size_t first = line.find(':');
    const std::size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    auto r = slurm_from_cgroup_path(line.substr(second + 1));
    if (r.job) return r;
    if (r.absent == SlurmAbsent::unrecognized) result.absent = SlurmAbsent::unrecognized;
  }
  return result;
}

void SlurmEnvironScanner::entry(std::string_view e) {
  if (!starts_with(e, "SLURM_")) return;
  const std::size_t eq = e.find('=');
  if (eq == std::string_view::npos) return;
  const std::string_view key = e.substr(0, eq);
  const std::string_view value = e.substr(eq + 1);
  if (key == "SLURM_JOB_ID" && decimal_value(value)) {
    env_.job_id = std::string(value);
    old_job_id_ = false;
  } else if (key == "SLURM_JOBID" && decimal_value(value) && env_.job_id.empty()) {
    env_.job_id = std::string(value);
    old_job_id_ = true;
  } else if (key == "SLURM_ARRAY_JOB_ID" && decimal_value(value)) {
    env_.array_job_id = std::string(value);
  } else if (key == "SLURM_ARRAY_TASK_ID" && decimal_value(value)) {
    env_.array_task_id = std::string(value);
  } else if (key == "SLURM_JOB_USER" && printable_name(value)) {
    env_.user = std::string(value);
  }
}

void SlurmEnvironScanner::feed(std::string_view piece) {
  while (!piece.empty()) {
    const std::size_t nul = piece.find('\0');
    if (nul == std::string_view::npos) {
      if (skipping_) return;
      if (carry_.size() + piece.size() > kMaxEntry) {
        carry_.clear();
        skipping_ = true;  // too long to be one of ours: skip to its end
      } else {
        carry_.append(piece);
      }
      return;
    }
    const std::string_view part = piece.substr(0, nul);
    piece.remove_prefix(nul + 1);
    if (skipping_) {
      skipping_ = false;
      continue;
    }
    if (carry_.empty()) {
      entry(part);
    } else if (carry_.size() + part.size() <= kMaxEntry) {
      carry_.append(part);
      entry(carry_);
      carry_.clear();
    } else {
      carry_.clear();
    }
  }
}

bool SlurmEnvironScanner::complete() const noexcept {
  return !env_.job_id.empty() && !old_job_id_ && !env_.array_job_id.empty() &&
         !env_.array_task_id.empty() && !env_.user.empty();
}

SlurmEnviron SlurmEnvironScanner::finish() {
  if (!skipping_ && !carry_.empty()) entry(carry_);
  carry_.clear();
  skipping_ = false;
  return std::move(env_);
}

SlurmEnviron parse_slurm_environ(std::string_view text) {
  SlurmEnvironScanner scanner;
  scanner.feed(text);
  return scanner.finish();
}

std::optional<std::uint32_t> parse_status_uid(std::string_view text) {
  std::size_t at = text.find("\nUid:");
  if (at == std::string_view::npos) {
    if (!starts_with(text, "Uid:")) return std::nullopt;
    at = 0;
  } else {
    at += 1;
  }
  std::size_t p = at + 4;
  while (p < text.size() && (text[p] == ' ' || text[p] == '\t')) ++p;
  std::size_t e = p;
  while (e < text.size() && text[e] >= '0' && text[e] <= '9') ++e;
  std::uint32_t uid = 0;
  const auto [end, ec] = std::from_chars(text.data() + p, text.data() + e, uid);
  if (ec != std::errc{} || end == text.data() + p) return std::nullopt;
  return uid;
}

std::optional<std::uint64_t> parse_stat_start_time(std::string_view text) {
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so fields count from the
  // last ')'. Field 3 (state) follows it; starttime is field 22.
  const std::size_t close = text.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::size_t p = close + 1;
  for (int field = 3; field <= 22; ++field) {
    while (p < text.size() && text[p] == ' ') ++p;
    std::size_t e = p;
    while (e < text.size() && text[e] != ' ' && text[e] != '\n') ++e;
    if (e == p) return std::nullopt;
    if (field == 22) {
      std::uint64_t v = 0;
      const auto [end, ec] = std::from_chars(text.data() + p, text.data() + e, v);
      if (ec != std::errc{} || end != text.data() + e) return std::nullopt;
      return v;
    }
    p = e;
  }
  return std::nullopt;
}

}  // namespace gpustream::probes
