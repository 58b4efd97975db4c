"""asv results as this project reads them: measurements per commit, units, directions, and
the commits of a repository's first-parent history.

Shared by the reports (``report``), the calibration and the self-tests; nothing here writes.
"""

import itertools
import json
import math
import os
import re
from dataclasses import dataclass

from ..common import git, quiet

UPSTREAM_LINE = "Upstream commit:"
# facts about the environment or a release's behaviour, not performance: a new release changes
# them by design (versions; whether device_put aliases host memory)
SKIPPED_UNITS = ("version", "aliasing")
SKIPPED_MODULES = ("bench_environment",)
# the NumPy baselines: a phase of plain NumPy beside a workload's JAX phases
CONTROL_PHASE = "time_numpy"


class ResultsError(ValueError):
    pass

# ---------------------------------------------------------------- units and direction


@dataclass(frozen=True)
class Direction:
    """How to read a change of a benchmark's value."""

    worse: str  # the word for a regression: "slower", "larger", "lower"
    better: str
    higher_is_worse: bool


def direction(unit, name=""):
    if unit == "seconds" or (not unit and name.split(".")[-1].startswith("time_")):
        return Direction("slower", "faster", True)
    if unit and "/s" in unit:  # a rate (bytes/s, flops/s): more is better
        return Direction("lower", "higher", False)
    return Direction("larger", "smaller", True)


def timed(unit):
    """Whether a busy machine moves values of this unit: times and the rates taken from them,
    not counts, sizes or facts."""
    return unit == "seconds" or unit.endswith("/s")


def unit_of(name, units):
    """The unit asv recorded for benchmark ``name`` (benchmarks.json), else from its prefix."""
    unit = units.get(name)
    if unit:
        return unit
    method = name.rsplit(".", 1)[-1]
    if method.startswith("time_") or method.startswith("timeraw_"):
        return "seconds"
    if method.startswith(("peakmem_", "mem_")):
        return "bytes"
    return ""


def human(value, unit):
    """A value with its unit: asv's own formatting for seconds and bytes (1.23ms, 4.5M)."""
    from asv.util import human_value

    if value is None:
        return "failed"
    if isinstance(value, float) and math.isnan(value):
        return "n/a"
    if unit in ("seconds", "bytes"):
        text = human_value(value, unit)
        return text + "B" if unit == "bytes" else text
    return f"{value:.4g} {unit}".strip()


def load_units(results_dir):
    """Benchmark name -> unit, from the benchmarks.json asv writes beside the results."""
    path = os.path.join(results_dir, "benchmarks.json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        found = json.load(f)
    return {name: b.get("unit", "") for name, b in found.items() if isinstance(b, dict)}


COUNT_UNIT = "CPU instructions"
# an instruction count without a calibrated threshold is flagged beyond 1%
COUNT_FACTOR = 1.01


def count_factor(name, thresholds):
    """The factor an instruction count ``name`` (benchmark and params) is judged by: 1 + its
    calibrated regressions threshold (a config's ``regressions_thresholds``, matched as asv
    matches them), else ``COUNT_FACTOR``. A machine cannot move a count, so its factor is far
    finer than a time's."""
    for regex, threshold in (thresholds or {}).items():
        if re.search(regex, name):
            return 1 + threshold
    return COUNT_FACTOR


def skipped(name, unit):
    return unit in SKIPPED_UNITS or name.split(".", 1)[0] in SKIPPED_MODULES


# ---------------------------------------------------------------- git


def _git(repo, *args):
    try:
        return git.run(repo, *args)
    except git.GitError as err:
        raise ResultsError(str(err)) from None


@dataclass(frozen=True)
class Commit:
    hash: str
    label: str  # the tag (jax-v0.10.2) or the short hash and subject
    upstream: str  # the upstream JAX commit it stands for ('' when unknown)


def first_parent_commits(repo, branch):
    """[Commit] along ``branch``'s first-parent history, oldest first."""
    if not os.path.isdir(repo):
        raise ResultsError(f"--repo {repo} is not a folder; pass the release-history repository "
                          "(python -m jaxbench_helpers history) or a JAX clone")
    tags = {}
    for line in _git(repo, "for-each-ref", "--format=%(objectname) %(*objectname) "
                     "%(refname:short)", "refs/tags").splitlines():
        obj, peeled, name = line.split(" ", 2)
        tags.setdefault(peeled or obj, []).append(name)
    try:
        log = _git(repo, "log", "--first-parent", "--reverse", "--format=%H%x1f%s%x1f%B%x1e",
                   branch, "--")
    except ResultsError as err:
        raise ResultsError(f"{err}\nIs {branch!r} a branch of {repo}? Pass --branch") from None
    entries = [e.strip("\n").split("\x1f") for e in log.split("\x1e") if e.strip()]
    # a release-history repository names the upstream commit in each message; a JAX clone's
    # commits are the upstream commits themselves
    is_history = any(UPSTREAM_LINE in body for _, _, body in entries)
    commits = []
    for commit, subject, body in entries:
        upstream = next((ln.split(":", 1)[1].strip() for ln in body.splitlines()
                         if ln.startswith(UPSTREAM_LINE)), "")
        if not is_history:
            upstream = commit
        names = sorted(tags.get(commit, []), key=lambda t: (not t.startswith("jax-v"), t))
        label = names[0] if names else f"{commit[:8]} {subject[:40]}".strip()
        commits.append(Commit(commit, label, upstream))
    return commits


def resolve(repo, name):
    """The full hash of ``name`` (a tag, branch or hash prefix) in ``repo``."""
    try:
        return _git(repo, "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}").strip()
    except ResultsError:
        raise ResultsError(f"{name!r} names no commit in {repo}") from None


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class Measurement:
    """One benchmark at one parameter combination, at one commit."""

    value: object  # asv's median; None: failed; NaN: skipped (n/a)
    stats: dict = None  # asv's stats: ci_99_a, ci_99_b, q_25, q_75, number, repeat
    samples: list = None
    version: str = None  # the benchmark code's version: other versions are not comparable


@dataclass(frozen=True)
class SeriesKey:
    benchmark: str  # module.Class.method
    params: str  # "('float32', 10)" or ""
    env: str

    @property
    def phase(self):
        return self.benchmark.rsplit(".", 1)[-1]

    @property
    def workload(self):
        return self.benchmark.rsplit(".", 1)[0]


def machines(results_dir):
    if not os.path.isdir(results_dir):
        raise ResultsError(f"--results-dir {results_dir} is not a folder of asv results")
    return sorted(d for d in os.listdir(results_dir)
                  if os.path.exists(os.path.join(results_dir, d, "machine.json")))


def pick_machine(results_dir, machine):
    found = machines(results_dir)
    if machine:
        if machine not in found:
            raise ResultsError(f"no results for machine {machine!r} in {results_dir}; it has "
                              f"{', '.join(found) or 'none'}")
        return machine
    if len(found) != 1:
        raise ResultsError(f"{results_dir} has results for {len(found)} machines "
                          f"({', '.join(found) or 'none'}); pick one with --machine")
    return found[0]


def _unrolled(result):
    """(SeriesKey, Measurement) for every benchmark and parameter combination in ``result``."""
    for key in result.get_all_result_keys():
        params = result.get_result_params(key)
        columns = [result.get_result_value(key, params), result.get_result_stats(key, params),
                   result.get_result_samples(key, params)]
        combos = list(itertools.product(*params)) if params else [()]
        columns = [c if c is not None else [None] * len(combos) for c in columns]
        version = result.benchmark_version.get(key)
        for combo, value, stats, samples in zip(combos, *columns):
            label = f"({', '.join(combo)})" if combo else ""
            yield SeriesKey(key, label, result.env_name), Measurement(value, stats, samples,
                                                                      version)


def load_measurements(results_dir, machine, commits=None):
    """{commit hash: {SeriesKey: Measurement}} for ``machine`` (only ``commits`` if given)."""
    from asv import results as asv_results

    wanted = set(commits) if commits is not None else None
    found = {}
    for result in asv_results.iter_results_for_machine(results_dir, machine):
        if wanted is not None and result.commit_hash not in wanted:
            continue
        found.setdefault(result.commit_hash, {}).update(_unrolled(result))
    return found


def is_baseline(name):
    """Whether benchmark ``name`` is a NumPy baseline: code no JAX commit touches."""
    return name.endswith("." + CONTROL_PHASE)


def numpy_versions(measurements):
    """{env: encoded NumPy version} that one commit's measurements (as ``load_measurements``
    gives them per commit) record in ``track_numpy_version``."""
    return {key.env: m.value for key, m in measurements.items()
            if key.benchmark.endswith(".track_numpy_version") and not missing(m.value)}


def missing(value):
    """None (failed) or NaN (skipped)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def asv_says_different(a, b):
    """asv's own test (the one asv compare uses) on two measurements; True when it cannot
    tell, because either has no statistics."""
    if not (a.stats and b.stats) or 1 in (a.stats.get("repeat"), b.stats.get("repeat")):
        return True
    return _asv_stats().is_different(a.samples, b.samples, a.stats, b.stats)


def _asv_stats():
    # asv keeps its statistics in a private module; without it every verdict here would
    # silently fall back to medians alone, so say so instead
    try:
        from asv import _stats
    except ImportError as err:
        raise ResultsError(
            "asv's statistics module (asv._stats) is missing from this asv; the comparison "
            "needs it. Install the asv the project pins (pip install asv==0.6.6) or pass "
            "--no-stats to compare medians alone") from err
    return _stats


# ---------------------------------------------------------------- measured under load


def graph_params(result):
    """The parameters asv publish files ``result``'s graphs under (all but the branch)."""
    params = {k: "" if v is None else v for k, v in result.params.items()}
    params.update({f"env-{name}": value for name, value in result.env_vars.items()})
    return params


def measured_under_load(results_dir, machine):
    """[(asv result, benchmark, LoadRecord)] for each benchmark of ``machine`` whose
    measurement overlapped a window of load that the machine's load record (``quiet.jsonl``,
    which the main job writes beside the results) marks: the whole run under a steady load,
    the bursts' spells when bursts alone marked it, a quiet run's strong spells
    (``LoadRecord.busy_windows``). The figures a reader should not trust as the
    release's own: times and rates only, since counts, sizes and facts come out the same under
    load."""
    from asv import results as asv_results

    busy = []
    for record in quiet.read_records(os.path.join(results_dir, machine, quiet.RECORD_NAME)):
        busy.extend((first, last, record) for first, last in record.busy_windows)
    found = []
    if not busy:
        return found
    units = load_units(results_dir)
    for result in asv_results.iter_results_for_machine(results_dir, machine):
        for name in result.get_all_result_keys():
            started = result.started_at.get(name)
            if started is None or not timed(unit_of(name, units)):
                continue
            start = started / 1000
            end = start + (result.duration.get(name) or 0)
            for first, last, record in busy:
                if start < last and end > first:
                    found.append((result, name, record))
                    break
    return found


