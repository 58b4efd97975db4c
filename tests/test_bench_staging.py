"""The staging benchmarks stage what they say: chains of the advertised length, a real compile
in every compile sample, and loads that really come from the persistent cache."""

import functools
import itertools
import sys

import jax
import pytest
from asv_runner.discovery import _get_benchmark

from benchmarks import bench_staging
from jaxbench_helpers.runtime import compile_cache, monitor, profiles, workload

STAGED = [bench_staging.AddChain, bench_staging.NestedJitCalls, bench_staging.ScanMlp,
          bench_staging.WhileLoopKepler, bench_staging.GradVmapRemat, bench_staging.Rk4Steps]
CASES = [(cls, params) for cls in STAGED for params in itertools.product(*cls.params)]


@pytest.fixture
def fresh(profile, tmp_path, monkeypatch):
    """Each phase in its own state, as asv runs each in its own process, in a folder with no
    shared cache; the persistent cache off afterwards whatever happened."""
    profile("quick")
    monkeypatch.chdir(tmp_path)
    yield
    compile_cache.disable()


def _new_events(before):
    after = monitor.snapshot()
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def _looked_up_the_persistent_cache(events):
    """Whether a compile read or wrote the persistent cache (deciding it is off is no use)."""
    cache_events = {k for k in events if k.startswith(monitor.CACHE_PREFIX)}
    return bool(cache_events - {monitor.CACHE_PREFIX + "task_disabled_cache"})


@pytest.mark.parametrize("equations", bench_staging.AddChain.params[0])
def test_add_chain_has_one_add_per_equation(equations):
    bench = bench_staging.AddChain()
    profile = profiles.PROFILES["quick"]
    args = bench.inputs(profile, equations, dispatch=False)
    program = functools.partial(bench.program, **bench.static_arguments(profile, equations))
    eqns = jax.make_jaxpr(program)(*args).jaxpr.eqns
    assert len(eqns) == equations
    assert {eqn.primitive.name for eqn in eqns} == {"add"}


def _events_per_sample(bench, name, params, samples=2):
    """Event counts fired by each of ``samples`` timed calls (setup between, as asv does)."""
    counts = []
    for _ in range(samples):
        bench.setup(*params)
        before = monitor.snapshot()
        getattr(bench, name)(*params)
        counts.append(_new_events(before))
    return counts


@pytest.mark.parametrize("cls, params", CASES, ids=lambda v: getattr(v, "__name__", v))
def test_compile_phase_really_compiles_every_sample(fresh, cls, params):
    for events in _events_per_sample(cls(), "time_compile", params):
        assert events.get(monitor.BACKEND_COMPILE) == 1
        assert not _looked_up_the_persistent_cache(events)
        assert "/jax/core/compile/jaxpr_trace_duration" not in events


# ---- the persistent cache: asv's own setup and teardown sequence ---------------------------

def _events_per_asv_sample(name, samples=2):
    """Event counts of each timed call when asv_runner runs the setups (the class's, then the
    method's own) before every sample and the teardown after it."""
    cls = bench_staging.PersistentCache
    bench = _get_benchmark(name, sys.modules[cls.__module__], cls, getattr(cls, name))
    bench.set_param_idx(0)
    counts = []
    for _ in range(samples):
        assert not bench.do_setup(), "skipped: this jax should write a CPU persistent cache"
        before = monitor.snapshot()
        bench.func("float32")
        counts.append(_new_events(before))
        bench.do_teardown()
    return bench.func.__self__, counts


def test_load_phase_reads_the_program_from_disk(fresh):
    _, samples = _events_per_asv_sample("time_load_from_persistent_cache")
    for events in samples:
        assert events.get("/jax/compilation_cache/cache_hits") == 1
        assert "/jax/compilation_cache/cache_misses" not in events


def test_persistent_cache_class_compile_phase_really_compiles(fresh):
    _, samples = _events_per_asv_sample("time_compile")
    for events in samples:
        assert events.get(monitor.BACKEND_COMPILE) == 1
        assert not _looked_up_the_persistent_cache(events)


def test_the_persistent_cache_is_off_after_each_load_sample(fresh):
    bench, _ = _events_per_asv_sample("time_load_from_persistent_cache", samples=1)
    before = monitor.snapshot()
    program = jax.jit(workload.fresh_function(bench.program))
    program.lower(*bench.prepared.args).compile()
    events = _new_events(before)
    assert events.get(monitor.BACKEND_COMPILE) == 1
    assert not _looked_up_the_persistent_cache(events)


def test_skips_where_jax_writes_no_cache_entries(fresh, monkeypatch):
    """What jax before 0.4.26 does on CPU: the populating compile leaves the folder empty."""
    monkeypatch.setattr(bench_staging, "_has_entries", lambda path: False)
    with pytest.raises(NotImplementedError, match="no persistent compilation cache entries"):
        bench_staging.PersistentCache().setup("float32")
