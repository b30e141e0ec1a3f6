"""Every ```python block of README.md and docs/python.md runs (as tests/docs compiles the C++
ones), so the documented API cannot drift from the module."""
import os
import re
import subprocess
import sys

import pytest

from conftest import SOURCE_DIR

DOCS = ["README.md", os.path.join("docs", "python.md")]


def blocks():
    out = []
    for doc in DOCS:
        text = open(os.path.join(SOURCE_DIR, doc), encoding="utf-8").read()
        for i, code in enumerate(re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)):
            out.append(pytest.param(code, id=f"{doc}#{i}"))
    return out


def test_the_docs_have_python_blocks():
    assert len(blocks()) >= 2


@pytest.mark.parametrize("code", blocks())
def test_python_block_runs(code):
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=os.environ.copy())
    assert proc.returncode == 0, proc.stderr
