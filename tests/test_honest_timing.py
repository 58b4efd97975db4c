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
#
# Each phase is classified by the device work it does. The check swaps the program for a slow
# twin (~20 ms of device work XLA cannot skip before any output is ready) and jax.device_put
# for a put whose arrays become ready only after such work, then runs setup and the phase as
# asv does, recording every array each of them made: whatever setup made must be ready when
# setup returns (else the timing would include it), whatever the phase made must be ready when
# it returns, and the phase must have made what its class says it makes.

# calls of the compiled program: each output must be ready on return
RUNS_THE_PROGRAM = {"time_run", "time_dispatch_100_calls", "time_latency_100_calls"}
# host -> device copies: each device array must be ready on return
PUTS = {"time_to_device"}
# device -> host reads of an output setup computed (the slot they consume): that output must
# be ready before the timing, and the phase must leave a NumPy copy of it
READS_BACK = {"time_to_host": "to_host", "time_np_asarray": "np_asarray"}
# no device work at all, and why: the check holds them to making no array
NO_DEVICE_WORK = {
    "time_trace": "tracing runs the program on abstract values (tracers): no array is computed",
    "time_lower": "lowering turns a jaxpr into StableHLO text: no array is computed",
    "time_compile": "XLA compiles the StableHLO; the executable is not run",
    "time_load_from_persistent_cache": "an executable loaded from disk is not run",
    "time_numpy": "NumPy on host arrays: its result is complete when the call returns",
}
# the only setups that may skip here (CPU, the test environment's jax), and why
EXPECTED_SKIPS = {
    "MatmulThroughput": "GPU-only (platforms = ('gpu',)); these tests run on the CPU",
}


def _spin(spins):
    def body(_, acc):
        return jnp.tanh(acc @ acc)

    return jax.lax.fori_loop(0, spins, body, jnp.full((128, 128), 0.01, jnp.float32))


def _behind(tree, spins):
    """``tree`` with every numeric leaf made to depend on ``spins`` rounds of device work,
    through a comparison that is never true."""
    never = _spin(spins).sum() == 1234.5
    return jax.tree_util.tree_map(
        lambda leaf: jnp.where(never, leaf + 1, leaf)
        if jnp.issubdtype(leaf.dtype, jnp.number) else leaf, tree)


def _slow(fn, spins=200):
    """``fn`` behind ~7 ms of device work (200 spins on a 2-core AMD EPYC VM), so an unwaited
    call is caught still running when the timed method returns."""
    return jax.jit(lambda *args: _behind(fn(*args), spins))


def _ready(leaf):
    if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        leaf = jax.random.key_data(leaf)
    return leaf.is_ready()


def _unfinished(arrays):
    return sum(not _ready(a) for a in jax.tree_util.tree_leaves(arrays)
               if isinstance(a, jax.Array))


def first_params(cls):
    """The first value of each parameter: one representative case of a workload."""
    return tuple(values[0] for values in cls.params)


def set_up(bench, params):
    """``bench.setup``; a NotImplementedError skips only for the classes EXPECTED_SKIPS names."""
    try:
        bench.setup(*params)
    except NotImplementedError as err:
        reason = EXPECTED_SKIPS.get(type(bench).__name__)
        if reason is None:
            raise AssertionError(f"{type(bench).__name__}.setup{params} skipped, which no "
                                 f"CPU case may: {err}") from err
        pytest.skip(f"{reason}: {err}")


class Record:
    """What setup and one timed method made, under the slow program and the slow put."""

    def __init__(self):
        self.setup, self.phase = [], []
        self.target = self.setup
        self.new_live_arrays = 0
        self.kept = []


def record(bench, name, spins=200):
    """Set ``bench`` up, swap in the slow program and put, set it up again (as asv does before
    each sample: consumed outputs are made again) and run ``name`` once; returns a Record."""
    params = first_params(type(bench))
    set_up(bench, params)
    prepared, rec = bench.prepared, Record()
    slow = _slow(prepared.program, spins)
    for args in (prepared.args, prepared.tiny_args):  # compile outside everything recorded
        if args is not None:
            workload.device.block(slow(*args))
    slow_put = jax.jit(lambda tree: _behind(tree, spins))
    real_put = jax.device_put
    workload.device.block(slow_put(real_put(prepared.host_args, prepared.device)))

    def recording_run(*args):
        out = slow(*args)
        rec.target.append(out)
        return out

    def recording_put(*args, **kwargs):
        out = slow_put(real_put(*args, **kwargs))
        rec.target.append(out)
        return out

    prepared.run = recording_run
    for slot in READS_BACK.values():
        prepared.slots.pop(slot, None)  # made again, by the slow program
    # asv runs the class's setup, then the method's own, before each sample; teardown after
    own_setup = getattr(getattr(type(bench), name), "setup", None)
    jax.device_put = recording_put
    try:
        bench.setup(*params)
        if own_setup is not None:
            own_setup(*params)
        rec.unfinished_after_setup = _unfinished(rec.setup)
        rec.target = rec.phase
        before = {id(a) for a in jax.live_arrays()}
        kept_before = len(prepared.kept)  # setup keeps what it read untimed
        getattr(bench, name)(*params)
        rec.unfinished_after_phase = _unfinished(rec.phase)
        rec.new_live_arrays = len([a for a in jax.live_arrays() if id(a) not in before])
        rec.kept = prepared.kept[kept_before:]
    finally:
        jax.device_put = real_put
        if hasattr(bench, "teardown"):
            bench.teardown(*params)
        workload.device.block([leaf for leaf in jax.tree_util.tree_leaves(rec.setup + rec.phase)
                               if isinstance(leaf, jax.Array)])
    return rec


def waiting_problems(bench, name, spins=200):
    """What ``name`` of ``bench`` leaves unwaited or does against its class; [] if nothing."""
    rec = record(bench, name, spins)
    problems = []
    if rec.unfinished_after_setup:
        problems.append(f"setup left {rec.unfinished_after_setup} arrays computing")
    if rec.unfinished_after_phase:
        problems.append(f"{name} returned with {rec.unfinished_after_phase} arrays computing")
    if name in RUNS_THE_PROGRAM and not rec.phase:
        problems.append(f"{name} never called the program")
    elif name in PUTS and not rec.phase:
        problems.append(f"{name} put nothing on the device")
    elif name in READS_BACK:
        host = jax.tree_util.tree_leaves(rec.kept[-1:])
        if not rec.setup:
            problems.append(f"setup made no output for {name} to read")
        if not host or not all(isinstance(leaf, np.ndarray) for leaf in host):
            problems.append(f"{name} left no NumPy copy of what it read")
    elif name in NO_DEVICE_WORK and (rec.phase or rec.new_live_arrays):
        problems.append(f"{name} made {len(rec.phase)} program outputs or puts and "
                        f"{rec.new_live_arrays} new arrays, where it should make none")
    return problems


@pytest.mark.parametrize("cls, name", time_methods(), ids=lambda v: getattr(v, "__name__", v))
def test_time_method_waits_for_its_device_work(fresh, cls, name):
    assert waiting_problems(cls(), name) == []


@pytest.mark.parametrize("cls, name", [(c, n) for c, n in time_methods() if n in READS_BACK],
                         ids=lambda v: getattr(v, "__name__", v))
def test_class_setup_alone_leaves_each_read_phase_an_output_never_read(fresh, cls, name):
    """A count's child runs the class's setup only, not the phase's own: after a sample took
    every output of the phase's slot, the class's setup must leave it one never read."""
    slot = READS_BACK[name]
    assert getattr(cls, name).read_slot == slot
    bench = cls()
    params = first_params(cls)
    set_up(bench, params)
    assert len(bench.prepared.slots[slot]) == 1
    taken = bench.prepared.take(slot)
    assert bench.prepared.slots[slot] == []
    bench.setup(*params)
    (output,) = bench.prepared.slots[slot]
    assert output is not taken
    for leaf in jax.tree_util.tree_leaves(output):
        assert not leaf.is_deleted()
        assert leaf._npy_value is None  # jax caches an array's host copy on its first read


ASV_SAMPLES = """
    import json
    from asv_runner.discovery import get_benchmark_from_name
    from jaxbench_helpers.runtime import workload

    held = []
    keep = workload.Prepared.keep

    def keep_counted(self, *objects):
        keep(self, *objects)
        held.append(len(self.kept))

    workload.Prepared.keep = keep_counted
    bench = get_benchmark_from_name({root!r}, {name!r})
    bench.set_cache(bench.do_setup_cache())
    bench.do_setup()
    result = bench.do_run()
    print(json.dumps(dict(number=result["number"], samples=len(result["samples"]),
                          most_held=max(held), warmup_time=bench.warmup_time)))
"""


def test_asv_never_calls_the_copy_phase_more_often_than_its_number_between_setups(tmp_path):
    """asv_runner's warm-up and its choice of ``number`` call a phase with no setup between
    the calls: ``time_to_device`` held every copy it made until the first sample's setup. Its
    own setup warms it with setups and fixes the number, so asv, run as it runs, never sees
    more copies held than one sample's calls."""
    name = "bench_transfer.ArrayTransfer.time_to_device-2"  # 1 MB: ~100 calls a sample
    run = _in_process(ASV_SAMPLES.format(root=os.path.join(ROOT, "benchmarks"), name=name),
                      tmp_path)
    assert run["samples"] >= 1
    assert run["number"] > 1
    assert run["most_held"] == run["number"]
    assert run["warmup_time"] == 0


def test_every_phase_is_classified():
    names = {name for _, name in time_methods()}
    classified = [RUNS_THE_PROGRAM, PUTS, set(READS_BACK), set(NO_DEVICE_WORK)]
    assert sorted(names - set().union(*classified)) == []
    assert sum(len(c) for c in classified) == len(set().union(*classified))


def jax_arrays_from_the_baseline(cls):
    """The jax arrays among the leaves of what ``cls``'s NumPy baseline returns."""
    bench = cls()
    set_up(bench, first_params(cls))
    out = bench.prepared.reference(*bench.prepared.host_args)
    leaves = jax.tree_util.tree_leaves(out)
    assert leaves, out
    return [leaf for leaf in leaves if isinstance(leaf, jax.Array)]


@pytest.mark.parametrize("cls", [c for c in workload_classes() if hasattr(c, "time_numpy")],
                         ids=lambda c: c.__name__)
def test_the_numpy_baseline_computes_on_the_host(fresh, cls):
    assert jax_arrays_from_the_baseline(cls) == []


# ---- the check catches what it looks for ---------------------------------------------------

class Unwaited(bench_matmul.SquareMatmul):
    """A broken phase: it returns while its computation is still running."""

    def time_run(self, dtype):
        self.prepared.run(*self.prepared.args)


class UnwaitedPut(bench_matmul.SquareMatmul):
    """A broken transfer: device_put without the wait."""

    def time_to_device(self, dtype):
        jax.device_put(self.prepared.host_args, self.prepared.device)


class ReadsWhatSetupLeftRunning(bench_matmul.SquareMatmul):
    """A broken setup: the output time_to_host reads is still being computed, so the read
    would time the computation too."""

    def setup(self, *params):
        super().setup(*params)
        self.prepared.slots["to_host"] = [self.prepared.run(*self.prepared.args)]

    def time_to_host(self, dtype):
        """Reads the slot without keeping a NumPy copy."""
        self.prepared.take("to_host")


class TracesAndRuns(bench_matmul.SquareMatmul):
    """A trace phase that also runs the program."""

    def time_trace(self, dtype):
        self.prepared.take("trace")()
        workload.device.block(self.prepared.run(*self.prepared.args))


class NumpyBaselineOnJax(bench_matmul.SquareMatmul):
    """A NumPy baseline that computes with jax.numpy."""

    @staticmethod
    def reference(x):
        return jnp.dot(x, x)


class SkipsUnexpectedly(bench_matmul.SquareMatmul):
    def inputs(self, profile, dtype, dispatch):
        raise NotImplementedError("a skip no CPU case may take")


def test_the_waiting_check_catches_a_phase_that_returns_early(fresh):
    # longer device work, and three chances: on a loaded machine the test's own thread can be
    # descheduled until an unwaited computation happens to finish
    caught = [waiting_problems(Unwaited(), "time_run", spins=400) for _ in range(3)]
    assert ["time_run returned with 1 arrays computing"] in caught, caught


@pytest.mark.parametrize("cls, name, expected", [
    (UnwaitedPut, "time_to_device", "time_to_device returned with 1 arrays computing"),
    (ReadsWhatSetupLeftRunning, "time_to_host", "setup left 1 arrays computing"),
    (ReadsWhatSetupLeftRunning, "time_to_host", "time_to_host left no NumPy copy"),
    (TracesAndRuns, "time_trace", "time_trace made 1 program outputs"),
])
def test_the_waiting_check_catches_each_kind_of_phase(fresh, cls, name, expected):
    caught = [waiting_problems(cls(), name, spins=400) for _ in range(3)]
    assert any(any(p.startswith(expected) for p in problems) for problems in caught), caught


def test_the_numpy_check_catches_a_baseline_on_jax(fresh):
    assert len(jax_arrays_from_the_baseline(NumpyBaselineOnJax)) == 1


def test_an_unexpected_skip_fails(fresh):
    with pytest.raises(AssertionError, match="SkipsUnexpectedly.setup.* skipped, which no CPU"):
        set_up(SkipsUnexpectedly(), ("float32",))


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

