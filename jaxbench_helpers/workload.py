"""The workload base class: one subclass per workload, one ``time_*`` method per phase.

A subclass names a JAX program, the same maths in NumPy, and its inputs; this class turns that
into the phases the dashboard shows:

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

Per process, ``setup`` is idempotent: the program is compiled (or loaded from the persistent
cache that ``setup_cache`` filled) once, inputs go to the device once. Cold phases each consume
one fresh staged object per sample, which ``setup`` replaces outside the timing.
"""

import abc
import functools
import itertools
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


def _cold(method):
    """Attributes of a phase that must be cold on every sample: one call, no warm-up."""
    method.number = 1
    method.warmup_time = 0.0
    method.repeat = (5, 10, 20.0)
    return method


class Prepared:
    """One workload at one parameter combination, ready to time in this process."""

    def __init__(self, workload, params):
        self.workload = workload
        self.params = params
        self.dtype = params[0]
        compat.set_x64(self.dtype == "float64")
        self.device = platform.device()
        profile = profiles.current()
        self.host_args = workload.inputs(profile, self.dtype, dispatch=False)
        self.args = device.put(self.host_args, self.device)
        self.tiny_args = device.put(workload.inputs(profile, self.dtype, dispatch=True),
                                    self.device)
        self.run = self._jit(workload.program)
        self.slots = {}

    def _jit(self, fn):
        import jax

        return jax.jit(fn)

    def warm(self):
        """Compile (or load) the program for both input sizes; returns the full-size output."""
        out = device.block(self.run(*self.args))
        device.block(self.run(*self.tiny_args))
        return out

    def refill(self):
        """Replace every consumed fresh object; clear caches so the next cold stage is cold."""
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
            return functools.partial(jax.jit(fn).trace, *self.args)
        return functools.partial(jax.make_jaxpr(fn), *self.args)

    def refill_outputs(self):
        if "to_host" not in self.slots:
            self.slots["to_host"] = device.block(self.run(*self.args))

    def take(self, slot):
        try:
            return self.slots.pop(slot)
        except KeyError:
            raise RuntimeError(
                f"no fresh object for the {slot} phase: this phase runs one call per sample "
                "(number=1), because setup prepares one never-used object per sample"
            ) from None

    def check(self, out):
        """Compare a full-size output with the NumPy reference; raise if it is wrong."""
        want = np.asarray(self.workload.reference(*self.host_args))
        got = np.asarray(out)
        name = type(self.workload).__name__
        if got.dtype != want.dtype or got.shape != want.shape:
            raise AssertionError(
                f"{name}{self.params}: JAX gave {got.dtype}{got.shape}, "
                f"NumPy {want.dtype}{want.shape} (is x64 really on for float64?)"
            )
        err = np.linalg.norm(got - want) / max(np.linalg.norm(want), np.finfo(want.dtype).tiny)
        if not err <= TOLERANCE[self.dtype]:
            raise AssertionError(
                f"{name}{self.params}: relative error {err:.3g} against NumPy exceeds "
                f"{TOLERANCE[self.dtype]:g}; the benchmark would time a broken computation"
            )


class Workload(abc.ABC):
    """Base of every workload class; subclasses define program, reference and inputs."""

    params = [["float32", "float64"]]
    param_names = ["dtype"]
    timeout = 300
    # Results stay comparable across refactors of this file. Bump it here when what a phase
    # times changes, and in a subclass when its program or inputs change.
    version = "1"

    @staticmethod
    @abc.abstractmethod
    def program(*arrays):
        """The JAX function being measured (a plain function: it is re-created per trace)."""

    @staticmethod
    @abc.abstractmethod
    def reference(*arrays):
        """The same maths in NumPy, for the baseline and the correctness check."""

    @abc.abstractmethod
    def inputs(self, profile, dtype, dispatch):
        """Host inputs (a tuple of NumPy arrays); tiny ones when ``dispatch`` is true."""

    @staticmethod
    def normal(shape, dtype):
        return data.normal(shape, dtype)

    # ---- setup ---------------------------------------------------------------------------

    def warm_compilation_cache(self):
        """For ``setup_cache``: compile every parameter combination into the persistent cache
        in asv's shared directory, and check each output against NumPy once."""
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

    def setup(self, dtype):
        key = (type(self), (dtype,), profiles.current().name)
        prepared = _PREPARED.get(key)
        if prepared is None:
            platform.configure()
            monitor.install()
            prepared = Prepared(self, (dtype,))
            prepared.refill()
            with compile_cache.loading_from_shared_dir():
                prepared.warm()
            _PREPARED[key] = prepared
        else:
            prepared.refill()
        prepared.refill_outputs()
        self.prepared = prepared

    # ---- phases --------------------------------------------------------------------------

    @monitor.forbid_compile
    def time_run(self, dtype):
        device.block(self.prepared.run(*self.prepared.args))

    @monitor.forbid_compile
    def time_dispatch_100_calls(self, dtype):
        run, args = self.prepared.run, self.prepared.tiny_args
        outs = [run(*args) for _ in range(DISPATCH_CALLS)]
        device.block(outs)

    @monitor.forbid_compile
    def time_latency_100_calls(self, dtype):
        run, args = self.prepared.run, self.prepared.tiny_args
        for _ in range(DISPATCH_CALLS):
            device.block(run(*args))

    @_cold
    def time_trace(self, dtype):
        self.prepared.take("trace")()

    @_cold
    def time_lower(self, dtype):
        traced = self.prepared.take("lower")
        if traced is None:
            skip("lowering alone needs jax.jit(f).trace (jax 0.4.29+)")
        traced.lower()

    @_cold
    def time_compile(self, dtype):
        self.prepared.take("compile").compile()

    @monitor.forbid_compile
    def time_to_device(self, dtype):
        device.put(self.prepared.host_args, self.prepared.device)

    @_cold
    @monitor.forbid_compile
    def time_to_host(self, dtype):
        import jax

        jax.device_get(self.prepared.take("to_host"))

    def time_numpy(self, dtype):
        self.reference(*self.prepared.host_args)
