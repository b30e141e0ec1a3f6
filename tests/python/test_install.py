"""`cmake --install` puts the package into <prefix>/lib/python3/dist-packages; a fresh
interpreter imports it from there with PYTHONPATH (and not from the build tree)."""
import os
import subprocess
import sys

from conftest import env_path


def test_installed_module_imports_from_the_prefix(tmp_path):
    prefix = tmp_path / "prefix"
    subprocess.run([env_path("CMAKE_COMMAND"), "--install", env_path("GPUSTREAM_BINARY_DIR"),
                    "--prefix", str(prefix), "--component", "python"], check=True,
                   capture_output=True, timeout=300)
    site = prefix / "lib" / "python3" / "dist-packages"
    assert (site / "gpustream" / "__init__.py").is_file()
    # Typed (PEP 561) and versioned: the stubs, the marker and the version go with the package.
    for name in ("_gpustream.pyi", "py.typed", "_version.py"):
        assert (site / "gpustream" / name).is_file(), name
    (ext,) = (site / "gpustream").glob("_gpustream*.so")
    assert ext.stat().st_size < 30 << 20, "installed with its debug information (not stripped)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)
    code = ("import gpustream\n"
            "print(gpustream.__file__)\n"
            "with gpustream.Telemetry(probes=['simulated'], simulate=1, interval=0.05) as t:\n"
            "    print(len(t.wait_for_first_samples(10)[0].devices))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.split()
    assert lines[0].startswith(str(site)), lines
    assert lines[1] == "1"
