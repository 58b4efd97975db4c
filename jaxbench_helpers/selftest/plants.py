"""Known slowdowns planted into JAX's own source, one phase at a time.

Each plant adds ``jax/_src/jaxbench_plant.py`` to a JAX checkout and wraps the function where
one phase happens, so that the phase takes ``fraction`` longer: after the outermost call of the
wrapped function returns, it spins (busy, like real work) for ``fraction`` times that call's
own duration. A proportional plant costs every benchmark of the phase the same share, from a
1 µs dispatch to a 1 s compile, which is what "a slowdown of 10% of the phase" means.

A plant for the instruction counts (``work=N``) adds work instead of time: a spin that waits
for the clock executes few instructions in a process that callgrind slows 50 times. Each
outermost call of the wrapped function then scans N zero bytes (``bytes.count``), a fixed
WORK_INSTRUCTIONS_PER_BYTE instructions a byte, so the sensitivity self-test sizes N from the
count of the phase it plants into. Every count plant scans a slice of the same WORK_BUFFER_BYTES
buffer, whatever its N (0 included): a buffer sized by N would move the heap by N bytes, and
which counts that moves is not what the plant is for.

The plants follow jax 0.10.x's source; a release whose source lacks an anchor is a clear error
(nothing is half-patched).
"""

import os
from dataclasses import dataclass

PHASES = ("dispatch", "trace", "lower", "compile", "run", "transfer", "startup")
# a commit that slows nothing: what the procedure flags from noise alone
CONTROL = "control"
MODULE_PATH = os.path.join("jax", "_src", "jaxbench_plant.py")
_IMPORT = "from jax._src import jaxbench_plant as _jaxbench_plant\n"
# instructions of ``bytes(n).count(1)`` per byte: 5.0 under callgrind, CPython 3.12.1 x86-64
# (100 scans of 1 MB against 100 of 1 kB in two processes); the self-test reports the counts it
# measured, so a machine where this differs sees the real share of its plants
WORK_INSTRUCTIONS_PER_BYTE = 5.0
# calloc'd, so its pages are mapped only as far as a plant scans; 16 MiB covers 10% of a
# ~0.8 G instruction phase
WORK_BUFFER_BYTES = 1 << 24


class PlantError(ValueError):
    pass


@dataclass(frozen=True)
class Edit:
    """Replace the one occurrence of ``old`` in ``path`` by ``new``."""

    path: str
    old: str
    new: str


def _decorate(path, definition, decorator):
    """Put ``@_jaxbench_plant.<decorator>`` on top of the decorators of ``definition`` (which
    starts at a line start, or with the newline that ends the line before it)."""
    lead = "\n" if definition.startswith("\n") else ""
    return Edit(path, definition,
                lead + _IMPORT + f"@_jaxbench_plant.{decorator}\n" + definition[len(lead):])


# phase -> the edits that slow it, and what the plant does in words
PLANTS = {
    CONTROL: ([
        Edit("jax/_src/api.py", "\ndef block_until_ready(x):",
             "\n# (jaxbench sensitivity control: a comment, nothing slowed)\n"
             "def block_until_ready(x):"),
    ], "nothing: a comment in jax/_src/api.py"),
    "dispatch": ([
        Edit("jax/_src/pjit.py",
             "  cpp_jitted_f_class.eval_shape = jit_eval_shape\n  return cpp_pjitted_f\n",
             "  cpp_jitted_f_class.eval_shape = jit_eval_shape\n  " + _IMPORT
             + "  return _jaxbench_plant.dispatching(cpp_pjitted_f)\n"),
    ], "every call of a jitted function (jax.jit and jax.numpy's own) returns later"),
    "trace": ([
        # jit's tracing, under its cache: a cache hit is no trace and stays as fast
        Edit("jax/_src/interpreters/partial_eval.py",
             "@weakref_lru_cache(maxsize=None, explain=explain)\ndef trace_to_jaxpr(\n",
             _IMPORT + "@weakref_lru_cache(maxsize=None, explain=explain)\n"
             "@_jaxbench_plant.slowed\ndef trace_to_jaxpr(\n"),
        # make_jaxpr, control-flow bodies and transformations
        _decorate("jax/_src/interpreters/partial_eval.py",
                  "@profiler.annotate_function\ndef trace_to_jaxpr_dynamic(", "slowed"),
    ], "partial_eval.trace_to_jaxpr and trace_to_jaxpr_dynamic, where Python functions "
       "become jaxprs"),
    "lower": ([
        # all of a jit's lowering (shardings, layouts, the StableHLO module), for Traced.lower
        # and a new function's first call alike; mlir.lower_jaxpr_to_module alone is about
        # half of time_lower, so a plant there read 1.04-1.05 at 10%
        _decorate("jax/_src/pjit.py", "\ndef _resolve_and_lower(\n", "slowed"),
    ], "pjit._resolve_and_lower, where a jit's jaxpr becomes its StableHLO module"),
    "compile": ([
        _decorate("jax/_src/compiler.py",
                  "@profiler.annotate_function\ndef backend_compile_and_load(", "slowed"),
    ], "compiler.backend_compile_and_load, the XLA compile of a new executable"),
    "run": ([
        _decorate("jax/_src/api.py", "\ndef block_until_ready(x):", "waiting"),
    ], "jax.block_until_ready waits longer for device work, as a slower kernel would"),
    "transfer": ([
        _decorate("jax/_src/api.py", "\ndef device_put(\n", "transferring"),
        _decorate("jax/_src/api.py", "\ndef device_get(x: Any):", "slowed_untraced"),
    ], "jax.device_put (until the copy is done) and jax.device_get"),
    "startup": ([
        Edit("jax/__init__.py", "import os as _os\n",
             "import time as _jaxbench_time\n_jaxbench_import_start = "
             "_jaxbench_time.perf_counter()\nimport os as _os\n"),
        Edit("jax/__init__.py", "\n# trailer\n",
             "\n# trailer\n" + _IMPORT
             + "_jaxbench_plant.imported(_jaxbench_import_start)\n"),
    ], "import jax: its module body runs longer"),
}

PLANT_MODULE = '''"""Planted by jaxbench's sensitivity self-test; never part of JAX.

The {phase} phase takes {percent} longer: {what}.
"""

import functools
import time

FRACTION = {fraction!r}
# None: every outermost call spins FRACTION x its duration; a number: it scans WORK zero bytes
# (work for the instruction counts, which a spin on the clock does not reach)
WORK = {work!r}
_ZEROS = bytes({buffer} if WORK is not None else 0)
CALLS = 0  # slowed calls so far: tests check that a plant fires in its phase only
_busy = False  # inside an outermost planted call (the benchmarks call JAX from one thread)
_clock = time.perf_counter


def _spin(seconds):
    global CALLS
    CALLS += 1
    if WORK is not None:
        _ZEROS.count(1, 0, WORK)
        return
    end = _clock() + seconds
    while _clock() < end:
        pass


def _tracing():
    from jax._src import core

    return not core.trace_state_clean()


def _timed(call, untraced_only):
    """Run ``call``; if it is the outermost planted call, spin FRACTION x its duration."""
    global _busy
    if _busy or (untraced_only and _tracing()):
        return call()
    _busy = True
    start = _clock()
    try:
        return call()
    finally:
        _busy = False
        _spin(FRACTION * (_clock() - start))


def slowed(fn, untraced_only=False):
    @functools.wraps(fn)
    def planted(*args, **kwargs):
        return _timed(lambda: fn(*args, **kwargs), untraced_only)
    return planted


def slowed_untraced(fn):
    """For runtime functions that tracing also calls: only calls outside a trace are slowed."""
    return slowed(fn, untraced_only=True)


waiting = slowed_untraced


def transferring(fn):
    """device_put returns before its copy is done; the slowdown covers the copy too."""
    @functools.wraps(fn)
    def planted(*args, **kwargs):
        def put_and_wait():
            from jax._src import api

            out = fn(*args, **kwargs)
            api.block_until_ready(out)
            return out
        return _timed(put_and_wait, untraced_only=True)
    return planted


def dispatching(jitted):
    """A jitted function whose calls return FRACTION later; calls inside a trace are not
    dispatches and run as they were. A plain closure with the cheapest checks: its own cost
    (about 0.8 us on a 2-core VM) adds to every dispatch, even at FRACTION 0."""
    from jax._src import core

    context, top = core.trace_ctx, core.eval_trace

    def planted(*args, **kwargs):
        global _busy
        if _busy or context.trace is not top:
            return jitted(*args, **kwargs)
        _busy = True
        start = _clock()
        try:
            return jitted(*args, **kwargs)
        finally:
            _busy = False
            if FRACTION or WORK is not None:  # work=0 still calls: only the scan differs
                _spin(FRACTION * (_clock() - start))

    planted.__dict__.update(getattr(jitted, "__dict__", {{}}))
    for name in ("lower", "trace", "eval_shape", "clear_cache", "_cache_size", "__name__",
                 "__qualname__", "__doc__", "__module__", "__wrapped__"):
        if hasattr(jitted, name):
            setattr(planted, name, getattr(jitted, name))
    return planted


def imported(start):
    _spin(FRACTION * (_clock() - start))
'''


def describe(phase):
    return PLANTS[phase][1]


def apply(checkout, phase, fraction, work=None):
    """Patch the JAX source at ``checkout`` so that ``phase`` takes ``fraction`` longer (or,
    with ``work``, executes that many zero bytes' scan more per call). Checks every anchor
    before writing anything."""
    if phase not in PLANTS:
        raise PlantError(f"unknown phase {phase!r}; use one of {', '.join(PLANTS)}")
    if work is not None and not (isinstance(work, int) and work >= 0):
        raise PlantError(f"planted work is a number of bytes >= 0, not {work!r}")
    if work is not None and work > WORK_BUFFER_BYTES:
        raise PlantError(f"planted work of {work} bytes is more than the plant's buffer "
                         f"({WORK_BUFFER_BYTES}): plant a smaller fraction")
    if not fraction >= 0:
        raise PlantError(f"a planted slowdown is a fraction >= 0 (0: the plant's own cost "
                         f"only), not {fraction!r}")
    edits, what = PLANTS[phase]
    patched = {}
    for edit in edits:
        full = os.path.join(checkout, edit.path)
        if full not in patched:
            if not os.path.isfile(full):
                raise PlantError(f"{checkout} has no {edit.path}: is it a JAX checkout?")
            with open(full) as f:
                patched[full] = f.read()
        count = patched[full].count(edit.old)
        if count != 1:
            raise PlantError(
                f"{edit.path} has {count} occurrences of {edit.old.strip()!r}, not 1: the "
                f"{phase} plant follows jax 0.10.x's source; pick such a release")
        patched[full] = patched[full].replace(edit.old, edit.new)
    for full, text in patched.items():
        with open(full, "w") as f:
            f.write(text)
    with open(os.path.join(checkout, MODULE_PATH), "w") as f:
        f.write(PLANT_MODULE.format(phase=phase, percent=f"{fraction:.0%}", what=what,
                                    fraction=fraction, work=work,
                                    buffer=WORK_BUFFER_BYTES))
    return sorted({e.path for e in edits} | {MODULE_PATH.replace(os.sep, "/")})
