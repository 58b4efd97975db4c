"""benchmarks/fingerprints.json is current, and an edit of what a benchmark times fails until
its version is bumped (shown with planted edits in a copy of the suite)."""

import ast
import dataclasses
import json
import os
import shutil
import subprocess
import sys

import pytest

from benchmarks import fingerprints
from jaxbench_helpers.runtime import profiles

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_file_is_current():
    current, info = fingerprints.compute()
    bump, stale = fingerprints.problems(fingerprints.load(), current, info)
    assert bump == [], "\n".join(bump)
    assert stale == [], "\n".join(stale)


def test_every_profile_field_is_a_size_or_sampling():
    fields = {f.name for f in dataclasses.fields(profiles.Profile)}
    assert fields == set(fingerprints.SIZE_FIELDS) | set(fingerprints.SAMPLING_FIELDS)


def _text(source):
    return fingerprints._dump(fingerprints._strip_docstrings(ast.parse(source)))


def test_docstrings_comments_and_formatting_do_not_count():
    plain = "def f(x):\n    return jnp.dot(x, x)\n"
    assert _text(plain) == _text('def f(x):\n    """Doc."""\n    # why\n    return jnp.dot(\n'
                                 '        x,\n        x)\n')
    assert _text(plain) != _text("def f(x):\n    return jnp.dot(x, x.T)\n")
    assert _text('def f():\n    """Only a docstring."""\n') == _text("def f():\n    pass\n")


# ---- planted edits in a copy of the suite --------------------------------------------------

CHECK = """
import json, sys
from benchmarks import fingerprints as f
current, info = f.compute()
bump, stale = f.problems(f.load(), current, info)
print(json.dumps({"bump": bump, "stale": stale}))
"""


@pytest.fixture(scope="module")
def suite_copy(tmp_path_factory):
    """A function making a fresh copy of the suite (benchmarks/ with its fingerprints.json,
    and the runtime) in which to plant an edit; the copy shadows the installed helpers."""
    counter = iter(range(100))

    def make():
        root = tmp_path_factory.mktemp(f"suite{next(counter)}")
        shutil.copytree(os.path.join(ROOT, "benchmarks"), root / "benchmarks",
                        ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(os.path.join(ROOT, "jaxbench_helpers"), root / "jaxbench_helpers",
                        ignore=shutil.ignore_patterns("__pycache__"))
        return root

    return make


def _run(root, *args):
    env = dict(os.environ, PYTHONPATH=str(root), JAX_PLATFORMS="cpu")
    return subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300)


def _check(root):
    proc = _run(root, "-c", CHECK)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _plant(root, path, old, new):
    path = root / path
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} is not once in {path}"
    path.write_text(text.replace(old, new))


def _bumps(found):
    """The benchmark names the bump messages ask about."""
    return sorted(m.split()[1] for m in found["bump"])


def test_the_copy_of_the_suite_checks_clean(suite_copy):
    assert _check(suite_copy()) == {"bump": [], "stale": []}


def test_an_edited_program_must_bump_its_version(suite_copy):
    root = suite_copy()
    _plant(root, "benchmarks/bench_matmul.py", "return jnp.dot(x, x)", "return jnp.dot(x, x.T)")
    found = _check(root)
    print("\n".join(found["bump"]))
    names = _bumps(found)
    assert names and all(n.startswith("bench_matmul.SquareMatmul.") for n in names)
    assert "bench_matmul.SquareMatmul.time_run" in names
    message = found["bump"][0]
    assert "benchmarks.bench_matmul.SquareMatmul" in message
    assert "bump `version` of bench_matmul.SquareMatmul," in message
    assert fingerprints.COMMAND in message
    # the command refuses to record it, unless told the meaning is the same
    proc = _run(root, "-m", "benchmarks.fingerprints")
    assert proc.returncode == 1 and "not written" in proc.stderr
    assert _bumps(_check(root)) == names
    proc = _run(root, "-m", "benchmarks.fingerprints", "--same-meaning",
                "bench_matmul.SquareMatmul.*")
    assert proc.returncode == 0, proc.stderr
    assert _check(root) == {"bump": [], "stale": []}


def test_a_bumped_version_needs_the_file_regenerated(suite_copy):
    root = suite_copy()
    _plant(root, "benchmarks/bench_matmul.py", "return jnp.dot(x, x)", "return jnp.dot(x, x.T)")
    _plant(root, "benchmarks/bench_matmul.py", '''    count_params = [("float32",)]

    def x64(self, dtype):
        return dtype == "float64"

    @staticmethod
    def program(x):
        return jnp.dot(x, x.T)''', '''    count_params = [("float32",)]
    version = "2"

    def x64(self, dtype):
        return dtype == "float64"

    @staticmethod
    def program(x):
        return jnp.dot(x, x.T)''')
    found = _check(root)
    assert found["stale"] and all(fingerprints.COMMAND in m for m in found["stale"])
    assert any("bench_matmul.SquareMatmul.time_run is recorded as" in m for m in found["stale"])
    # these phases set their own version: the class's bump does not reach them
    # (and their instruction counts, whose version follows the phase's)
    assert _bumps(found) == ["bench_matmul.SquareMatmul.time_latency_100_calls",
                             "bench_matmul.SquareMatmul.time_numpy",
                             "bench_matmul.SquareMatmul.time_to_device",
                             "bench_matmul.SquareMatmul.time_to_host",
                             "bench_matmul.SquareMatmul.track_latency_cpu_instructions_per_call",
                             "bench_matmul.SquareMatmul.track_to_device_cpu_instructions",
                             "bench_matmul.SquareMatmul.track_to_host_cpu_instructions"]
    assert ("its version is the method's own (jaxbench_helpers.runtime.phases.LatencyPhase"
            ".time_latency_100_calls.version)") in found["bump"][0]
    assert ("its version is the method's own (jaxbench_helpers.runtime.phases.NumpyBaseline"
            ".time_numpy.version)") in found["bump"][1]
    assert ("its version is the method's own (jaxbench_helpers.runtime.phases.TransferPhases"
            ".time_to_device.version)") in found["bump"][2]
    assert ("its version is the method's own (jaxbench_helpers.runtime.phases.TransferPhases"
            ".time_to_host.version)") in found["bump"][3]
    proc = _run(root, "-m", "benchmarks.fingerprints")
    assert proc.returncode == 1 and "not written" in proc.stderr
    proc = _run(root, "-m", "benchmarks.fingerprints", "--same-meaning",
                "bench_matmul.SquareMatmul.time_latency_100_calls", "--same-meaning",
                "bench_matmul.SquareMatmul.time_numpy", "--same-meaning",
                "bench_matmul.SquareMatmul.time_to_device", "--same-meaning",
                "bench_matmul.SquareMatmul.time_to_host", "--same-meaning",
                "bench_matmul.SquareMatmul.track_*_cpu_instructions*")
    assert proc.returncode == 0, proc.stderr
    assert _check(root) == {"bump": [], "stale": []}


@pytest.mark.parametrize("path, old, new, expected", [
    # a module-level size table: every class that reads it
    ("benchmarks/bench_control_flow.py", '"regular": 20000', '"regular": 40000',
     ["bench_control_flow.Cond.time_run", "bench_control_flow.ForiLoop.time_run",
      "bench_control_flow.Scan.time_run", "bench_control_flow.Switch.time_run",
      "bench_control_flow.WhileLoop.time_run"]),
    # a helper two calls away from the class (bench_dispatch._scalars via _records' caller)
    ("benchmarks/bench_dispatch.py", "return [np.asarray(v) for v in data.normal((count,), "
     "dtype, seed)]", "return [np.asarray(2 * v) for v in data.normal((count,), dtype, seed)]",
     ["bench_dispatch.JitManyArgs.time_dispatch_100_calls",
      "bench_dispatch.JitManyArgs.time_latency_100_calls",
      "bench_dispatch.JitPytreeArgs.time_dispatch_100_calls",
      "bench_dispatch.JitPytreeArgs.time_latency_100_calls"]),
    # the timed line of a phase: every benchmark of that phase, no other
    ("jaxbench_helpers/runtime/phases.py", "        self.prepared.take(\"trace\")()",
     "        self.prepared.take(\"trace\")()\n        self.prepared.take(\"trace\")",
     "time_trace"),
    # a size of the profile that some workloads read
    ("jaxbench_helpers/runtime/profiles.py", 'Profile("regular", matrix_side=1000',
     'Profile("regular", matrix_side=2000', "matrix_side"),
    # a constant of the shared runtime
    ("jaxbench_helpers/runtime/workload.py", "DISPATCH_CALLS = 100", "DISPATCH_CALLS = 200",
     "dispatch"),
])
def test_a_planted_edit_asks_for_exactly_its_benchmarks(suite_copy, path, old, new, expected):
    root = suite_copy()
    _plant(root, path, old, new)
    found = _check(root)
    names = _bumps(found)
    print("\n".join(found["bump"][:3]))
    assert found["stale"] == []
    recorded = sorted(fingerprints.load()["benchmarks"])
    if expected == "time_trace":
        assert names == [n for n in recorded
                         if n.endswith((".time_trace", ".track_trace_cpu_instructions"))]
    elif expected == "matrix_side":
        assert sorted({n.rsplit(".", 1)[0] for n in names}) == [
            "bench_matmul.CenteredGram", "bench_matmul.SquareMatmul"]
    elif expected == "dispatch":
        assert names == [n for n in recorded
                         if n.endswith(("_100_calls", "_cpu_instructions_per_call"))]
    else:
        assert names == expected


def test_docstrings_and_comments_change_nothing(suite_copy):
    root = suite_copy()
    _plant(root, "benchmarks/bench_matmul.py", "        return jnp.dot(x, x)\n",
           "        # a comment\n        return jnp.dot(\n            x, x)\n")
    _plant(root, "jaxbench_helpers/runtime/phases.py",
           "        Timed: tracing the program once.",
           "        Timed: tracing the program once, and nothing else.")
    assert _check(root) == {"bump": [], "stale": []}
