"""The suite as asv sees it: discovery, argument checks, and one run of every benchmark but the
instruction counts (test_release_span.py runs those on the newest release, bench_staging's on the
oldest too)."""

import json
import os
import re
import subprocess
import sys

from asv_tools import asv, benchmark_names, config, git_repo


def test_asv_check_passes(tmp_path):
    conf = config(tmp_path, git_repo(tmp_path / "repo"))
    rc, out = asv(conf, "check", "--python=same")
    assert rc == 0, out


# the counts' valgrind children were 443 s of this test's 530 s; the release-span test runs
# them, and pins which are n/a
NOT_COUNTS = "^(?!.*cpu_instructions)"


def test_every_benchmark_but_the_counts_runs_once_without_error(tmp_path):
    conf = config(tmp_path, git_repo(tmp_path / "repo"))
    rc, out = asv(conf, "machine", "--yes", "--machine", "ci")
    assert rc == 0, out
    # existing environments ignore matrix env vars, so the profile comes from here
    rc, out = asv(conf, "run", "--python=same", "--quick", "--dry-run", "--show-stderr",
                  "--machine", "ci", "--bench", NOT_COUNTS, env={"JAXBENCH_PROFILE": "quick"})
    assert rc == 0, out
    assert "failed" not in out.lower(), out
    names = [n for n in sorted(benchmark_names(tmp_path / "results"))
             if re.search(NOT_COUNTS, n)]
    timed = [n for n in names if ".time_" in n]
    assert len(timed) >= 18, timed  # two seed workloads x nine phases
    # one status line per benchmark: "ok" for timings, the value for tracks, n/a for a skip
    lines = re.findall(r"^\[\s*[\d.]+%\] ··· (\S*bench_\S+|\.\.\.\S+)\s+(\S.*)$", out, re.M)
    assert len(lines) == len(names), out
    assert not [line for line in lines if line[1].strip() == "failed"], out


def test_importing_the_suite_starts_no_backend():
    """asv's forkserver imports the suite once and forks a child per benchmark: the fork is
    safe only while no XLA backend (and its threads) exists in the parent. Discovery imports
    every module and instantiates every class; neither may touch a device."""
    code = r"""
import importlib, inspect, json, pkgutil
import benchmarks
from jax._src import xla_bridge
for info in pkgutil.iter_modules(benchmarks.__path__):
    module = importlib.import_module(f"benchmarks.{info.name}")
    for _, cls in inspect.getmembers(module, inspect.isclass):
        if cls.__module__ == module.__name__ and not inspect.isabstract(cls):
            try:
                cls()
            except TypeError:
                pass  # plain helper classes with required arguments
print(json.dumps(xla_bridge.backends_are_initialized()))
"""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                          text=True, env=dict(os.environ, JAXBENCH_PROFILE="regular"))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) is False
