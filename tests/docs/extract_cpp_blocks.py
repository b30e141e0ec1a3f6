#!/usr/bin/env python3
"""Extracts every ```cpp block of the given Markdown files into C++ files that the test suite
compiles (tests/docs/CMakeLists.txt), so that no code in the docs can drift from the API.

What the line right before a block says (an HTML comment, invisible on the rendered page):
  (nothing)                                      a complete program: compiled as it is, with
                                                 only its own #includes
  <!-- doc-test: fragment; given: DECLS -->      statements: compiled in a function body, after
                                                 DECLS (the names the text assumes), with every
                                                 public header included
  <!-- doc-test: skip: REASON -->                not compiled; REASON is required and says why

Usage: extract_cpp_blocks.py OUT_DIR ROOT FILE.md...   Writes OUT_DIR/<name>_<line>.cpp and
prints one line per block: "compile <file.cpp>" or "skip <doc>:<line> <reason>".
"""
import os
import re
import sys

MARKER = re.compile(r"^<!--\s*doc-test:\s*(.*?)\s*-->\s*$")

PRELUDE = """// Generated from {doc}:{line} by tests/docs/extract_cpp_blocks.py. Edit the doc, not this.
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <fmt/format.h>

#include "gpustream/channel.hpp"
#include "gpustream/config.hpp"
#include "gpustream/dynamic_library.hpp"
#include "gpustream/library_session.hpp"
#include "gpustream/logging.hpp"
#include "gpustream/measurement.hpp"
#include "gpustream/model.hpp"
#include "gpustream/planner.hpp"
#include "gpustream/subprocess.hpp"
#include "gpustream/telemetry.hpp"
#include "gpustream/probes/nvidia_probe.hpp"
#include "gpustream/probes/registry.hpp"

using namespace std::chrono_literals;
"""


def blocks(text):
    """Yields (line number of the opening fence, marker text or None, code)."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```cpp":
            start = i + 1
            j = start
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            k = i - 1
            while k >= 0 and not lines[k].strip():
                k -= 1
            m = MARKER.match(lines[k].strip()) if k >= 0 else None
            yield i + 1, (m.group(1) if m else None), lines[start:j]
            i = j + 1
        else:
            i += 1


def main():
    out_dir, root, docs = sys.argv[1], sys.argv[2], sys.argv[3:]
    os.makedirs(out_dir, exist_ok=True)
    report = []
    for doc in docs:
        rel = os.path.relpath(doc, root)
        with open(doc, encoding="utf-8") as f:
            text = f.read()
        for line, marker, code in blocks(text):
            stem = re.sub(r"[^A-Za-z0-9]+", "_", rel) + "_" + str(line)
            origin = '#line {} "{}"\n'.format(line + 1, os.path.abspath(doc))
            if marker is None:
                # A complete program includes what it uses itself: no prelude.
                body = ("// Generated from {}:{} by tests/docs/extract_cpp_blocks.py.\n".format(rel, line)
                        + origin + "\n".join(code) + "\n")
            elif marker.startswith("skip"):
                reason = marker[len("skip"):].lstrip(":").strip()
                if not reason:
                    sys.exit("{}:{}: a skipped block needs a reason: <!-- doc-test: skip: why -->"
                             .format(rel, line))
                report.append("skip {}:{} {}".format(rel, line, reason))
                continue
            elif marker.startswith("fragment"):
                given = ""
                m = re.search(r"given:\s*(.*)$", marker)
                if m:
                    given = m.group(1)
                body = (PRELUDE.format(doc=rel, line=line) +
                        "\n[[maybe_unused]] static void doc_fragment() {\n" + given + "\n" +
                        origin + "\n".join(code) + "\n}\n")
            else:
                sys.exit("{}:{}: unknown doc-test marker '{}'".format(rel, line, marker))
            path = os.path.join(out_dir, stem + ".cpp")
            old = None
            if os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    old = f.read()
            if old != body:  # unchanged files keep their time stamp: no rebuild
                with open(path, "w", encoding="utf-8") as f:
                    f.write(body)
            report.append("compile " + path)
    print("\n".join(report))


if __name__ == "__main__":
    main()
