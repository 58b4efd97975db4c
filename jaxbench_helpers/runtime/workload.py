"""The workload base class, and what a benchmark process prepares for one workload.

A workload class names a JAX program (``program``), its host inputs (``inputs``), the same
maths in NumPy where one exists (``reference``) and its own ``params`` and ``param_names``;
it lists the phase mixins of ``phases.py`` it measures, and each of those holds its timed code.
Settings that change the program are explicit attributes and hooks here: ``static_arguments``
(Python values bound into the program and its reference, static to jit), ``x64`` (64-bit
mode), ``jit_options``, ``jit_program``, ``platforms`` and ``call_arguments``.

``setup`` prepares the workload once per benchmark object (asv keeps one object per process):
it compiles the program (loading it from the persistent cache that the module's
``setup_cache`` filled), puts the inputs on the device and checks the full-size output against
``reference`` before anything is timed. Later calls only replace what a cold sample consumed:
one fresh staged object per sample, made outside the timing.

asv reads the sampling attributes (``rounds``, ``repeat``, ``warmup_time``) from the class when
it discovers the suite, so they come from the size profile that JAXBENCH_PROFILE names when
this module is imported (``profiles.py``); the cold phases' ``repeat`` likewise (``cold``).
"""

import abc
import functools
import inspect
import itertools
import sys
import time
import traceback
import types

import numpy as np

from . import compat, compile_cache, data, device, monitor, platform, profiles

DISPATCH_CALLS = 100

# Normwise relative error allowed against NumPy, by the dtype of the output: loose enough for
# TF32 and 16-bit matmuls on GPUs, tight enough to catch a wrong result.
TOLERANCE = {"float16": 5e-2, "bfloat16": 5e-2, "float32": 2e-2, "complex64": 2e-2,
             "float64": 1e-9, "complex128": 1e-9}

_COLD_STAGES = ("trace", "lower", "compile")

_PROFILE = profiles.current()


def workload_classes(module):
    """The concrete workload classes a benchmark module defines (the ones asv runs)."""
    return [cls for name, cls in inspect.getmembers(module, inspect.isclass)
            if cls.__module__ == module.__name__ and not name.startswith("_")
            and issubclass(cls, Workload) and not inspect.isabstract(cls)]


def warm_module(module_name):
    """The body of a benchmark module's ``setup_cache``: compile every workload class of the
    module into the persistent cache, checking each output against NumPy.

    asv starts a fresh interpreter (and imports JAX) for each setup_cache function, so one per
    module, not one per class, saves that start for every class. A class that fails here is
    reported on stderr and skipped, so its neighbours still get their cache; its own
    benchmarks then fail in their ``setup``, which prepares and checks the program again.
    Returns {class name: traceback} of the classes that failed.
    """
    failed = {}
    for cls in workload_classes(sys.modules[module_name]):
        try:
            cls().warm_compilation_cache()
        except Exception:
            failed[cls.__qualname__] = traceback.format_exc()
            print(f"setup_cache could not warm {module_name}.{cls.__qualname__}; its "
                  f"benchmarks will fail in setup:\n{failed[cls.__qualname__]}",
                  file=sys.stderr)
    return failed


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
    method.repeat = _PROFILE.cold_repeat
    return method


# calls a sample of the phases that read an output back (microseconds each, every call on an
# output never read before): with one call a sample, the samples of one run spread 30-100%
READS_PER_SAMPLE = 8
# the workload this process set up last: asv runs a method's own setup right after the class's
# setup of the same instance, and gives it the parameters only
_set_up_last = None


def phase_setup(body):
    """A phase's own asv setup (``method.setup``): asv runs it after the class's setup, in
    that phase's processes only, with the parameters only; ``body(*params)`` runs there, and
    not for asv_runner's parameter-free call before setup_cache."""

    @functools.wraps(body)
    def setup(*params):
        if params:
            body(*params)

    return setup


def _set_up_for(phase, params):
    """The workload whose class's setup ran last, for ``params``: what a phase's own setup
    (run right after it) works on."""
    if _set_up_last is None or _set_up_last.prepared.params != params:
        raise RuntimeError(
            f"the {phase} phase's own setup ran before its class's setup{params}: asv runs "
            "the class's first; call them in that order")
    return _set_up_last


def cold_reads(slot, read):
    """Attributes of a phase that reads back outputs never read before (``slot``'s):
    READS_PER_SAMPLE calls a sample, each on its own output, no warm-up; asv divides the
    sample by the number. Its own setup (in this phase's processes only, so no other phase
    holds the outputs) makes the outputs and ``read``s one more, untimed."""

    @phase_setup
    def setup(*params):
        _set_up_for(slot, params).prepared.fill(slot, read)

    def attributes(method):
        cold(method)
        method.number = READS_PER_SAMPLE
        method.setup = setup
        method.read_slot = slot
        return method

    return attributes


def _read_slots(workload):
    """The slots of ``workload``'s read phases (``cold_reads``), in the order the classes
    first define the phases, base classes first."""
    cls = type(workload)
    names = dict.fromkeys(name for base in reversed(cls.__mro__) for name in vars(base))
    slots = (getattr(getattr(cls, name, None), "read_slot", None) for name in names)
    return list(dict.fromkeys(slot for slot in slots if slot is not None))


# a warm sample of a phase warmed by its own setup lasts at least this long (asv_runner's
# default sample_time, which picks the number of the other warm phases)
SAMPLE_SECONDS = 0.01
# and its warm-up, cycles of setup and a sample's calls: ten times asv's for the other phases
WARMUP_SECONDS = 10 * _PROFILE.warmup_time


def warmed_with_setup(before=None):
    """Attributes of a warm phase whose calls hold what they make until the next setup
    (``Prepared.keep``): asv_runner chooses ``number`` and warms up with no setup between the
    calls, so up to hundreds of outputs piled up and the first samples ran slow
    (results/HEAP-FAULTS.md). The phase's own setup warms it instead, once per process, after
    ``before()``: cycles of the class's setup and one sample's calls, the number of calls
    grown until a sample lasts ``SAMPLE_SECONDS``, then the class's setup again; it sets that
    number and no asv warm-up on the benchmark object, which asv reads after every setup."""

    def attributes(method):
        name = method.__name__

        @phase_setup
        def setup(*params):
            if before is not None:
                before()
            workload = _set_up_for(name, params)
            if getattr(workload, "_warmed", None) != (name, params):
                workload.number = _warm_up(workload, getattr(workload, name), params)
                workload.warmup_time = 0.0
                workload._warmed = (name, params)

        method.setup = setup
        return method

    return attributes


def _warm_up(workload, phase, params):
    """Cycles of ``workload``'s setup and ``number`` calls of ``phase``; the number that makes
    a sample last ``SAMPLE_SECONDS``. Leaves the workload freshly set up."""
    number, started = 1, time.perf_counter()
    while True:
        workload.setup(*params)
        start = time.perf_counter()
        for _ in range(number):
            phase(*params)
        took = time.perf_counter() - start
        if took < SAMPLE_SECONDS:
            # as asv_runner grows it: by the shortfall, at least one, at most tenfold
            grow = min(10.0, max(1.1, SAMPLE_SECONDS / max(took, 1e-9)))
            number = max(number + 1, int(grow * number))
        elif time.perf_counter() - started >= WARMUP_SECONDS:
            break
    workload.setup(*params)
    return number


def _bound(fn, static):
    return functools.partial(fn, **static) if static else fn


class Prepared:
    """One workload at one parameter combination, ready to time in this process."""

    def __init__(self, workload, params):
        import jax

        self.workload = workload
        self.params = params
        self.profile = profiles.current()
        self.device = platform.device()
        if workload.platforms and self.device.platform not in workload.platforms:
            only = "/".join(p.upper() for p in workload.platforms)
            raise NotImplementedError(
                f"{only}-only: {type(workload).__name__} does not run on "
                f"{self.device.platform}")
        compat.set_x64(workload.x64(*params))
        self.static = workload.static_arguments(self.profile, *params)
        self.program = _bound(workload.program, self.static)
        self.reference = (None if workload.reference is None
                          else _bound(workload.reference, self.static))
        self.host_args = workload.inputs(self.profile, *params, dispatch=False)
        # what the to-device phases put: at one address offset in every process, since the
        # address decides whether device_put copies on CPU
        self.transfer_args = jax.tree_util.tree_map(data.at_fixed_address, self.host_args)
        self.reference_args = self.reference_out = None
        if workload.reference_layout is not None:
            self.reference_args, self.reference_out = workload.reference_layout(
                self.reference, self.host_args)
        self.args = workload.place(self.host_args, self.device)
        self.tiny_args = None
        if _has_phase(workload, "time_dispatch_100_calls", "time_latency_100_calls"):
            self.tiny_args = workload.place(
                workload.inputs(self.profile, *params, dispatch=True), self.device)
        self.run = self._jit(self.program) if workload.jit_program else self.program
        if self.tiny_args is not None:
            swapped = workload.call_arguments(self, *params)
            if swapped is not None:
                self.tiny_args = swapped
        self.slots = {}
        self.kept = []

    def fresh_program(self):
        """The program as a never-seen function object, static arguments bound."""
        return _bound(fresh_function(self.workload.program), self.static)

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
        missing = [s for s in _COLD_STAGES if not self.slots.get(s)]
        if "lower" in missing:
            self.slots["lower"] = [self._jit(self.fresh_program()).trace(
                *self.args) if compat.has_trace_stage() else None]
        if "compile" in missing:
            self.slots["compile"] = [self._jit(self.fresh_program()).lower(*self.args)]
        if missing:
            compat.clear_caches()
        if "trace" in missing:
            self.slots["trace"] = [self._trace_call(self.fresh_program())]

    def _trace_call(self, fn):
        """A zero-argument callable that traces ``fn`` once; wrappers are built here, untimed."""
        import jax

        if compat.has_trace_stage():
            return functools.partial(self._jit(fn).trace, *self.args)
        return functools.partial(jax.make_jaxpr(fn), *self.args)

    def refill_outputs(self):
        """One never-read output in each read phase's slot: a count's child runs the class's
        setup only, not the phase's own (``cold_reads``), and its count takes one."""
        for slot in _read_slots(self.workload):
            self.refill_output(slot)

    def refill_output(self, slot):
        """One never-read output in ``slot`` if the last sample took its last (the read
        phase's own setup tops it up: ``fill``)."""
        if not self.slots.get(slot):
            self.slots[slot] = [self.fresh_output()]

    def fresh_output(self):
        """The program's full-size output, computed and waited for."""
        return device.block(self.run(*self.args))

    def fill(self, slot, read):
        """Top ``slot`` up to one never-read output per call of a sample, unless the last
        sample left them; then ``read`` one more output, untimed, so that the first timed
        call finds the read's code and data in the caches as the others do (after computing
        the outputs, it took 10-20 times as long)."""
        outputs = self.slots.setdefault(slot, [])
        if len(outputs) < READS_PER_SAMPLE:
            outputs.extend(self.fresh_output() for _ in range(READS_PER_SAMPLE - len(outputs)))
            extra = self.fresh_output()
            self.keep(extra, read(extra))  # freed with the sample's, in the next setup

    def take(self, slot):
        """One never-used object of ``slot``: each call of a sample takes its own."""
        objects = self.slots.get(slot)
        if not objects:
            raise RuntimeError(
                f"no fresh object for the {slot} phase: setup prepares one never-used object "
                "per call, as many as the phase's number (calls a sample)")
        return objects.pop()

    def compiled(self):
        """The executable ``run`` uses (from the in-memory cache: nothing is recompiled)."""
        return self.run.lower(*self.args).compile()

    def check(self, out):
        """Compare a full-size output with the NumPy reference; raise if it is wrong."""
        import jax
        import jax.numpy as jnp

        name = f"{type(self.workload).__name__}{self.params}"
        got = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(out)]
        if self.reference is None:
            bad = [g for g in got
                   if jnp.issubdtype(g.dtype, jnp.inexact) and not np.isfinite(g).all()]
            if bad:
                raise AssertionError(f"{name}: the output has NaN or inf values")
            return
        expected = self.reference(*self.host_args)
        want = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(expected)]
        if len(got) != len(want):
            raise AssertionError(f"{name}: JAX gave {len(got)} arrays, NumPy {len(want)}")
        for g, w in zip(got, want):
            if g.dtype != w.dtype or g.shape != w.shape:
                raise AssertionError(
                    f"{name}: JAX gave {g.dtype}{g.shape}, NumPy {w.dtype}{w.shape} "
                    "(is x64 really on for float64?)"
                )
            if not jnp.issubdtype(w.dtype, jnp.inexact):
                if not np.array_equal(g, w):
                    raise AssertionError(f"{name}: JAX and NumPy disagree on {w.dtype} values")
                continue
            tolerance = self.workload.tolerance[w.dtype.name]
            # in double precision: NumPy has no arithmetic of its own for bfloat16
            wide = np.complex128 if jnp.issubdtype(w.dtype, jnp.complexfloating) else np.float64
            g, w = g.astype(wide), w.astype(wide)
            err = np.linalg.norm(g - w) / max(np.linalg.norm(w), np.finfo(wide).tiny)
            if not err <= tolerance:
                raise AssertionError(
                    f"{name}: relative error {err:.3g} against NumPy exceeds {tolerance:g}; "
                    "the benchmark would time a broken computation"
                )


class Workload(abc.ABC):
    """Base of every workload class: a subclass defines ``params``, ``param_names``,
    ``program`` and ``inputs``, and lists the phase mixins it measures."""

    timeout = 300
    rounds = _PROFILE.rounds
    repeat = _PROFILE.repeat
    warmup_time = _PROFILE.warmup_time
    # Results stay comparable across refactors of this file. Bump it here when what a phase
    # times changes, and in a subclass when its program or inputs change.
    version = "1"
    # The NumPy version of ``program`` (a staticmethod), or None where NumPy has none; then
    # the output is only checked to be finite.
    reference = None
    # Where the NumPy baseline writes into a preallocated output with its inputs placed:
    # phases.NumpyBaselinePinnedLayout's method; ``reference`` then takes ``out=``
    reference_layout = None
    tolerance = TOLERANCE
    # keyword arguments for jax.jit (static_argnums, donate_argnums, ...)
    jit_options = {}
    # False for eager (op-by-op) workloads: ``program`` is called as it is, not jitted
    jit_program = True
    # jax platform names (Device.platform) the workload runs on; elsewhere it skips (n/a)
    platforms = ()

    @staticmethod
    @abc.abstractmethod
    def program(*args):
        """The JAX function being measured (a plain function: it is re-created per trace)."""

    @abc.abstractmethod
    def inputs(self, profile, *params, dispatch):
        """Host inputs: a tuple of NumPy arrays or pytrees of them, one per ``program``
        argument, for the parameter values ``params``; tiny ones when ``dispatch`` is true."""

    # ---- hooks -----------------------------------------------------------------------------

    def x64(self, *params):
        """Whether this parameter combination runs with 64-bit types (jax_enable_x64); off,
        JAX's default, unless the class says otherwise."""
        return False

    def static_arguments(self, profile, *params):
        """Keyword arguments bound into ``program`` and ``reference`` for these parameter
        values and this profile: Python values, so static to jit (an axis, a length, a
        shape)."""
        return {}

    def call_arguments(self, prepared, *params):
        """The arguments the dispatch phases call ``prepared.run`` with, where they are not
        the tiny device inputs (host arrays, Python scalars, typed keys); None: those inputs.
        Called once per process, before the program is warmed with them."""
        return None

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
        prepared = getattr(self, "prepared", None)
        if (prepared is None or prepared.params != params
                or prepared.profile != profiles.current()):
            self.configure_process()
            platform.configure()
            monitor.install()
            prepared = Prepared(self, params)
            # the cold stages' objects first: making them clears JAX's caches, which would
            # make the warmed program compile again
            prepared.refill()
            with compile_cache.loading_from_shared_dir():
                out = prepared.warm()
            prepared.check(out)  # in this process, before anything is timed
        else:
            prepared.kept.clear()  # frees the last sample's arrays here, untimed
            prepared.refill()
        prepared.refill_outputs()
        self.prepared = prepared
        global _set_up_last
        _set_up_last = self
