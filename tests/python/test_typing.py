"""The package is typed (PEP 561): mypy --strict (Debian's, under this interpreter) passes on a
client written against the stubs and refuses misuses; the stubs (python/gpustream/_gpustream.pyi)
agree with the module: the same public names, the same parameters as inspect.signature() reads
from the module, and a docstring on every public member."""
import ast
import inspect
import os
import re
import subprocess
import sys

import pytest

import gpustream
from gpustream import _gpustream
from conftest import SOURCE_DIR

PACKAGE = os.path.dirname(gpustream.__file__)
CLIENTS = os.path.join(SOURCE_DIR, "tests", "python", "clients")
STUB = os.path.join(PACKAGE, "_gpustream.pyi")
# Names of the stub's own (its type aliases), not the module's.
STUB_ONLY = {"_T", "_Names", "_Json"}


def run_mypy(path, tmp_path):
    """mypy --strict on `path`, with the build's package first on its search path."""
    env = os.environ.copy()
    env["MYPYPATH"] = os.path.dirname(PACKAGE)
    proc = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
                           "--cache-dir", str(tmp_path / "mypy-cache"), path],
                          capture_output=True, text=True, timeout=600, env=env)
    assert "No module named mypy" not in proc.stderr, (
        f"mypy is not installed for {sys.executable} (Debian: apt-get install mypy; "
        "scripts/deps.sh test installs it)")
    return proc


def test_the_package_is_typed_and_versioned():
    assert os.path.isfile(os.path.join(PACKAGE, "py.typed"))
    assert os.path.isfile(STUB)
    cmake = open(os.path.join(SOURCE_DIR, "CMakeLists.txt"), encoding="utf-8").read()
    version = re.search(r"project\(gpustream VERSION (\S+)", cmake).group(1)
    assert gpustream.__version__ == version


def test_mypy_strict_passes_on_a_client_written_against_the_stubs(tmp_path):
    proc = run_mypy(os.path.join(CLIENTS, "typed_client.py"), tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_strict_refuses_misuses(tmp_path):
    path = os.path.join(CLIENTS, "misused_client.py")
    marked = {i for i, line in enumerate(open(path, encoding="utf-8"), 1)
              if line.rstrip().endswith("# error")}
    proc = run_mypy(path, tmp_path)
    found = {int(m.group(1)) for m in re.finditer(r"misused_client\.py:(\d+): error", proc.stdout)}
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert found == marked, proc.stdout


def test_the_typed_client_runs():
    proc = subprocess.run([sys.executable, os.path.join(CLIENTS, "typed_client.py")],
                          capture_output=True, text=True, timeout=120, env=os.environ.copy())
    assert proc.returncode == 0, proc.stderr


def stub_entries():
    """{name: node} of the stub's top level, and {class: {member: node}}."""
    tree = ast.parse(open(STUB, encoding="utf-8").read())
    top, classes = {}, {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            top[node.name] = node
            classes[node.name] = {n.name if not isinstance(n, ast.AnnAssign) else n.target.id: n
                                  for n in node.body
                                  if isinstance(n, (ast.FunctionDef, ast.AnnAssign))}
        elif isinstance(node, ast.FunctionDef):
            top[node.name] = node
        elif isinstance(node, ast.Assign):
            top.update({t.id: node for t in node.targets})
    return top, classes


def runtime_members(cls):
    """The members a class of the module defines itself (not object's), public or in the stub."""
    return {name: value for name, value in vars(cls).items()
            if not (name.startswith("__") and name.endswith("__")) or name in (
                "__init__", "__enter__", "__exit__", "__iter__", "__next__", "__getitem__",
                "__bool__")}


def module_names():
    return {n for n in dir(_gpustream) if not n.startswith("__")}


def test_every_name_of_the_module_has_a_stub_entry_and_back():
    top, classes = stub_entries()
    assert set(top) - STUB_ONLY == module_names() - {"_BenchChannel"}
    for name, members in classes.items():
        cls = getattr(_gpustream, name)
        if issubclass(cls, BaseException):
            continue  # instance attributes only
        public = {n for n in runtime_members(cls) if not n.startswith("_") or n in members}
        assert set(members) == public, name


def test_every_public_member_has_a_docstring():
    missing = []
    for name in sorted(set(gpustream.__all__) - {"__version__"}):
        obj = getattr(gpustream, name)
        if not (obj.__doc__ or "").strip():
            missing.append(name)
        if not inspect.isclass(obj) or issubclass(obj, BaseException):
            continue
        for member, value in runtime_members(obj).items():
            if member.startswith("_") and not member.startswith("__"):
                continue  # private (_begin_window, ...)
            if not (getattr(value, "__doc__", None) or "").strip():
                missing.append(f"{name}.{member}")
    assert missing == []


def stub_parameters(fn):
    """[(name, kind, default)] of a stub's def (default: the literal, or inspect's empty)."""
    a = fn.args
    out = []
    positional = a.posonlyargs + a.args
    defaults = [inspect.Parameter.empty] * (len(positional) - len(a.defaults)) + [
        ast.literal_eval(d) for d in a.defaults]
    for arg, default in zip(positional, defaults):
        out.append((arg.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, default))
    if a.vararg:
        out.append((a.vararg.arg, inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.empty))
    for arg, default in zip(a.kwonlyargs, a.kw_defaults):
        out.append((arg.arg, inspect.Parameter.KEYWORD_ONLY,
                    inspect.Parameter.empty if default is None else ast.literal_eval(default)))
    return out


def signature_cases():
    top, classes = stub_entries()
    cases = []
    for name, node in top.items():
        if isinstance(node, ast.FunctionDef):
            cases.append(pytest.param(None, name, node, id=name))
    for cls, members in classes.items():
        for name, node in members.items():
            if isinstance(node, ast.FunctionDef) and not any(
                    isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list):
                cases.append(pytest.param(cls, name, node, id=f"{cls}.{name}"))
    return cases


@pytest.mark.parametrize("cls, name, node", signature_cases())
def test_inspect_signature_matches_the_stub(cls, name, node):
    obj = getattr(_gpustream, name) if cls is None else getattr(getattr(_gpustream, cls), name)
    sig = inspect.signature(obj)  # ValueError when the module gives none
    got = [(p.name, p.kind if p.kind != inspect.Parameter.POSITIONAL_ONLY
            else inspect.Parameter.POSITIONAL_OR_KEYWORD, p.default)
           for p in sig.parameters.values()]
    assert got == stub_parameters(node)


def test_signatures_of_bound_methods_and_classes():
    assert str(inspect.signature(gpustream.Telemetry)) == (
        "(probes=None, interval=None, simulate=None, config=None)")
    t = gpustream.Telemetry(probes=["simulated"], simulate=1)
    assert list(inspect.signature(t.stream).parameters) == [
        "probes", "devices", "timeout", "policy", "capacity"]
    t.stop()
