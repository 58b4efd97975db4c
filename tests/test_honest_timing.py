"""Every number the suite produces means what its name says (in-process, current jax, CPU)."""

import importlib
import inspect
import json
import os
import pkgutil
import subprocess
import sys
import textwrap
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import benchmarks
from benchmarks import bench_matmul
from jaxbench_helpers.runtime import compile_cache, monitor, workload

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def benchmark_modules():
    return [importlib.import_module(f"benchmarks.{m.name}")
            for m in pkgutil.iter_modules(benchmarks.__path__) if m.name.startswith("bench_")]


def workload_classes():
    return [cls for mod in benchmark_modules()
            for _, cls in inspect.getmembers(mod, inspect.isclass)
            if issubclass(cls, workload.Workload) and cls.__module__ == mod.__name__]


def time_methods():
    return [(cls, name) for cls in workload_classes() for name in dir(cls)
            if name.startswith("time_")]


def test_every_timed_benchmark_is_a_workload():
    """The waiting check below covers workload classes; nothing else may have time_ methods."""
    for mod in benchmark_modules():
        for _, cls in inspect.getmembers(mod, inspect.isclass):
            if cls.__module__ == mod.__name__ and any(n.startswith("time_") for n in dir(cls)):
                assert issubclass(cls, workload.Workload), cls


# ---- every time_ method waits for its device work ---------------------------------------

def _slow(fn, spins=40):
    """``fn`` behind ~20 ms of device work (40 spins) that XLA cannot skip, so an unwaited call
    is caught still running when the timed method returns."""

    def program(*args):
        def body(_, acc):
            return jnp.tanh(acc @ acc)

        spin = jax.lax.fori_loop(0, spins, body, jnp.full((128, 128), 0.01, jnp.float32))
        never = spin.sum() == 1234.5
        # every numeric output depends on the spin, through a comparison that is never true
        return jax.tree_util.tree_map(
            lambda leaf: jnp.where(never, leaf + 1, leaf)
            if jnp.issubdtype(leaf.dtype, jnp.number) else leaf, fn(*args))

    return jax.jit(program)


def first_params(cls):
    """The first value of each parameter: one representative case of a workload."""
    return tuple(values[0] for values in cls.params)


def unfinished_work_after(bench, name, spins=40):
    """Run one timed method with every device call recorded; return how many of the arrays it
    produced were still being computed when it returned."""
    params = first_params(type(bench))
    try:
        bench.setup(*params)
    except NotImplementedError as err:
        pytest.skip(f"skips here: {err}")
    prepared = bench.prepared
    slow, produced = _slow(prepared.program, spins), []

    def recording_run(*args):
        out = slow(*args)
        produced.append(out)
        return out

    for args in (prepared.args, prepared.tiny_args):  # compile first
        if args is not None:
            workload.device.block(slow(*args))
    real_put = jax.device_put

    def recording_put(*args, **kwargs):
        out = real_put(*args, **kwargs)
        produced.extend(jax.tree_util.tree_leaves(out))
        return out

    prepared.run = recording_run
    jax.device_put = recording_put
    try:
        getattr(bench, name)(*params)
        unfinished = sum(not a.is_ready() for a in jax.tree_util.tree_leaves(produced))
    finally:
        jax.device_put = real_put
        workload.device.block(produced)
    return unfinished


@pytest.mark.parametrize("cls, name", time_methods(), ids=lambda v: getattr(v, "__name__", v))
def test_time_method_waits_for_its_device_work(fresh, cls, name):
    assert unfinished_work_after(cls(), name) == 0


class Unwaited(bench_matmul.SquareMatmul):
    """A broken phase: it returns while its computation is still running."""

    def time_run(self, dtype):
        self.prepared.run(*self.prepared.args)


def test_the_waiting_check_catches_a_phase_that_returns_early(fresh):
    # longer device work, and three chances: on a loaded machine the test's own thread can be
    # descheduled until an unwaited computation happens to finish
    caught = [unfinished_work_after(Unwaited(), "time_run", spins=400) for _ in range(3)]
    assert 1 in caught, caught


# ---- the persistent cache: warm across processes, off for compile phases ---------------

def _in_process(code, cwd):
    """Run ``code`` in a fresh interpreter in ``cwd``; return what it printed as JSON."""
    env = dict(os.environ, JAXBENCH_PROFILE="quick", PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


WARM = """
    from benchmarks import bench_matmul
    bench_matmul.setup_cache()
    print("{}")
"""

SETUP = """
    import json
    from benchmarks.bench_matmul import SquareMatmul
    from jaxbench_helpers.runtime import monitor
    SquareMatmul().setup("float32")
    print(json.dumps(monitor.snapshot()))
"""


def test_setup_cache_warms_the_benchmark_processes(tmp_path):
    """asv runs setup_cache in one process and each benchmark in another, in the same folder:
    the second process's setup must load the executables, not compile them."""
    shared, elsewhere = tmp_path / "shared", tmp_path / "elsewhere"
    shared.mkdir()
    elsewhere.mkdir()
    _in_process(WARM, shared)
    assert os.listdir(shared / compile_cache.SHARED_DIR_NAME)
    served = _in_process(SETUP, shared)
    assert served.get("/jax/compilation_cache/cache_hits", 0) >= 2  # full and dispatch sizes
    assert served.get("/jax/compilation_cache/cache_misses", 0) == 0
    cold = _in_process(SETUP, elsewhere)  # control: without setup_cache, setup compiles
    assert cold.get("/jax/compilation_cache/cache_hits", 0) == 0


def _events_per_sample(bench, name, samples=3):
    """Event counts fired by each of ``samples`` timed calls (setup between, as asv does)."""
    counts = []
    for _ in range(samples):
        bench.setup("float32")
        before = monitor.snapshot()
        getattr(bench, name)("float32")
        after = monitor.snapshot()
        counts.append({k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)})
    return counts


def test_compile_phase_really_compiles_every_sample(fresh, tmp_path, monkeypatch):
    # a filled persistent cache in the working directory, as asv leaves it: still not used
    monkeypatch.chdir(tmp_path)
    bench = bench_matmul.SquareMatmul()
    bench.warm_compilation_cache()
    for events in _events_per_sample(bench, "time_compile"):
        assert events.get(monitor.BACKEND_COMPILE) == 1
        assert not any(k.startswith("/jax/compilation_cache/cache_hits") for k in events)
        assert "/jax/core/compile/jaxpr_trace_duration" not in events


def test_trace_and_lower_phases_are_cold_every_sample(fresh):
    bench = bench_matmul.CenteredGram()
    for events in _events_per_sample(bench, "time_trace"):
        assert events.get("/jax/core/compile/jaxpr_trace_duration", 0) >= 1
        assert monitor.BACKEND_COMPILE not in events
    for events in _events_per_sample(bench, "time_lower"):
        assert events.get("/jax/core/compile/jaxpr_to_mlir_module_duration", 0) >= 1
        assert monitor.BACKEND_COMPILE not in events


# ---- guards: recompilation, correctness ----------------------------------------------------

def test_a_timed_call_that_compiles_fails_the_benchmark(fresh):
    bench = bench_matmul.SquareMatmul()
    bench.setup("float32")
    bench.prepared.run = jax.jit(workload.fresh_function(bench.program))  # never warmed
    with pytest.raises(monitor.RecompilationError, match="SquareMatmul.time_run .*compile"):
        bench.time_run("float32")


class WrongAnswer(bench_matmul.SquareMatmul):
    @staticmethod
    def program(x):
        return x @ x.T


class SilentlyFloat32(bench_matmul.SquareMatmul):
    @staticmethod
    def program(x):
        return jnp.dot(x, x).astype(jnp.float32)


def test_a_wrong_result_fails_before_anything_is_timed(fresh, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AssertionError, match="relative error .* against NumPy"):
        WrongAnswer().warm_compilation_cache()
    with pytest.raises(AssertionError, match=r"float32\(.*NumPy float64"):
        SilentlyFloat32().warm_compilation_cache()


def test_a_wrong_class_fails_only_its_own_benchmarks(fresh, tmp_path, monkeypatch):
    """The module-level setup_cache warms every class; a class that fails the NumPy check is
    reported, its neighbours are still warmed, and its own benchmarks fail in setup (which
    checks again, in the benchmark's process) while the neighbours' run."""
    monkeypatch.chdir(tmp_path)
    module = types.ModuleType("bench_mixed")
    for cls in (WrongAnswer, bench_matmul.CenteredGram):
        monkeypatch.setattr(cls, "__module__", module.__name__)
        setattr(module, cls.__name__, cls)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    assert workload.workload_classes(module) == [bench_matmul.CenteredGram, WrongAnswer]
    failed = workload.warm_module(module.__name__)
    assert list(failed) == ["WrongAnswer"] and "against NumPy" in failed["WrongAnswer"]
    assert os.listdir(tmp_path / compile_cache.SHARED_DIR_NAME)  # the neighbour's programs
    with pytest.raises(AssertionError, match="relative error .* against NumPy"):
        WrongAnswer().setup("float32")
    good = bench_matmul.CenteredGram()
    good.setup("float32")
    good.time_run("float32")


def test_float64_really_runs_in_float64(fresh):
    bench = bench_matmul.SquareMatmul()
    bench.setup("float64")
    assert bench.prepared.run(*bench.prepared.args).dtype == np.float64

