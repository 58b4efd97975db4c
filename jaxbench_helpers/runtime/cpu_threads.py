"""How many CPUs the benchmark processes use, chosen by JAXBENCH_CPU_THREADS.

``all`` leaves the process as the machine starts it: XLA's CPU thread pools and OpenBLAS size
themselves from the CPUs the process may run on. ``1`` pins the process to one CPU (the last in
its affinity mask, so the asv process and the rest of the machine keep the others) and asks
BLAS libraries for one thread (through threadpoolctl, since NumPy is loaded before the suite),
before jax starts its backend.

The affinity mask is the control that every release reads: XLA's pools size themselves from
``sched_getaffinity`` from jaxlib 0.4.20 to 0.10.2 (a 1000x1000 matmul then uses one CPU, not
two), and no XLA flag is needed. ``--xla_cpu_multi_thread_eigen=false``, the flag usually
suggested, swaps in a different, slower dot kernel on releases before the thunk runtime and does
nothing on later ones, so it would break the history; and an XLA flag a release does not know
aborts the process.

``split`` keeps the Python thread and XLA's pools apart: before the backend starts, the process
may run on every CPU but the last, so XLA sizes its pools to those; once the backend has started
(``after_backend_start``, from ``platform.device``), the Python thread alone moves to the last
CPU. BLAS gets one thread, as with ``1``.

The profile decides (``regular`` pins, ``quick`` and ``large`` do not); JAXBENCH_CPU_THREADS
overrides it. ``bench_environment.Threads.track_cpus_usable`` records in every result how many
CPUs the benchmarks had.
"""

import os
import sys

CPU_THREADS_ENV = "JAXBENCH_CPU_THREADS"
CHOICES = ("all", "1", "split")
# thread-count variables of the BLAS and OpenMP runtimes NumPy and SciPy may load
BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


class CpuThreadsError(ValueError):
    pass


def selected(default="all"):
    """The JAXBENCH_CPU_THREADS value, validated; ``default`` without it (``platform`` passes
    the profile's setting on CPU, 'all' on an accelerator, whose host threads feed the
    device)."""
    value = os.environ.get(CPU_THREADS_ENV, "").strip().lower() or default
    if value not in CHOICES:
        raise CpuThreadsError(
            f"{CPU_THREADS_ENV}={value!r} is not a choice; use 'all' (the machine's default "
            "threads), '1' (one CPU, one thread per library) or 'split' (XLA's pools on all "
            "CPUs but the last, the Python thread on the last)"
        )
    return value


def _backend_started():
    bridge = sys.modules.get("jax._src.xla_bridge")
    if bridge is None:
        return False
    started = getattr(bridge, "backends_are_initialized", None)
    if started is not None:
        return bool(started())
    return bool(getattr(bridge, "_backends", None))  # jax 0.4.20 has no such function


def apply(default="all"):
    """Pin this process as JAXBENCH_CPU_THREADS (else ``default``) says (again: a no-op).
    Returns the CPUs it may run on. Must first run before jax starts a backend, which sizes
    XLA's pools once.
    """
    setting = selected(default)
    if setting in ("1", "split"):
        global _split_last
        cpus = os.sched_getaffinity(0)
        if len(cpus) > 1 and _split_last is None:
            if _backend_started():
                raise CpuThreadsError(
                    f"{CPU_THREADS_ENV}={setting} came too late: jax has started its backend "
                    f"with threads for {len(cpus)} CPUs; call "
                    "jaxbench_helpers.runtime.platform.configure() before the first jax "
                    "operation")
            if setting == "1":
                os.sched_setaffinity(0, {max(cpus)})
            else:
                _split_last = max(cpus)
                os.sched_setaffinity(0, cpus - {_split_last})
            _limit_loaded_blas()
        for name in BLAS_THREAD_VARS:  # for libraries loaded later and for child processes
            os.environ[name] = "1"
    return sorted(os.sched_getaffinity(0))


# under 'split': the CPU the Python thread moves to once XLA's pools exist
_split_last = None


def after_backend_start():
    """Under 'split', move the calling (Python) thread to the CPU kept from XLA's pools;
    threads the backend made before keep theirs. Otherwise nothing."""
    if _split_last is not None:
        os.sched_setaffinity(0, {_split_last})


def _limit_loaded_blas():
    """One thread for BLAS libraries already loaded: asv_runner imports pympler, which imports
    NumPy (and its OpenBLAS, sized to every CPU) before the suite."""
    try:
        import threadpoolctl
    except ImportError:
        raise CpuThreadsError(
            f"{CPU_THREADS_ENV}=1 needs threadpoolctl to give NumPy's BLAS one thread; the "
            "install step installs it (python -m jaxbench_helpers.install), or pip install "
            "threadpoolctl") from None
    threadpoolctl.threadpool_limits(limits=1)
