"""Instruction counts of the CPU-side phases, under Valgrind's callgrind.

A wall-clock figure on a shared 2-core VM moves with the neighbours; the number of instructions
a phase executes does not. ``Counts`` gives a workload class one ``track_*`` benchmark (unit
"CPU instructions") per CPU-side ``time_*`` phase it has, named after it:

==============================  ==================================================================
``time_run``                    ``track_run_cpu_instructions``
``time_dispatch_100_calls``     ``track_dispatch_cpu_instructions_per_call`` (the count / 100)
``time_latency_100_calls``      ``track_latency_cpu_instructions_per_call`` (the count / 100)
``time_trace`` (lower, ...)     ``track_trace_cpu_instructions`` (lower, compile, to_device, ...)
==============================  ==================================================================

How a count is made. asv runs each benchmark in a process of its own, not under Valgrind. The
first count benchmark of a module that runs starts ONE child process under
``valgrind --tool=callgrind --instr-atstart=no``, in the working directory every benchmark of
the module shares (where ``setup_cache`` ran, so the child loads the same persistent
compilation cache). The child imports the module and, for every class with ``Counts`` in its
bases and every parameter combination, calls the class's own ``setup`` and then the very
``time_*`` method inside a delimited region: instrumentation starts and the counters are zeroed
just before the call and stop just after it (callgrind client requests, through a few lines of
C compiled once per machine), so the import, setup and everything between regions cost no
instrumentation and are not counted. Each region leaves a callgrind dump; the child reads only
its total, and the benchmark process reads the dumps once the child has ended (a dump parsed
under valgrind cost 0.1 s). Every count of the module goes to one JSON file there; later count
benchmarks read it.

Each region is one sample, as asv times it: ``setup`` before every sample (it refills the
fresh objects of cold phases), one uncounted call before the samples of every phase (asv's
warm-up; for a cold phase, the call that would find setup's warm caches), the garbage
collector off inside the region (asv's timer turns it off too). A count is the least of its
samples less the count of an empty region (the region's own cost: the return from the start
request and the call into the stop request), and less glibc's deferred housekeeping
(HOUSEKEEPING_FUNCTIONS: ``malloc_consolidate``, which merges the chunks freed into its fast
bins when a later call asks for it, with all it calls): how much of it lands in a region
depends on what the process freed before, not on the region (0.9-1.9 M of a 25 M compile,
3% between processes; 1-2% of a dispatch sample). The least, not the median: the
allocator's other paths still move a sample (1-2 % of a dispatch count, so the median of a few
samples moved by that much between processes, or when another class ran first); the least is
the sample with the fewest of them, the same whatever ran before. The phases of
many calls (dispatch, latency) get MANY_SAMPLES samples where they are cheap (a region's
total under MANY_SAMPLES_BELOW instructions), so that one of them misses the allocator's other
paths; the stages two (PHASE_SAMPLES), a compile because it takes one of two counts at random;
others DEFAULT_SAMPLES, and one where the first totals more than ONE_SAMPLE_ABOVE.

The child counts a class's warm phases before its stages (a stage's setup clears JAX's caches,
after which a warm phase's program would compile again), and freezes the garbage collector's
view of what the class's first setup made (``gc.freeze``): the collection before every region
then walks only what was made since, not all of JAX (0.1 s a region under valgrind).

What a count costs: callgrind runs the counted code some 50 times slower, so the child
counts every workload at the ``quick`` profile's sizes (COUNT_PROFILE), whatever the profile
of the run: the same programs and code paths as the timed phase, with smaller arrays (a
1000x1000 matmul's run is some 10 G instructions, minutes under callgrind; at 128x128 it is
under one). Trace, lower and compile do not depend on the sizes beyond the shapes they name.

What keeps a count still between processes: the child runs on one CPU, so XLA sizes its
thread pools to one thread; string hashing is seeded (PYTHONHASHSEED=0), so tracing walks dicts
and sets in the same order; address randomization is off (``setarch -R``) and valgrind hands
its lock to threads in turn (``--fair-sched=yes``), so threads interleave alike; and the
instructions of XLA's thread pool itself (scheduling, and the spinning of idle workers, up to
a third of a dispatch count and different in every sample) are left out, while the work of the
tasks it runs is counted.

Where the platform is not the CPU, or valgrind, a C compiler or valgrind's headers are
missing, every count is n/a with a message that says what to install; nothing else changes.
JAXBENCH_COUNTS_DUMPS=<folder> keeps every region's dump there (``callgrind_annotate`` shows
where a count moved between two commits). JAXBENCH_COUNTS_HEAP_SHIFT=<bytes>,<objects> starts
the child from another heap layout (HEAP_SHIFT_ENV), as ``calibrate`` does run by run. A
child that fails, or a case that fails inside it, fails its benchmarks with the child's output;
a case that cannot run on this release (a phase that skips) is n/a with its reason.
"""

import contextlib
import gc
import hashlib
import importlib
import itertools
import json
import os
import platform as host_platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

from . import platform, profiles, user_cache, workload

# analysis.results.COUNT_UNIT names the same unit (the report and ab judge counts by it)
UNIT = "CPU instructions"
# the phases a Counts class counts unless it says otherwise; time_numpy is not JAX's work
DEFAULT_PHASES = ("time_run", "time_dispatch_100_calls", "time_latency_100_calls",
                  "time_trace", "time_lower", "time_compile", "time_to_device", "time_to_host")
# uncounted calls before the samples of a phase (default 1)
UNCOUNTED_CALLS = {"time_trace": 3, "time_lower": 3}
# samples per count (each one region; the count is the least), unless a class says otherwise
# in ``count_samples``
DEFAULT_SAMPLES = 3
# ... but the stages fewer: a trace's or lower's samples agree within 0.1-0.4% in a process,
# and each sample costs 1-30 s of callgrind translating the compiler's code again; a compile
# takes one of a few counts (XLA compiles fusions on a thread pool, in MLIR contexts it makes
# whenever none is free: how many depends on how the threads interleave, 16-19 M instructions
# each, 2% of the MLP's), so two samples, whose least more often has the fewer contexts
PHASE_SAMPLES = {"time_trace": 2, "time_lower": 2, "time_compile": 2}
# ... and for a phase of many calls (dispatch, latency) whose first sample's region totals
# less than MANY_SAMPLES_BELOW (the thread pool's instructions included: the MLP's latency
# counts 28.9 M and totals 32.2 M; the transformer's and the CNN's, above, total 61-67 M):
# their allocations are where the allocator's housekeeping moves a count, and a sample costs
# a second or less under callgrind
MANY_SAMPLES = 9
MANY_SAMPLES_BELOW = 40_000_000
# a phase whose first sample totals more than this is counted once: another sample would cost
# a minute or more under callgrind (some 20-40 M instructions a second on a 2-core VM), and the
# big phases (compiles of large programs, large runs) spread least
ONE_SAMPLE_ABOVE = 2_000_000_000
# seconds for one module's child; asv's timeout of the count benchmarks is a little longer so
# that the child's own timeout, with its message, comes first
CHILD_TIMEOUT = 1500
BENCHMARK_TIMEOUT = CHILD_TIMEOUT + 120
# bump when what the child counts, or how, changes: results of another version are recounted
# 3: warm phases before the stages, stages sampled fewer times (PHASE_SAMPLES), the collector
# frozen after each class's setup
# 4: the parent reads the dumps (the child's heap no longer holds their parsing), the first
# sample's total (region and excluded functions included) decides the number of samples, a
# compile takes two samples
# 5: programs compiled with the persistent cache on no longer carry its folder (asv's random
# temporary one) in their compile options
# 6: glibc's deferred consolidation of its fast bins (HOUSEKEEPING_FUNCTIONS) is left out
MECHANISM_VERSION = "6"

# the sizes every count is made at (see the module's docstring)
COUNT_PROFILE = "quick"

RESULTS_FILE = "jaxbench-counts-{module}.json"
_CHILD_ENV = "JAXBENCH_COUNTS_CHILD"
# a folder: every region's callgrind dump is kept there, to see where a count moved
KEEP_DUMPS_ENV = "JAXBENCH_COUNTS_DUMPS"
_OUTPUT_TAIL = 4000
# "BYTES,OBJECTS": the child allocates a buffer of BYTES and OBJECTS small Python objects, and
# keeps them, before it imports the benchmark module (and JAX). Unset, the child starts as it
# always has. Address randomization is off, so a process's heap layout is fixed by what it
# allocated before; a commit that changes code a count never runs moves everything after it,
# and with it a count: pointer-keyed hash tables probe otherwise and the allocator takes other
# paths (jax 0.10.2: the seed matmul's compile 2.4% apart over five layouts, one of them in a
# higher mode; the 64 KB copy to host 1.1%). ``calibrate`` counts each run from another layout;
# another install moves counts further still (results/COUNTS.md).
HEAP_SHIFT_ENV = "JAXBENCH_COUNTS_HEAP_SHIFT"

# One region at a time: start instrumenting (which also discards the uninstrumented code
# translations) and zero the counters; afterwards stop and write the counters to a dump file
# named after the region.
SHIM_SOURCE = r"""
#include <valgrind/callgrind.h>

void jaxbench_region_begin(void) { CALLGRIND_START_INSTRUMENTATION; CALLGRIND_ZERO_STATS; }

void jaxbench_region_end(const char *name) {
    CALLGRIND_STOP_INSTRUMENTATION;
    CALLGRIND_DUMP_STATS_AT(name);
}

int jaxbench_on_valgrind(void) { return RUNNING_ON_VALGRIND; }
"""

_INSTALL_HINT = ("Debian/Ubuntu: apt-get install valgrind gcc; Fedora: dnf install valgrind "
                 "valgrind-devel gcc")


class CountError(RuntimeError):
    """A count could not be made: the child failed, or a case inside it did."""


# ---- naming ---------------------------------------------------------------------------------

def track_name(time_name):
    """The count benchmark paired with a ``time_*`` phase, and how many calls one timed call
    makes (the count is per call where the phase times 100)."""
    if not time_name.startswith("time_"):
        raise ValueError(f"{time_name!r} is not a time_* phase")
    stem = time_name[len("time_"):]
    calls = re.search(r"_(\d+)_calls$", stem)
    if calls:
        return (f"track_{stem[:calls.start()]}_cpu_instructions_per_call", int(calls.group(1)))
    return f"track_{stem}_cpu_instructions", 1


# Phases whose every sample takes a fresh staged object, which the next setup replaces,
# clearing JAX's caches: counted after the class's other phases, whose programs would compile
# again after a clear (in setup: not counted, but 6-10 s for a model under valgrind)
_CLEARING_PHASES = ("time_trace", "time_lower", "time_compile")


def counted_phases(cls):
    """The ``time_*`` phases of ``cls`` that it counts, in a fixed order: as listed, those of
    _CLEARING_PHASES last."""
    wanted = cls.count_phases if cls.count_phases is not None else DEFAULT_PHASES
    missing = [name for name in wanted if not callable(getattr(cls, name, None))]
    if cls.count_phases is not None and missing:
        raise TypeError(f"{cls.__qualname__}.count_phases names {missing}, which the class "
                        "does not have; name time_* methods it has")
    return sorted((name for name in wanted if name not in missing),
                  key=lambda name: name in _CLEARING_PHASES)


def case_key(cls, params, time_name):
    return json.dumps([cls.__qualname__, time_name, [repr(p) for p in params]])


# ---- the mixin --------------------------------------------------------------------------------

class Counts:
    """Mixin: a ``track_*_cpu_instructions`` benchmark for every CPU-side ``time_*`` phase.

    Put it first in a workload class's bases. Class attributes that tune it:
    ``count_phases`` (the ``time_*`` names to count; default every one of DEFAULT_PHASES the
    class has), ``count_params`` (the parameter tuples to count; others are n/a; default all),
    ``count_samples`` ({time name: samples}; default PHASE_SAMPLES, MANY_SAMPLES,
    DEFAULT_SAMPLES or one, by the phase and the size of its first sample).
    """

    count_phases = None
    count_params = None
    count_samples = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        counted = counted_phases(cls)
        for time_name in DEFAULT_PHASES + tuple(cls.count_phases or ()):
            name, calls = track_name(time_name)
            if time_name in counted:
                setattr(cls, name, _track_method(cls, time_name, name, calls))
            elif getattr(cls, name, None) is not None:
                setattr(cls, name, None)  # a base counted it; this class does not


def _track_method(cls, time_name, name, calls):
    per_call = f", per call of the {calls} it makes" if calls > 1 else ""

    def track(self, *params):
        return _count(self, time_name, params)

    track.__name__ = track.__qualname__ = name
    track.__doc__ = (f"Instructions that {time_name} executes at the {COUNT_PROFILE} "
                     f"profile's sizes (callgrind, one region per sample, the least{per_call}).")
    track.unit = UNIT
    track.counted_phase = time_name  # benchmarks/fingerprints.py: the work it counts
    track.timeout = BENCHMARK_TIMEOUT
    # the count follows what the phase times: a new version of the phase is a new count
    phase_version = (getattr(getattr(cls, time_name), "version", None)
                     or getattr(cls, "version", None) or "1")
    track.version = f"{phase_version}-counts{MECHANISM_VERSION}"
    if cls.count_params is not None:
        # asv_runner skips these before setup, which at the run's sizes costs seconds a case;
        # _count still refuses them where an asv_runner does not know skip_params
        track.skip_params = [params for params in itertools.product(*cls.params)
                             if tuple(params) not in _param_tuples(cls)]
    return track


# ---- the benchmark process: find (or make) the module's counts --------------------------------

def _count(workload_self, time_name, params):
    cls = type(workload_self)
    if platform.selected() != "cpu":
        workload.skip("instruction counts are made on the CPU platform only (callgrind "
                      "cannot run a GPU driver); run with JAXBENCH_PLATFORM=cpu")
    if cls.count_params is not None and tuple(params) not in _param_tuples(cls):
        workload.skip(f"counted only at {cls.count_params}")
    problem = missing_tools()
    if problem:
        workload.skip(problem)
    _require_shared_directory(cls)
    results = module_counts(cls.__module__)
    if "failure" in results:
        raise CountError(results["failure"])
    entry = results["cases"].get(case_key(cls, params, time_name))
    if entry is None:
        raise CountError(f"the callgrind child of {cls.__module__} counted no "
                         f"{cls.__qualname__}.{time_name}{tuple(params)}; its counts file "
                         f"{_results_path(cls.__module__)} lists {sorted(results['cases'])}")
    if "skip" in entry:
        workload.skip(entry["skip"])
    if "error" in entry:
        raise CountError(f"counting {cls.__qualname__}.{time_name}{tuple(params)} failed in "
                         f"the callgrind child:\n{entry['error']}")
    return entry["count"]


def _require_shared_directory(cls):
    """asv runs every benchmark of a module in one folder only where the module defines
    ``setup_cache`` (and no class its own); elsewhere each benchmark gets a fresh folder, and
    each count benchmark would start a child of its own."""
    module = sys.modules[cls.__module__]
    module_cache = getattr(module, "setup_cache", None)
    if module_cache is None or getattr(cls, "setup_cache", module_cache) is not module_cache:
        raise CountError(
            f"{cls.__module__} needs a module-level setup_cache (and {cls.__qualname__} none of "
            "its own) for instruction counts: asv runs the benchmarks of a module in one "
            "folder only then, and the counts of the module are made once there; add "
            "'def setup_cache(): workload.warm_module(__name__)'")


def _param_tuples(cls):
    return {tuple(p) for p in cls.count_params}


def missing_tools():
    """Why counts cannot be made here (what to install), or None where they can."""
    if shutil.which("valgrind") is None:
        return ("instruction counts need valgrind, which is not on PATH; install it "
                f"({_INSTALL_HINT})")
    if os.path.exists(_shim_path()):
        return None  # compiled before: the compiler and headers are no longer needed
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        return ("instruction counts need a C compiler (cc, or $CC) to build a callgrind "
                f"shim once; install one ({_INSTALL_HINT})")
    probe = subprocess.run([compiler, "-E", "-x", "c", "-"], input="#include "
                           "<valgrind/callgrind.h>\n", capture_output=True, text=True)
    if probe.returncode != 0:
        return ("instruction counts need valgrind's header valgrind/callgrind.h, which "
                f"{compiler} cannot find; install it ({_INSTALL_HINT})")
    return None


def _shim_path():
    digest = hashlib.sha256(SHIM_SOURCE.encode()).hexdigest()[:16]
    return user_cache.folder(f"callgrind-shim-{host_platform.machine()}-{digest}.so")


def shim_library():
    """The compiled shim's path; compiled with the machine's C compiler on first use."""
    path = _shim_path()
    if os.path.exists(path):
        return path
    os.makedirs(os.path.dirname(path), exist_ok=True)
    compiler = shutil.which(os.environ.get("CC", "cc"))
    with tempfile.TemporaryDirectory(dir=os.path.dirname(path)) as tmp:
        source = os.path.join(tmp, "shim.c")
        with open(source, "w") as f:
            f.write(SHIM_SOURCE)
        built = os.path.join(tmp, "shim.so")
        proc = subprocess.run([compiler, "-O1", "-shared", "-fPIC", "-o", built, source],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise CountError(f"{compiler} could not build the callgrind shim:\n{proc.stderr}")
        os.replace(built, path)  # atomic: a concurrent build leaves one complete file
    return path


def _results_path(module_name):
    return os.path.join(os.getcwd(), RESULTS_FILE.format(module=module_name))


def _results_key(module_name):
    """What the counts in a results file depend on, besides the working directory (asv's is
    fresh per run): a file made under anything else is recounted."""
    from importlib import metadata

    def version(dist):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    module = sys.modules.get(module_name)
    source = getattr(module, "__file__", None)
    key = {"module": module_name, "mechanism": MECHANISM_VERSION,
           "profile": profiles.current().name, "python": sys.executable,
           "jax": version("jax"), "jaxlib": version("jaxlib"),
           "source_mtime": os.path.getmtime(source) if source else None}
    shift = heap_shift()
    if shift:  # only then: the child reads this key, and an unshifted one reads what it did
        key["heap_shift"] = list(shift)
    return key


@contextlib.contextmanager
def _locked(path):
    import fcntl

    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def module_counts(module_name):
    """Every count of a module: read from its results file, or made now by one child."""
    path = _results_path(module_name)
    key = _results_key(module_name)
    with _locked(path + ".lock"):
        results = _read_json(path)
        if results is None or results.get("key") != key:
            results = run_child(module_name, key)
            _write_json(path, results)
    return results


def _read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _write_json(path, data):
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def child_environment(module_name=None):
    """The child's environment: the parent's, with what keeps counts still between processes
    (one CPU, so XLA sizes its pools to one thread; seeded string hashing), the sizes counts
    are made at, and a path on which ``module_name`` imports."""
    env = dict(os.environ)
    env["JAXBENCH_CPU_THREADS"] = "1"
    env[profiles.PROFILE_ENV] = COUNT_PROFILE
    env["PYTHONHASHSEED"] = "0"
    env["PYTHONPATH"] = os.pathsep.join([*_package_root(module_name), *filter(None, sys.path)])
    env[_CHILD_ENV] = "1"
    return env


def heap_shift(environ=None):
    """(bytes, objects) from HEAP_SHIFT_ENV in ``environ`` (default: this process's), or None
    where it is unset."""
    text = (os.environ if environ is None else environ).get(HEAP_SHIFT_ENV, "").strip()
    if not text:
        return None
    try:
        size, objects = (int(part) for part in text.split(","))
    except ValueError:
        size = objects = -1
    if size < 0 or objects < 0:
        raise CountError(f"{HEAP_SHIFT_ENV}={text!r}: give two whole numbers >= 0, "
                         "'BYTES,OBJECTS' (e.g. 4120,7), or unset it")
    return size, objects


def _package_root(module_name):
    """The folder holding ``module_name``'s top package: asv imports its benchmark package
    through an importer of its own, not through sys.path, which the child inherits."""
    top = sys.modules.get((module_name or "").split(".")[0])
    packages = list(getattr(top, "__path__", []))
    if packages:
        return [os.path.dirname(packages[0])]
    source = getattr(top, "__file__", None)
    return [os.path.dirname(source)] if source else []


# callgrind options besides the tool and where dumps go: instrumentation off until a region
# starts; threads take valgrind's lock in turn (fair-sched), so they interleave alike in every
# process (JitTrivial's 100 waited calls then count the same to the instruction); -q keeps
# valgrind's banner out of the output a failure reports
VALGRIND_OPTIONS = ("-q", "--instr-atstart=no", "--fair-sched=yes")


def no_aslr_wrapper():
    """``setarch -R`` where it works: the same addresses in every process, so hash tables keyed
    by pointers probe alike; () where it does not (no util-linux, or no personality(2))."""
    setarch = shutil.which("setarch")
    if setarch is None:
        return ()
    probe = subprocess.run([setarch, "-R", "true"], capture_output=True)
    return (setarch, "-R") if probe.returncode == 0 else ()


def run_child(module_name, key, *, classes=None, timeout=CHILD_TIMEOUT,
              valgrind_options=VALGRIND_OPTIONS, env=None, wrapper=None):
    """Count every region of ``module_name`` (only ``classes``, by name, if given) in one
    process under callgrind; returns the results (``failure`` set where the child failed)."""
    shim = shim_library()
    with tempfile.TemporaryDirectory(prefix="jaxbench-callgrind-") as tmp:
        spec = {"module": module_name, "classes": classes, "shim": shim, "dumps": tmp,
                "out": os.path.join(tmp, "counts.json"), "parent": os.getpid(), "key": key}
        spec_path = os.path.join(tmp, "spec.json")
        _write_json(spec_path, spec)
        wrapper = no_aslr_wrapper() if wrapper is None else wrapper
        command = [*wrapper, shutil.which("valgrind"), "--tool=callgrind",
                   f"--callgrind-out-file={os.path.join(tmp, 'callgrind.out')}",
                   *valgrind_options, sys.executable, "-c",
                   "import sys; from jaxbench_helpers.runtime import counts; "
                   "counts.child_main(sys.argv[1])", spec_path]
        log_path = os.path.join(tmp, "output.txt")
        started = time.monotonic()
        with open(log_path, "w") as log:
            try:
                proc = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT,
                                      env=env or child_environment(module_name),
                                      timeout=timeout)
                returncode = proc.returncode
            except subprocess.TimeoutExpired:
                returncode = None
        wall = time.monotonic() - started
        with open(log_path, errors="replace") as f:
            tail = f.read()[-_OUTPUT_TAIL:]
        results = _read_json(spec["out"])
        if returncode is None:
            failure = (f"the callgrind child counting {module_name} ran past {timeout} s and "
                       "was stopped; count fewer phases or parameters of its classes "
                       "(count_phases, count_params, count_samples)")
        elif returncode != 0 or results is None:
            failure = (f"the callgrind child counting {module_name} exited with status "
                       f"{returncode}" + ("" if results is None else " after writing counts"))
        else:
            try:
                results = settle(results, tmp, keep_dumps_folder())
            except (CountError, OSError, ValueError, KeyError) as err:
                failure = f"the dumps of the callgrind child counting {module_name}: {err}"
            else:
                results["child_wall_s"] = round(wall, 1)
                results["settle_s"] = round(time.monotonic() - started - wall, 1)
                results["command"] = command[:command.index(sys.executable)]
                return results
        return {"key": key, "failure": f"{failure}; its output ended:\n{tail}",
                "cases": {}, "child_wall_s": round(wall, 1)}


def keep_dumps_folder():
    """Where the dumps of every region are kept (KEEP_DUMPS_ENV), made if need be; or None."""
    keep = os.environ.get(KEEP_DUMPS_ENV)
    if keep:
        os.makedirs(keep, exist_ok=True)
    return keep or None


# ---- the child: runs under callgrind ------------------------------------------------------------

def in_child():
    """Whether this process is a count child (for tests that plant behaviour there)."""
    return os.environ.get(_CHILD_ENV) == "1"


# Functions whose own instructions a count leaves out: a thread pool's scheduling and the
# spinning of its idle workers, which depend on how the threads happened to interleave (500 k
# instructions either way between samples of 100 calls). The work of the tasks the pool runs
# is in other functions and stays counted.
EXCLUDED_FUNCTIONS = re.compile(r"^(Eigen::ThreadPoolTempl<|Eigen::RunQueue<)")
# Functions whose instructions a count leaves out with everything they call: glibc's merging of
# the chunks its fast bins hold, which the allocator defers until some later malloc or free
# needs it. The frees that filled the bins may be the region's or any before it, so the lump
# lands in one sample and not the next, and in every process in other amounts (the seed
# matmul's compile on jax 0.10.2: 0.9-1.9 M instructions of 25 M). The allocator's other work,
# malloc and free themselves included, stays counted. Where libc has no symbol for it (a
# stripped libc), nothing matches and the counts keep the lump.
HOUSEKEEPING_FUNCTIONS = ("malloc_consolidate",)


class Counter:
    """Counts delimited regions; works only inside a process under callgrind.

    A region leaves its callgrind dump in ``dumps``; the child reads only the dump's total (its
    last line), the parent reads the rest once the child has ended (``settle``): parsing a dump
    under valgrind cost some 0.1 s, a tenth of a module's counting."""

    def __init__(self, shim, dumps):
        import ctypes

        self._lib = ctypes.CDLL(shim)
        if not self._lib.jaxbench_on_valgrind():
            raise CountError("this process does not run under valgrind: start it with "
                             "valgrind --tool=callgrind --instr-atstart=no")
        self._begin = self._lib.jaxbench_region_begin
        self._end = self._lib.jaxbench_region_end
        self._dumps = dumps
        self._seen = set(os.listdir(dumps))
        self._regions = 0
        # the first region pays one-time costs (the first calls through ctypes); then the
        # empty region's count is the same every time
        self.region(_nothing)
        self.empty = [self.region(_nothing)[0] for _ in range(3)]

    def region(self, call):
        """Run ``call()`` in a region. Returns [the region's name, its dump's file name] and the
        region's total instructions (the region's own and the excluded functions' included)."""
        self._regions += 1
        name = f"region-{self._regions}"
        gc.collect()
        gc.disable()
        try:
            self._begin()
            call()
        finally:
            self._end(name.encode())
            gc.enable()
        new = sorted(set(os.listdir(self._dumps)) - self._seen)
        self._seen.update(new)
        dumps = [f for f in new if f.startswith("callgrind.out.")]
        if len(dumps) != 1:
            raise CountError(f"expected one callgrind dump for {name}, found {dumps}: is the "
                             "process under valgrind --tool=callgrind?")
        return [name, dumps[0]], dump_totals(os.path.join(self._dumps, dumps[0]))


def dump_totals(path):
    """A callgrind dump's total instructions, from its last line ("totals: N")."""
    with open(path, "rb") as f:
        f.seek(max(0, os.path.getsize(path) - 200))
        match = re.search(rb"^totals: (\d+)\s*\Z", f.read(), re.MULTILINE)
    if match is None:
        raise CountError(f"callgrind dump {path} does not end with its totals")
    return int(match.group(1))


def settle(results, dumps, keep=None):
    """The child's results with counts: each sample's dump (in ``dumps``) read, the excluded
    functions, the allocator's housekeeping and the empty region's count taken out of it, the
    count the least sample (per call). With ``keep``, every sample's dump moves there, named
    after its case, for callgrind_annotate."""
    regions = results.pop("empty")
    results["baseline"] = statistics.median(
        total - pool - housekeeping
        for total, pool, housekeeping in (_read_dump(dumps, *region) for region in regions))
    for key, entry in results["cases"].items():
        if "regions" not in entry:
            continue
        cls_name, time_name, params = json.loads(key)
        label = re.sub(r"[^\w.,=-]+", "_", f"{cls_name}.{time_name}({', '.join(params)})")
        samples, excluded, housekeeping = [], [], []
        for region in entry.pop("regions"):
            total, pool, consolidation = _read_dump(dumps, *region)
            samples.append(total - pool - consolidation - results["baseline"])
            excluded.append(pool)
            housekeeping.append(consolidation)
            if keep:
                shutil.move(os.path.join(dumps, region[1]),
                            os.path.join(keep, f"{label}-{region[0]}.callgrind"))
        del entry["totals"]
        entry.update(count=min(samples) / track_name(time_name)[1], samples=samples,
                     excluded=excluded, housekeeping=housekeeping)
    return results


def _read_dump(folder, region, file_name):
    """(instructions, those of the excluded functions, those of the housekeeping functions and
    their callees) of one region's dump."""
    with open(os.path.join(folder, file_name)) as f:
        dump = parse_dump(f)
    if dump["trigger"] != f"Client Request: {region}":
        raise CountError(f"callgrind dump {file_name} is not the one of {region} (trigger "
                         f"{dump['trigger']!r})")
    excluded = sum(cost for fn, cost in dump["self"].items() if EXCLUDED_FUNCTIONS.match(fn))
    housekeeping = sum(dump["self"].get(fn, 0) + dump["callees"].get(fn, 0)
                       for fn in HOUSEKEEPING_FUNCTIONS)
    return dump["totals"], excluded, housekeeping


def parse_dump(lines):
    """A callgrind dump (one event, Ir): its ``totals``, its ``trigger``, the instructions of
    each function itself, callees not included (``self``; they add up to ``totals``), and those
    of the calls each function makes, the callees' inclusive costs (``callees``)."""
    names = {}
    own = {}
    callees = {}
    function = None
    totals = trigger = None
    call_line = False
    for line in lines:
        if call_line:  # the inclusive cost of the call named above: the callee's, not ours
            call_line = False
            callees[function] = callees.get(function, 0) + int(line.split()[1])
            continue
        head = line[:1]
        if head.isdigit() or head in "+-*":
            fields = line.split()
            own[function] = own.get(function, 0) + int(fields[1])
        elif line.startswith("fn="):
            function = _name(names, line[3:].strip())
        elif line.startswith("cfn="):
            _name(names, line[4:].strip())
        elif line.startswith("calls="):
            call_line = True
        elif line.startswith("totals:"):
            totals = int(line.split()[1])
        elif line.startswith("desc: Trigger:"):
            trigger = line.split(":", 2)[2].strip()
    if totals is None or sum(own.values()) != totals:
        raise CountError(f"a callgrind dump that does not add up: totals {totals}, functions "
                         f"{sum(own.values())}")
    return {"totals": totals, "trigger": trigger, "self": own, "callees": callees}


def _name(names, text):
    """Resolve callgrind's name compression: '(id) name' defines, '(id)' refers."""
    if not text.startswith("("):
        return text
    ident, _, rest = text.partition(")")
    if rest.strip():
        names[ident] = rest.strip()
    return names[ident]


def _nothing():
    pass


def child_main(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    shift = heap_shift()  # the child's environment, as the parent set it
    _kept_until_exit = _shift_heap(shift)
    _die_with_parent(spec["parent"])
    # one CPU before jax starts (JAXBENCH_CPU_THREADS=1 does the rest: BLAS threads)
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    started = time.monotonic()
    counter = Counter(spec["shim"], spec["dumps"])
    module = importlib.import_module(spec["module"])
    classes = [cls for cls in workload.workload_classes(module) if issubclass(cls, Counts)]
    if spec["classes"] is not None:
        classes = [cls for cls in classes if cls.__qualname__ in spec["classes"]]
    results = {"key": spec["key"], "cases": {}, "empty": counter.empty,
               "class_wall_s": {}, "startup_s": round(time.monotonic() - started, 1)}
    for cls in classes:
        class_started = time.monotonic()
        for params in itertools.product(*cls.params):
            if cls.count_params is None or tuple(params) in _param_tuples(cls):
                results["cases"].update(count_case(cls, params, counter))
        results["class_wall_s"][cls.__qualname__] = round(time.monotonic() - class_started, 1)
    if shift:
        results["heap_shift"] = list(shift)
    _write_json(spec["out"], results)


def _shift_heap(shift):
    """What the child allocates first to start from another heap layout (``heap_shift``),
    kept by the caller until the child ends; None for no shift."""
    if not shift:
        return None
    size, objects = shift
    return bytearray(size), [(i,) for i in range(objects)]


def _die_with_parent(parent):
    """Stop if the benchmark process that started this child dies (asv killed it)."""
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def _skip_exceptions():
    try:
        from asv_runner.benchmarks.mark import SkipNotImplemented
    except ImportError:
        return (NotImplementedError,)
    return (NotImplementedError, SkipNotImplemented)


def count_case(cls, params, counter):
    """The counts of one class at one parameter combination: {case key: entry}, where an
    entry has ``count`` (and its ``samples``), ``skip`` (a reason) or ``error`` (a
    traceback)."""
    phases = counted_phases(cls)
    keys = {name: case_key(cls, params, name) for name in phases}
    instance = cls()
    skips = _skip_exceptions()
    try:
        instance.setup(*params)
    except skips as err:
        return {key: {"skip": str(err)} for key in keys.values()}
    except Exception:
        error = traceback.format_exc()
        return {key: {"error": error} for key in keys.values()}
    if in_child():  # not in a test's process, which lives on after the case
        gc.collect()
        gc.freeze()
    entries = {}
    try:
        for time_name in phases:
            started = time.monotonic()
            entry = _count_phase(instance, time_name, params, counter, skips)
            entry["wall_s"] = round(time.monotonic() - started, 1)
            entries[keys[time_name]] = entry
            # progress, so that a failure's output shows how far the child got
            print(f"counted {cls.__qualname__}.{time_name}{tuple(params)}: "
                  f"{entry.get('totals', entry.get('skip', 'error'))} in {entry['wall_s']} s",
                  flush=True)
    finally:
        teardown = getattr(instance, "teardown", None)
        if teardown is not None:
            teardown(*params)
    return entries


def _count_phase(instance, time_name, params, counter, skips):
    method = getattr(instance, time_name)
    calls = track_name(time_name)[1]
    regions, totals = [], []
    try:
        # uncounted calls first: asv warms a warm phase up before its samples; a cold phase's
        # first sample would find the caches that setup's warm-up just filled (a trace then
        # costs a third of a cold one); and tracing and lowering run Python that the
        # interpreter specializes over the first calls (a lower moves 1-2 % until then)
        for _ in range(UNCOUNTED_CALLS.get(time_name, 1)):
            instance.setup(*params)
            method(*params)
        wanted = instance.count_samples.get(time_name)
        target = wanted or PHASE_SAMPLES.get(time_name, DEFAULT_SAMPLES)
        while len(regions) < target:
            instance.setup(*params)  # asv's setup before every sample
            region, total = counter.region(lambda: method(*params))
            regions.append(region)
            totals.append(total)
            if wanted is None and len(totals) == 1:
                target = sample_count(total, calls, target)
    except skips as err:
        return {"skip": str(err)}
    except Exception:
        return {"error": traceback.format_exc()}
    # the counts are made from the dumps by the parent (settle)
    return {"regions": regions, "totals": totals}


def sample_count(first, calls, default=DEFAULT_SAMPLES):
    """How many samples a count takes, by its first sample's total instructions and the calls
    it times."""
    if first > ONE_SAMPLE_ABOVE:
        return 1
    return MANY_SAMPLES if calls > 1 and first < MANY_SAMPLES_BELOW else default

