"""The multi-device benchmarks really run on 8 devices, with sharded outputs that match NumPy.

The device count is fixed when JAX's backend starts, and this test process has usually started
it with one CPU device already, so the benchmarks run in fresh interpreters here.
"""

import json
import os
import subprocess
import sys
import textwrap

import jax
import pytest

from benchmarks import bench_multidevice
from jaxbench_helpers.runtime import versions

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLASSES = ["ShardedMatmul", "ShardMapPsum", "ShardMapAllGather", "DataParallelStep"]


def _in_fresh_process(code, cwd):
    """Run ``code`` in a new interpreter (CPU, quick profile, no XLA_FLAGS of ours); returns
    what it printed last, as JSON."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env.update(JAXBENCH_PROFILE="quick", JAXBENCH_PLATFORM="cpu", JAX_PLATFORMS="cpu",
               PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


FILL_CACHE = """
    from benchmarks import bench_multidevice as m
    m.setup_cache()  # as asv runs it: every class warmed, every output checked against NumPy
    print("{}")
"""

RUN_EVERY_PHASE = f"""
    import json, os
    import jax
    from benchmarks import bench_multidevice as m
    from jaxbench_helpers.runtime import monitor

    report = {{}}
    for name in {CLASSES!r}:
        bench = getattr(m, name)()
        bench.setup("float32")
        prepared = bench.prepared
        out = prepared.run(*prepared.args)
        prepared.check(out)
        for phase in [p for p in dir(bench) if p.startswith("time_")]:
            getattr(bench, phase)("float32")  # fails if it compiles
        leaves = jax.tree_util.tree_leaves(out)
        report[name] = {{
            "devices": jax.device_count(),
            "input_devices": [len(a.sharding.device_set)
                              for a in jax.tree_util.tree_leaves(prepared.args)],
            "output_devices": [len(a.sharding.device_set) for a in leaves],
            "output_shards": [sorted({{tuple(s.data.shape) for s in a.addressable_shards}})
                              for a in leaves],
            "output_shapes": [list(a.shape) for a in leaves],
            "hlo": prepared.compiled().as_text(),
        }}
    report["events"] = monitor.snapshot()
    report["xla_flags"] = os.environ.get("XLA_FLAGS", "")
    print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """Every workload's setup_cache in one fresh process, then setup, one call and every phase
    in another (as asv runs them), both in the same folder."""
    shared = tmp_path_factory.mktemp("shared")
    _in_fresh_process(FILL_CACHE, shared)
    return _in_fresh_process(RUN_EVERY_PHASE, shared)


def test_setup_asks_xla_for_eight_host_devices(report):
    flag = f"{bench_multidevice.HOST_DEVICES_FLAG}={bench_multidevice.DEVICES}"
    print("XLA_FLAGS after setup:", report["xla_flags"])
    assert flag in report["xla_flags"].split()


@pytest.mark.parametrize("name", CLASSES)
def test_inputs_and_outputs_span_eight_devices(report, name):
    facts = report[name]
    print(f"{name}: {facts['devices']} devices; inputs on {facts['input_devices']}, outputs "
          f"on {facts['output_devices']} devices, shard shapes {facts['output_shards']}")
    assert facts["devices"] == 8
    assert set(facts["input_devices"]) == {8}
    assert set(facts["output_devices"]) == {8}


def test_sharded_matmul_output_is_split_in_eight_blocks(report):
    facts = report["ShardedMatmul"]
    rows, cols = facts["output_shapes"][0]
    assert facts["output_shards"] == [[[rows // 4, cols // 2]]]  # a 4x2 grid of blocks


def test_collectives_are_in_the_compiled_programs(report):
    assert "all-reduce" in report["ShardMapPsum"]["hlo"]
    # old jax lowers all_gather on CPU as a psum of zero-padded blocks (0.4.20 does)
    gather = report["ShardMapAllGather"]["hlo"]
    assert "all-gather" in gather or "all-reduce" in gather
    assert "all-reduce" in report["DataParallelStep"]["hlo"]  # the gradient all-reduce
    assert "all-reduce" not in report["ShardedMatmul"]["hlo"]  # each device owns its block


# programs each class's setup warms: the full-size one, and the tiny one where it has a
# dispatch or latency phase
WARMED_PROGRAMS = sum(1 + any(hasattr(getattr(bench_multidevice, name), phase)
                              for phase in ("time_dispatch_100_calls", "time_latency_100_calls"))
                      for name in CLASSES)


def persistent_cache_problems(events):
    """What the persistent-cache events of the setups show wrong; [] if every warmed program
    was loaded from what setup_cache left."""
    hits = events.get("/jax/compilation_cache/cache_hits", 0)
    misses = events.get("/jax/compilation_cache/cache_misses", 0)
    problems = []
    if hits < WARMED_PROGRAMS:
        problems.append(f"{hits} cache hits for {WARMED_PROGRAMS} warmed programs")
    if misses:
        problems.append(f"{misses} cache misses")
    return problems


def test_setup_loads_the_executables_setup_cache_compiled(report):
    events = report["events"]
    print("persistent cache:", {k: v for k, v in events.items() if "compilation_cache" in k})
    if versions.release(jax.__version__) < (0, 4, 26):
        pytest.skip("this jax has no persistent cache on CPU (before 0.4.26)")
    assert persistent_cache_problems(events) == []


def test_the_cache_check_fails_where_setup_compiles(tmp_path):
    """The control: the same setups in a folder setup_cache never filled compile everything."""
    events = _in_fresh_process(RUN_EVERY_PHASE, tmp_path)["events"]
    assert persistent_cache_problems(events) == [f"0 cache hits for {WARMED_PROGRAMS} "
                                                 "warmed programs"]


ONE_DEVICE_FIRST = f"""
    import json
    import jax
    from benchmarks import bench_multidevice as m

    jax.devices()  # the backend starts here, with one CPU device
    messages = {{}}
    for name in {CLASSES!r}:
        bench = getattr(m, name)()
        bench.warm_compilation_cache()  # skips quietly, as the base class does
        try:
            bench.setup("float32")
        except NotImplementedError as err:
            messages[name] = str(err)
    print(json.dumps(messages))
"""


def test_a_backend_started_with_one_device_skips_with_the_reason(tmp_path):
    messages = _in_fresh_process(ONE_DEVICE_FIRST, tmp_path)
    print(messages.get("ShardedMatmul"))
    assert sorted(messages) == sorted(CLASSES)
    for message in messages.values():
        assert message.startswith("needs 8 cpu devices, this process has 1")
        assert "--xla_force_host_platform_device_count=8" in message
        assert "already started" in message


def test_the_flag_is_added_once_on_cpu_and_never_elsewhere(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false")
    monkeypatch.setenv("JAXBENCH_PLATFORM", "cpu")
    bench_multidevice.ask_for_host_devices()
    bench_multidevice.ask_for_host_devices()
    assert os.environ["XLA_FLAGS"] == (
        "--xla_cpu_enable_fast_math=false --xla_force_host_platform_device_count=8")
    monkeypatch.setenv("XLA_FLAGS", "")
    monkeypatch.setenv("JAXBENCH_PLATFORM", "gpu")
    bench_multidevice.ask_for_host_devices()
    assert os.environ["XLA_FLAGS"] == ""
