"""JAXBENCH_CPU_THREADS: benchmark processes pinned to one CPU, with one BLAS thread.

Each check runs in a fresh interpreter, as asv's benchmark processes do (this pytest process
keeps every CPU: conftest sets the variable to 'all').
"""

import json
import os
import subprocess
import sys

import pytest
from asv_tools import asv, config, git_repo

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROBE = r"""
import json, os, subprocess, sys
import numpy  # loaded first, as asv_runner (through pympler) loads it
from jaxbench_helpers.runtime import cpu_threads, platform
platform.configure()
import jax, jax.numpy as jnp, threadpoolctl
jnp.ones((64, 64)).sum().block_until_ready()
child = subprocess.run([sys.executable, "-c", "import os; print(len(os.sched_getaffinity(0)))"],
                       capture_output=True, text=True).stdout.strip()
print(json.dumps({
    "cpus": sorted(os.sched_getaffinity(0)),
    "blas": sorted({p["num_threads"] for p in threadpoolctl.threadpool_info()
                    if p["user_api"] == "blas"}),
    "child_cpus": int(child),
    "again": cpu_threads.apply(),
}))
"""


def _probe(**env):
    environ = {k: v for k, v in os.environ.items() if k != "JAXBENCH_CPU_THREADS"}
    environ.update(env)
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True,
                          text=True, env=environ, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


needs_two_cpus = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2,
                                    reason="pinning is visible only with 2 CPUs or more")


@needs_two_cpus
def test_one_pins_the_process_its_blas_and_its_children_to_one_cpu():
    rc, out, err = _probe(JAXBENCH_CPU_THREADS="1", JAXBENCH_PROFILE="quick")
    assert rc == 0, err
    found = json.loads(out.strip().splitlines()[-1])
    assert found["cpus"] == [max(os.sched_getaffinity(0))]  # the last CPU: asv keeps the rest
    assert found["blas"] == [1]
    assert found["child_cpus"] == 1
    assert found["again"] == found["cpus"]  # a second call changes nothing


@needs_two_cpus
@pytest.mark.parametrize("profile, platform, pinned", [
    ("regular", "cpu", True), ("quick", "cpu", False), ("large", "cpu", False),
    ("regular", "gpu", False)])
def test_the_profile_decides_without_the_variable(profile, platform, pinned):
    # with no GPU here, jax falls back to the CPU: the probe still runs and shows the mask
    rc, out, err = _probe(JAXBENCH_PROFILE=profile, JAXBENCH_PLATFORM=platform)
    assert rc == 0, err
    found = json.loads(out.strip().splitlines()[-1])
    assert (len(found["cpus"]) == 1) is pinned


def test_all_keeps_every_cpu():
    rc, out, err = _probe(JAXBENCH_CPU_THREADS="all", JAXBENCH_PROFILE="regular")
    assert rc == 0, err
    assert json.loads(out.strip().splitlines()[-1])["cpus"] == sorted(os.sched_getaffinity(0))


def test_a_bad_value_is_a_clear_error():
    rc, _, err = _probe(JAXBENCH_CPU_THREADS="2")
    assert rc != 0
    assert "JAXBENCH_CPU_THREADS='2' is not a choice; use 'all'" in err


@needs_two_cpus
def test_pinning_after_the_backend_started_is_a_clear_error():
    code = ("import jax; jax.devices(); from jaxbench_helpers.runtime import cpu_threads; "
            "cpu_threads.apply()")
    environ = dict(os.environ, JAXBENCH_CPU_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, env=environ)
    assert proc.returncode != 0
    assert "came too late: jax has started its backend" in proc.stderr


@pytest.mark.parametrize("bridge, started", [
    # jax 0.4.2x and later
    ({"backends_are_initialized": lambda: False}, False),
    ({"backends_are_initialized": lambda: True}, True),
    # jax 0.4.20 has no backends_are_initialized: its backends dict says
    ({"_backends": {}}, False),
    ({"_backends": {"cpu": object()}}, True),
])
def test_whether_the_backend_started_is_read_on_every_release(monkeypatch, bridge, started):
    import types

    from jaxbench_helpers.runtime import cpu_threads

    module = types.ModuleType("jax._src.xla_bridge")
    module.__dict__.update(bridge)
    monkeypatch.setitem(sys.modules, "jax._src.xla_bridge", module)
    assert cpu_threads._backend_started() is started


def test_asv_records_how_many_cpus_the_benchmarks_had(tmp_path):
    """A real asv run (existing environment, forkserver): the pin reaches the forked
    benchmark process, and the result says so."""
    repo = git_repo(tmp_path / "repo")
    head = subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    conf = config(tmp_path, repo)
    rc, out = asv(conf, "machine", "--yes", "--machine", "ci")
    assert rc == 0, out
    found = {}
    for value in ("1", "all"):
        rc, out = asv(conf, "run", "--python=same", "--set-commit-hash", head, "--machine",
                      "ci", "--show-stderr",
                      "-b", r"Threads\.track_cpus_usable",
                      env={"JAXBENCH_PROFILE": "quick", "JAXBENCH_CPU_THREADS": value})
        assert rc == 0, out
        result, = [f for f in os.listdir(tmp_path / "results" / "ci") if f != "machine.json"]
        data = json.load(open(tmp_path / "results" / "ci" / result))
        found[value] = data["results"]["bench_environment.Threads.track_cpus_usable"][0]
    assert found == {"1": [1.0], "all": [float(len(os.sched_getaffinity(0)))]}


SPLIT_PROBE = """
import json, os
from jaxbench_helpers.runtime import platform
platform.configure()
device = platform.device()
import jax, jax.numpy as jnp
(jnp.ones((256, 256)) @ jnp.ones((256, 256))).block_until_ready()
def allowed(tid):
    for line in open(f"/proc/self/task/{tid}/status"):
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":")[1].strip()
main = os.getpid()
print(json.dumps({"main": sorted(os.sched_getaffinity(0)),
                  "others": sorted({allowed(t) for t in os.listdir("/proc/self/task")
                                    if int(t) != main})}))
"""


@needs_two_cpus
def test_split_keeps_the_python_thread_and_xlas_pools_apart():
    environ = dict(os.environ, JAXBENCH_CPU_THREADS="split", JAXBENCH_PROFILE="quick")
    proc = subprocess.run([sys.executable, "-c", SPLIT_PROBE], cwd=ROOT, capture_output=True,
                          text=True, env=environ, timeout=300)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    cpus = sorted(os.sched_getaffinity(0))
    assert found["main"] == [cpus[-1]]
    rest = cpus[:-1]
    expected = str(rest[0]) if len(rest) == 1 else f"{rest[0]}-{rest[-1]}"
    assert found["others"] == [expected], found  # every thread the backend made
