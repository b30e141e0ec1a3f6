#include "stream.hpp"

#include <chrono>
#include <iostream>

#include "format.hpp"
#include "gpustream/json.hpp"
#include "gpustream/terminal_text.hpp"

namespace gpustream::cli {

bool in_container(const ProcessSample& p, std::string_view selector) {
  if (!p.container || selector.empty()) return false;
  const auto& c = *p.container;
  if (selector.size() >= 4 && c.id.size() >= selector.size() &&
      std::string_view(c.id).substr(0, selector.size()) == selector)
    return true;
  return !c.pod_uid.empty() && c.pod_uid == selector;
}

GpuSnapshot only_container(const GpuSnapshot& s, std::string_view selector) {
  GpuSnapshot out = s;
  out.devices.clear();
  for (const auto& d : s.devices) {
    DeviceSample kept = d;
    kept.processes.clear();
    for (const auto& p : d.processes)
      if (in_container(p, selector)) kept.processes.push_back(p);
    if (!kept.processes.empty()) out.devices.push_back(std::move(kept));
  }
  return out;
}

std::string Printer::render(const GpuSnapshot& s) {
  if (container_.empty()) return render_one(s);
  return render_one(only_container(s, container_));
}

std::string Printer::render_one(const GpuSnapshot& s) {
  if (json_) return to_json_string(s) + "\n";
  latest_[s.probe] = s;
  std::vector<const GpuSnapshot*> ptrs;
  for (const auto& [_, snap] : latest_) ptrs.push_back(&snap);
  std::string text = tty_ ? "\x1b[H\x1b[2J" : "";
  text += table_header() + "\n" + format_table(ptrs);
  if (!tty_) return text + "\n";
  std::lock_guard lock(events_mu_);
  if (!events_.empty()) {
    text += "\nGPU events (newest last):\n";
    for (const auto& line : events_) text += "  " + line + "\n";
  }
  return text;
}

void Printer::note_event(std::string line) {
  if (json_ || !tty_) return;
  std::lock_guard lock(events_mu_);
  events_.push_back(std::move(line));
  while (events_.size() > kEventLines) events_.pop_front();
}

void print_gap(const Gap& g) {
  std::cerr << "gpustream: missed " << g.missed << " snapshots (" << terminal_safe(g.reason)
            << ")\n";
}

StreamResult stream_queue(SnapshotQueue& queue, Output& out, Printer& printer,
                          const StreamLimits& limits, const std::atomic<bool>& stop) {
  using Clock = std::chrono::steady_clock;
  using End = StreamResult::End;
  const auto started = Clock::now();
  StreamResult r;
  const auto ended = [&r](End why) {
    r.end = why;
    return r;
  };
  for (;;) {
    if (stop.load()) return ended(End::stopped);
    if (limits.stop_when_reader_gone && out.reader_gone()) return ended(End::reader_gone);
    if (limits.duration_seconds > 0 &&
        Clock::now() - started > std::chrono::duration<double>(limits.duration_seconds))
      return ended(End::limit);
    // Short waits: a signal, the duration and a reader that left are seen within 200 ms.
    auto item = queue.pop_for(std::chrono::milliseconds{200});
    if (!item) {
      if (queue.closed()) return ended(End::channel_gone);
      continue;
    }
    if (const auto* gap = std::get_if<Gap>(&*item)) {
      print_gap(*gap);
      ++r.gaps;
      if (limits.write_gaps && !out.write(gap_line(*gap))) return ended(End::output_failed);
      continue;
    }
    if (!out.write(printer.render(*std::get<SnapshotPtr>(*item))))
      return ended(out.broken_pipe() ? End::reader_gone : End::output_failed);
    ++r.snapshots;
    if (limits.count > 0 && r.snapshots >= limits.count) return ended(End::limit);
  }
}

}  // namespace gpustream::cli
