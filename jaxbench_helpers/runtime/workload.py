"""The workload base class: one subclass per workload, one ``time_*`` method per phase.

A subclass names a JAX program, its inputs and (where one exists) the same maths in NumPy;
phase mixins turn that into the numbers the dashboard shows. ``AllPhases`` gives every phase:

==========================  =================================================================
``time_run``                one call of the compiled program, inputs already on the device
``time_dispatch_100_calls`` 100 calls queued back to back at a tiny size, one wait at the end
``time_latency_100_calls``  100 calls at a tiny size, each waited for
``time_trace``              Python -> jaxpr of a never-seen function object, caches cleared
``time_lower``              jaxpr -> StableHLO of a fresh trace, caches cleared
``time_compile``            StableHLO -> executable, in-memory and persistent caches off
``time_to_device``          host inputs -> device, waited for
``time_to_host``            a freshly computed output -> NumPy
``time_numpy``              the NumPy reference on the same host inputs and dtype
==========================  =================================================================

Smaller sets: ``RunPhase``, ``DispatchPhases``, ``StagePhases`` (trace, lower, compile),
``TransferPhases``, ``NumpyBaseline``; ``CompiledFacts`` adds deterministic ``track_*`` facts
(FLOPs, bytes, instruction and equation counts, buffer sizes).

Per process, ``setup`` is idempotent: the program is compiled (or loaded from the persistent
cache that ``setup_cache`` filled) once, inputs go to the device once. Cold phases each consume
one fresh staged object per sample, which ``setup`` replaces outside the timing.
"""

import abc
import functools
import inspect
import itertools
import os
import sys
import traceback
import types

import numpy as np

from . import compat, compile_cache, data, device, monitor, platform, profiles

DISPATCH_CALLS = 100

# normwise relative error allowed against NumPy; loose enough for TF32 matmuls on GPUs,
# tight enough to catch a wrong result
TOLERANCE = {"float32": 2e-2, "float64": 1e-9}

_COLD_STAGES = ("trace", "lower", "compile")

# (class, params, profile) -> Prepared; one entry per asv process in practice
_PREPARED = {}


def forget_prepared():
    """Drop every prepared workload of this process (asv runs one phase per process; tests
    that run several phases in one process call this between them)."""
    _PREPARED.clear()


# written by warm_module in asv's setup_cache folder (the benchmarks' working directory)
_WARM_FAILURE = "jaxbench-warm-failed-{}.txt"


def workload_classes(module):
    """The concrete workload classes a benchmark module defines (the ones asv runs)."""
    return [cls for name, cls in inspect.getmembers(module, inspect.isclass)
            if cls.__module__ == module.__name__ and not name.startswith("_")
            and issubclass(cls, Workload) and not inspect.isabstract(cls)]


def warm_module(module_name):
    """A benchmark module's ``setup_cache``: warm every workload class of the module.

    asv starts a fresh interpreter (and imports JAX) for each setup_cache function, so one per
    module, not one per class, saves that start for every class. A class whose warm-up fails
    leaves its traceback here, and only that class's benchmarks fail, in ``setup``.
    """
    for cls in workload_classes(sys.modules[module_name]):
        try:
            cls().warm_compilation_cache()
        except Exception:
            with open(_WARM_FAILURE.format(cls.__qualname__), "w") as f:
                f.write(traceback.format_exc())


def _raise_if_warm_failed(cls):
    path = _WARM_FAILURE.format(cls.__qualname__)
    if os.path.exists(path):
        with open(path) as f:
            raise RuntimeError(f"setup_cache could not warm {cls.__qualname__}, so its "
                               f"benchmarks would time a broken program:\n{f.read()}")


def skip(reason):
    """Skip this benchmark (n/a on the dashboard) from inside a timed method."""
    try:
        from asv_runner.benchmarks.mark import SkipNotImplemented
    except ImportError:
        SkipNotImplemented = NotImplementedError
    raise SkipNotImplemented(reason)


def fresh_function(fn):
    """A new function object running ``fn``'s code: JAX's caches key on function identity."""
    return types.FunctionType(
        fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__
    )


def _has_phase(workload, *names):
    return any(hasattr(workload, name) for name in names)


def cold(method):
    """Attributes of a phase that must be cold on every sample: one call, no warm-up."""
    method.number = 1
    method.warmup_time = 0.0
    method.repeat = profiles.current().cold_repeat
    return method


class Prepared:
    """One workload at one parameter combination, ready to time in this process."""

    def __init__(self, workload, params):
        self.workload = workload
        self.params = params
        # the dtype parameter, where the workload has one, decides whether x64 is on
        self.dtype = dict(zip(workload.param_names, params)).get("dtype", "float32")
        compat.set_x64(self.dtype in ("float64", "complex128", "int64"))
        self.device = platform.device()
        profile = profiles.current()
        self.host_args = workload.inputs(profile, *params, dispatch=False)
        self.args = workload.place(self.host_args, self.device)
        self.tiny_args = None
        if _has_phase(workload, "time_dispatch_100_calls", "time_latency_100_calls"):
            self.tiny_args = workload.place(workload.inputs(profile, *params, dispatch=True),
                                            self.device)
        self.run = self._jit(workload.program) if workload.jit_program else workload.program
        self.slots = {}
        self.kept = []

    def keep(self, *objects):
        """Hold what a cold timed call took and made until the next setup: freeing a large
        array (returning its pages to the OS: milliseconds for 64 MB, now and then) would
        otherwise be timed as part of the call."""
        self.kept.extend(objects)

    def _jit(self, fn):
        import jax

        return jax.jit(fn, **self.workload.jit_options)

    def warm(self):
        """Compile (or load) the program for every input size; returns the full-size output."""
        out = device.block(self.run(*self.args))
        if self.tiny_args is not None:
            device.block(self.run(*self.tiny_args))
        return out

    def refill(self):
        """Replace every consumed fresh object; clear caches so the next cold stage is cold."""
        if not _has_phase(self.workload, *(f"time_{stage}" for stage in _COLD_STAGES)):
            return
        missing = [s for s in _COLD_STAGES if s not in self.slots]
        if "lower" in missing:
            self.slots["lower"] = self._jit(fresh_function(self.workload.program)).trace(
                *self.args) if compat.has_trace_stage() else None
        if "compile" in missing:
            self.slots["compile"] = self._jit(fresh_function(self.workload.program)).lower(
                *self.args)
        if missing:
            compat.clear_caches()
        if "trace" in missing:
            self.slots["trace"] = self._trace_call(fresh_function(self.workload.program))

    def _trace_call(self, fn):
        """A zero-argument callable that traces ``fn`` once; wrappers are built here, untimed."""
        import jax

        if compat.has_trace_stage():
            return functools.partial(self._jit(fn).trace, *self.args)
        return functools.partial(jax.make_jaxpr(fn), *self.args)

    def refill_outputs(self):
        if _has_phase(self.workload, "time_to_host") and "to_host" not in self.slots:
            self.slots["to_host"] = device.block(self.run(*self.args))

    def take(self, slot):
        try:
            return self.slots.pop(slot)
        except KeyError:
            raise RuntimeError(
                f"no fresh object for the {slot} phase: this phase runs one call per sample "
                "(number=1), because setup prepares one never-used object per sample"
            ) from None

    def compiled(self):
        """The executable ``run`` uses (from the in-memory cache: nothing is recompiled)."""
        return self.run.lower(*self.args).compile()

    def check(self, out):
        """Compare a full-size output with the NumPy reference; raise if it is wrong."""
        import jax

        name = f"{type(self.workload).__name__}{self.params}"
        got = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(out)]
        if self.workload.reference is None:
            bad = [g for g in got if g.dtype.kind in "fc" and not np.isfinite(g).all()]
            if bad:
                raise AssertionError(f"{name}: the output has NaN or inf values")
            return
        expected = self.workload.reference(*self.host_args)
        want = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(expected)]
        if len(got) != len(want):
            raise AssertionError(f"{name}: JAX gave {len(got)} arrays, NumPy {len(want)}")
        tolerance = self.workload.tolerance[self.dtype]
        for g, w in zip(got, want):
            if g.dtype != w.dtype or g.shape != w.shape:
                raise AssertionError(
                    f"{name}: JAX gave {g.dtype}{g.shape}, NumPy {w.dtype}{w.shape} "
                    "(is x64 really on for float64?)"
                )
            if w.dtype.kind not in "fc":
                if not np.array_equal(g, w):
                    raise AssertionError(f"{name}: JAX and NumPy disagree on {w.dtype} values")
                continue
            err = np.linalg.norm(g - w) / max(np.linalg.norm(w), np.finfo(w.dtype).tiny)
            if not err <= tolerance:
                raise AssertionError(
                    f"{name}: relative error {err:.3g} against NumPy exceeds {tolerance:g}; "
                    "the benchmark would time a broken computation"
                )


class Workload(abc.ABC):
    """Base of every workload class: subclasses define program and inputs, and mix in the
    phases they measure."""

    params = [["float32", "float64"]]
    param_names = ["dtype"]
    timeout = 300
    # asv sampling comes from the profile (read once, when asv imports the suite)
    rounds = profiles.current().rounds
    repeat = profiles.current().repeat
    warmup_time = profiles.current().warmup_time
    # Results stay comparable across refactors of this file. Bump it here when what a phase
    # times changes, and in a subclass when its program or inputs change.
    version = "1"
    # The NumPy version of ``program`` (a staticmethod), or None where NumPy has none; then
    # the output is only checked to be finite.
    reference = None
    tolerance = TOLERANCE
    # keyword arguments for jax.jit (static_argnums, donate_argnums, ...)
    jit_options = {}
    # False for eager (op-by-op) workloads: ``program`` is called as it is, not jitted
    jit_program = True

    @staticmethod
    @abc.abstractmethod
    def program(*args):
        """The JAX function being measured (a plain function: it is re-created per trace)."""

    @abc.abstractmethod
    def inputs(self, profile, *params, dispatch):
        """Host inputs: a tuple of NumPy arrays or pytrees of them, one per ``program``
        argument, for the parameter values ``params``; tiny ones when ``dispatch`` is true."""

    @staticmethod
    def normal(shape, dtype):
        return data.normal(shape, dtype)

    # ---- hooks -----------------------------------------------------------------------------

    def configure_process(self):
        """Process-wide settings that must precede JAX's backend start (XLA flags)."""
        return None

    def place(self, host_args, target):
        """Put host inputs where the program expects them, waited for (one device here)."""
        return device.put(host_args, target)

    # ---- setup ---------------------------------------------------------------------------

    def warm_compilation_cache(self):
        """For ``setup_cache``: compile every parameter combination into the persistent cache
        in asv's shared directory, and check each output against NumPy once."""
        self.configure_process()
        platform.configure()
        monitor.install()
        compile_cache.enable(compile_cache.shared_dir())
        try:
            for params in itertools.product(*self.params):
                try:
                    prepared = Prepared(self, params)
                except NotImplementedError:
                    continue  # setup skips these too
                prepared.check(prepared.warm())
        finally:
            compile_cache.disable()

    def setup(self, *params):
        if not params:
            return  # asv_runner calls setups that accept no arguments before setup_cache
        key = (type(self), params, profiles.current().name)
        prepared = _PREPARED.get(key)
        if prepared is None:
            _raise_if_warm_failed(type(self))
            self.configure_process()
            platform.configure()
            monitor.install()
            prepared = Prepared(self, params)
            prepared.refill()
            with compile_cache.loading_from_shared_dir():
                prepared.warm()
            _PREPARED[key] = prepared
        else:
            prepared.kept.clear()  # frees the last sample's arrays here, untimed
            prepared.refill()
        prepared.refill_outputs()
        self.prepared = prepared
