"""Counting JAX's own trace / lower / compile events, through ``jax.monitoring``.

JAX reports a duration event for every jaxpr trace, every lowering to MLIR and every backend
compile (all under ``/jax/core/compile/``). A timed call during which any of them fires did
work that belongs to another phase: the recompilation guard turns that into a failure.
"""

import collections
import functools

COMPILE_PREFIX = "/jax/core/compile/"
BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"
CACHE_PREFIX = "/jax/compilation_cache/"

_counts = collections.Counter()
_compile_events = 0
_installed = False


def _on_duration(event, duration=None, **kwargs):
    global _compile_events
    _counts[event] += 1
    if event.startswith(COMPILE_PREFIX):
        _compile_events += 1


def _on_event(event, **kwargs):
    _counts[event] += 1


def install():
    """Register the listeners once per process (idempotent)."""
    global _installed
    if _installed:
        return
    import jax.monitoring as monitoring

    monitoring.register_event_duration_secs_listener(_on_duration)
    if hasattr(monitoring, "register_event_listener"):
        monitoring.register_event_listener(_on_event)
    _installed = True


def compile_events():
    """How many trace, lower or compile events fired since install()."""
    return _compile_events


def count(prefix):
    """How many events whose name starts with ``prefix`` fired since install()."""
    return sum(n for name, n in _counts.items() if name.startswith(prefix))


def snapshot():
    """A copy of every event count so far (for tests and diagnostics)."""
    return dict(_counts)


class RecompilationError(RuntimeError):
    pass


def forbid_compile(method):
    """Fail the benchmark if the timed call traced, lowered or compiled anything.

    Costs two integer reads per timed call, so it wraps whole inner loops, not single calls.
    """

    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        before = _compile_events
        result = method(self, *args, **kwargs)
        after = _compile_events
        if after != before:
            raise RecompilationError(
                f"{type(self).__name__}.{method.__name__} traced or compiled during a timed call "
                f"({after - before} compile events); setup must warm every program it times"
            )
        return result

    return guarded
