"""Sensitivity self-test: does the suite notice a known slowdown in one phase, and only there?

    python -m jaxbench_helpers sensitivity [--release 0.10.2] [--phase PHASE ...]
        [--fractions 0.5,0.2,0.1] [--factor 1.05] [-b REGEX ...] [--profile regular]
        [--method ab|asv] [--rounds N] [--machine NAME] [--work-dir DIR] [--no-stats]
        [--keep-going] [--bisect [--commits 33]] [--counts] [-o results.md]

First a control: a commit that only adds a comment, measured the same way, shows what the
procedure flags from noise alone. Then, for each phase (dispatch, trace, lower, compile, run,
transfer, startup) and each planted fraction, largest first:

1. a commit on top of the release, in a scratch release-history repository, plants the slowdown
   into JAX's own source (``plants.py``: the phase takes that fraction longer);
2. the release and the planted commit are measured: by default an interleaved A/B (``ab``:
   both installed once, their processes taking turns until the paired ratio's 95% interval
   decides); with ``--method asv`` one ``asv run --interleave-rounds`` judged by asv's own
   comparison (``--rounds N``: asv's ``-a rounds=N``);
3. the plant is **detected** when a benchmark that times the phase got slower; the other phases
   stayed **quiet** when no benchmark that times none of the planted phase changed either way
   (NumPy baselines included).

A phase's sweep stops at the first fraction it misses (a smaller one would be missed too) unless
``--keep-going``. ``--bisect`` instead hides each phase's plant (the smallest fraction) among
``--commits`` neutral commits and checks that ``bisect`` names it. ``--counts`` plants work
sized to each phase's instruction count instead and judges the counts alone. Exit status: 0
when every phase was detected cleanly at the smallest fraction tried (or every bisect named
its plant), 1 otherwise, 2 on bad input, 4 on a busy machine.
"""

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field

from ..analysis import results
from ..common import asvconfig, machine, quiet
from ..common import markdown as md
from ..common.machine import ensure_described, machine_name
from ..host import ab, asvconf, history
from ..runtime import profiles, versions
from . import calibrate, plants

DEFAULT_RELEASE = "0.10.2"
DEFAULT_FRACTIONS = (0.5, 0.2, 0.1)
DEFAULT_FACTOR = 1.05
# a small panel that times every phase, with NumPy baselines as controls
DEFAULT_BENCH = [r"bench_matmul\.SquareMatmul", r"bench_dispatch\.(JitTrivial|EagerBinary)",
                 r"bench_models\.MLPTrainStep\.time_(trace|lower|compile|run|numpy)",
                 r"bench_transfer\.ArrayTransfer", r"bench_startup\.ColdStart\.timeraw_import"]

# which phases each timing includes; a planted phase outside this set must leave it alone
_EVERY_PHASE = frozenset(plants.PHASES)
COVERS = {
    # the calls' own dispatch, then waiting for their (tiny) results
    "time_dispatch_100_calls": frozenset({"dispatch", "run"}),
    "time_latency_100_calls": frozenset({"dispatch", "run"}),
    "time_run": frozenset({"run", "dispatch"}),
    "time_trace": frozenset({"trace"}),
    # lowering traces too: rules written as JAX functions (mlir.lower_fun) become jaxprs there
    # (a planted trace_to_jaxpr_dynamic adds one call's work to an ODE or transformer lower)
    "time_lower": frozenset({"lower", "trace"}),
    "time_compile": frozenset({"compile"}),
    "time_load_from_persistent_cache": frozenset({"compile"}),
    # the copy is waited for by jax.block_until_ready, where the run plant sits
    "time_to_device": frozenset({"transfer", "run"}),
    "time_to_host": frozenset({"transfer"}),
    "time_np_asarray": frozenset({"transfer"}),
    "timeraw_import_jax": frozenset({"startup"}),
    "timeraw_backend_start": frozenset({"startup"}),
    # end to end in a fresh interpreter: import, trace, lower, compile, dispatch, run
    "timeraw_first_eager_op": _EVERY_PHASE,
    "timeraw_first_jit_call": _EVERY_PHASE,
    # NumPy alone: no plant may move it
    "time_numpy": frozenset(),
}


PLANT_AUTHOR = {f"GIT_{who}_{what}": value for who in ("AUTHOR", "COMMITTER")
                for what, value in (("NAME", "jaxbench sensitivity"),
                                    ("EMAIL", "sensitivity@jaxbench.invalid"))}
# a plant commit's date: the same plant on the same release is the same commit, so a later
# sweep in the same --work-dir finds the counts asv already recorded for it
PLANT_DATE = {f"GIT_{who}_DATE": "2000-01-01T00:00:00+0000" for who in ("AUTHOR", "COMMITTER")}


class SensitivityError(ValueError):
    pass


# an instruction count (runtime/counts.py) and the time_* phase whose work it counts
COUNT_NAME = re.compile(r"^track_(\w+?)_cpu_instructions(_per_call)?$")


def counted_phase(method):
    """The ``time_*`` phase an instruction count counts, or None for any other name."""
    match = COUNT_NAME.match(method)
    if match is None:
        return None
    return f"time_{match.group(1)}" + ("_100_calls" if match.group(2) else "")


def covers(benchmark):
    """The phases a benchmark's timing (or instruction count) includes; None for facts
    (track_) and memory, which a planted spin cannot move, or a timing not classified here."""
    method = benchmark.rsplit(".", 1)[-1]
    return COVERS.get(counted_phase(method) or method)


@dataclass(frozen=True)
class Change:
    name: str  # benchmark(params)
    ratio: float  # planted / release
    covers: frozenset


@dataclass
class Trial:
    phase: str
    fraction: float
    commit: str
    detected: list = field(default_factory=list)  # [Change] of the phase, slower
    missed: list = field(default_factory=list)  # [Change] of the phase, not flagged
    unrelated: list = field(default_factory=list)  # [Change] of other phases, flagged
    quiet: list = field(default_factory=list)  # [Change] of other phases, not flagged
    # [Change] (the first series' ratio) flagged by ab's first series, not by its second
    unconfirmed: list = field(default_factory=list)
    failed: list = field(default_factory=list)  # names without a value at one commit
    seconds: float = 0.0
    reference: tuple = None  # counts: the reference count without and with the plant
    base: str = ""  # counts: what the planted commit was compared with

    @property
    def clean(self):
        return bool(self.detected) and not self.unrelated

    @property
    def drift(self):
        """Median planted / release ratio of the benchmarks the plant cannot touch: how much
        the machine itself moved between the two commits' processes (None without any)."""
        ratios = [c.ratio for c in self.unrelated + self.quiet]
        return statistics.median(ratios) if ratios else None


def judge(phase, base, planted, factor, use_stats=True, thresholds=None):
    """Sort the benchmarks of one trial. ``base``/``planted``: {SeriesKey: Measurement}. An
    instruction count is judged by its own factor (``results.count_factor`` of
    ``thresholds``, the config's regressions_thresholds), without asv's statistics."""
    from asv.commands.compare import _is_result_better

    trial = Trial(phase, 0.0, "")
    for key in sorted(set(base) & set(planted), key=lambda k: (k.benchmark, k.params)):
        phases = covers(key.benchmark)
        if phases is None:
            continue
        a, b = base[key], planted[key]
        name = key.benchmark + key.params
        if results.missing(a.value) or results.missing(b.value):
            if (a.value is None) != (b.value is None):  # failed at one commit only
                trial.failed.append(name)
            continue
        counted = counted_phase(key.phase) is not None
        limit = results.count_factor(name, thresholds) if counted else factor
        stats = use_stats and not counted
        ss_a = (a.stats, a.samples) if stats else (None, None)
        ss_b = (b.stats, b.samples) if stats else (None, None)
        slower = _is_result_better(a.value, b.value, ss_a, ss_b, limit)
        faster = _is_result_better(b.value, a.value, ss_b, ss_a, limit)
        change = Change(name, b.value / a.value if a.value else float("inf"), phases)
        if phase in phases:
            (trial.detected if slower else trial.missed).append(change)
        else:
            (trial.unrelated if slower or faster else trial.quiet).append(change)
    return trial


def judge_ab(phase, verdicts):
    """Sort the verdicts of an interleaved A/B trial (``ab.Verdict``) the same way: a case
    left unresolved is missed when it times the phase and quiet otherwise."""
    trial = Trial(phase, 0.0, "")
    for v in sorted(verdicts, key=lambda v: (v.case.name, v.case.params)):
        phases = covers(v.case.name)
        if phases is None:
            continue
        name = v.case.name + v.case.params
        if results.missing(v.before) or results.missing(v.after):
            if (v.before is None) != (v.after is None):
                trial.failed.append(name)
            continue
        change = Change(name, v.estimate.ratio if v.estimate else v.after / v.before, phases)
        if phase in phases:
            (trial.detected if v.mark == "+" else trial.missed).append(change)
        else:
            (trial.unrelated if v.mark in ("+", "-") else trial.quiet).append(change)
        if v.unconfirmed:
            trial.unconfirmed.append(Change(name, v.first.ratio, phases))
    return trial


# ---------------------------------------------------------------- running


def build_repo(work_dir, release):
    """A release-history repository holding just ``release``; returns (path, release hash)."""
    repo = os.path.join(work_dir, "jax")
    commits = history.build(repo, first=release, last=release)
    if not commits or commits[-1][0] != release:
        raise SensitivityError(f"jax {release} is not a release this Python can install; "
                               "pick one from 'pip index versions jax'")
    return repo, commits[-1][1]


def plant_commit(repo, release_hash, phase, fraction, work=None):
    """A commit on top of the release with the plant (``work``: bytes scanned per call, for
    the instruction counts, instead of a spin); returns its hash."""
    branch = f"plant-{phase}-{round(fraction * 1000):04d}" + (
        "" if work is None else f"-work-{work}")
    history._git(repo, "checkout", "-q", "-B", branch, release_hash)
    paths = plants.apply(repo, phase, fraction, work=work)
    history._git(repo, "add", "--", *paths)
    if phase == plants.CONTROL:
        message = "plant: control (a comment; nothing slowed)"
    elif work is not None:
        message = (f"plant: {phase} executes a scan of {work} bytes more per call, "
                   f"{fraction:.1%} of its count ({plants.describe(phase)})")
    else:
        message = f"plant: {phase} takes {fraction:.0%} longer ({plants.describe(phase)})"
    history._git(repo, "commit", "-q", "-m", message, env={**PLANT_AUTHOR, **PLANT_DATE})
    commit = history._git(repo, "rev-parse", "HEAD")
    history._git(repo, "checkout", "-q", "main")
    return commit


def folder_config(repo, folder, profile, env_dir=None):
    """An asv config of ``repo`` whose results and html live in ``folder``, written there:
    (config, its path)."""
    conf = asvconf.derive(repo, results_dir=os.path.join(folder, "results"),
                          html_dir=os.path.join(folder, "html"), env_dir=env_dir,
                          profile=profile)
    os.makedirs(folder, exist_ok=True)
    return conf, asvconfig.write(conf, os.path.join(folder, "asv.conf.json"))


def run_pair(repo, release_hash, commit, *, folder, machine, bench, profile, env_dir,
             rounds=None):
    """asv measures the release and ``commit`` with interleaved rounds into ``folder``
    (``rounds``: asv's ``-a rounds=N`` instead of the profile's)."""
    conf, conf_path = folder_config(repo, folder, profile, env_dir)
    hashes = os.path.join(folder, "commits.txt")
    with open(hashes, "w") as f:
        f.write(f"{release_hash}\n{commit}\n")
    calibrate.run_asv(conf_path, f"HASHFILE:{hashes}", machine=machine, bench=bench,
                      same_python=False, env=dict(os.environ), range_spec=True,
                      extra=["--interleave-rounds",
                             *(["-a", f"rounds={rounds}"] if rounds else [])])
    found = results.load_measurements(conf["results_dir"], machine, [release_hash, commit])
    for needed in (release_hash, commit):
        if needed not in found:
            raise SensitivityError(f"asv recorded nothing for {needed[:8]} in "
                                   f"{conf['results_dir']}: check -b and asv's output above")
    return found[release_hash], found[commit]


def run_pair_ab(repo, release_hash, commit, *, folder, machine, bench, profile, factor,
                builds, log):
    """The release (A) and ``commit`` (B) in an interleaved A/B; the release's environment
    in ``builds`` is installed once and kept for every trial."""
    _, conf_path = folder_config(repo, folder, profile)
    return ab.compare(conf_path, release_hash, commit, bench=bench, factor=factor,
                      machine=machine, work_dir=builds, say=log).verdicts


def sweep(*, release, phases, fractions, factor, bench, profile, machine, work_dir, env_dir,
          rounds=None, keep_going=False, use_stats=True, log=print, on_trial=None,
          method="ab"):
    """[Trial] for every phase, largest fraction first, stopping a phase at its first miss."""
    repo, release_hash = build_repo(work_dir, release)
    trials = []
    for phase in phases:
        # the control plants nothing, so one trial is all it needs
        for fraction in [0.0] if phase == plants.CONTROL else sorted(fractions, reverse=True):
            start = time.monotonic()
            commit = plant_commit(repo, release_hash, phase, fraction)
            log(f"jaxbench sensitivity: {phase} +{fraction:.0%} ({commit[:8]}) against "
                f"jax {release} ({release_hash[:8]})")
            folder = os.path.join(work_dir, f"{phase}-{round(fraction * 1000):04d}")
            if method == "ab":
                trial = judge_ab(phase, run_pair_ab(
                    repo, release_hash, commit, folder=folder, machine=machine, bench=bench,
                    profile=profile, factor=factor, builds=os.path.join(work_dir, "builds"),
                    log=log))
            else:
                base, planted = run_pair(repo, release_hash, commit, folder=folder,
                                         machine=machine, bench=bench, profile=profile,
                                         env_dir=env_dir, rounds=rounds)
                trial = judge(phase, base, planted, factor, use_stats)
            trial.fraction, trial.commit = fraction, commit
            trial.seconds = time.monotonic() - start
            trials.append(trial)
            if on_trial:
                on_trial(trials)
            log(f"jaxbench sensitivity: {phase} +{fraction:.0%}: "
                f"{len(trial.detected)} detected, {len(trial.missed)} missed, "
                f"{len(trial.unrelated)} unrelated flagged ({trial.seconds:.0f} s)")
            if not trial.detected and not keep_going and phase != plants.CONTROL:
                break
    return trials


# ---------------------------------------------------------------- instruction counts

# the count each phase's plant is sized from: the planted work is a fraction of it
COUNT_REFERENCE = {
    "dispatch": "bench_dispatch.JitTrivial.track_dispatch_cpu_instructions_per_call",
    "trace": "bench_models.MLPTrainStep.track_trace_cpu_instructions",
    "lower": "bench_models.MLPTrainStep.track_lower_cpu_instructions",
    "compile": "bench_matmul.SquareMatmul.track_compile_cpu_instructions",
    "run": "bench_matmul.SquareMatmul.track_run_cpu_instructions",
}
# the planted fraction of the reference count each phase must be flagged at (issue targets:
# 2% of the CPU-side work of dispatch, trace, lower and compile; 5% of a CPU run phase)
COUNT_TARGETS = {"dispatch": 0.02, "trace": 0.02, "lower": 0.02, "compile": 0.02, "run": 0.05}
COUNT_BENCH = [r"cpu_instructions"]


def run_counts(repo, commit, *, folder, machine, profile):
    """The instruction counts of one commit: {SeriesKey: Measurement}."""
    conf, conf_path = folder_config(repo, folder, profile)
    calibrate.run_asv(conf_path, commit, machine=machine, bench=COUNT_BENCH,
                      same_python=False, env=dict(os.environ),
                      extra=["--skip-existing-successful"])
    found = results.load_measurements(conf["results_dir"], machine, [commit])
    if commit not in found:
        raise SensitivityError(f"asv recorded no counts for {commit[:8]} in "
                               f"{conf['results_dir']}: check asv's output above")
    return found[commit]


def reference_count(counted, phase):
    """The reference count of ``phase`` in one commit's counts (its float32 case)."""
    name = COUNT_REFERENCE[phase]
    values = [m.value for k, m in counted.items()
              if k.benchmark == name and "float32" in k.params and not results.missing(m.value)]
    if not values:
        raise SensitivityError(f"no count of {name} at float32: the {phase} plant cannot be "
                               "sized (is valgrind installed? see the asv output above)")
    return values[0]


def count_sweep(*, release, phases, fractions, profile, machine, work_dir, thresholds=None,
                keep_going=False, log=print, on_trial=None):
    """[Trial] per phase and fraction (largest first): a plant that scans ``fraction`` of the
    phase's reference count in bytes' worth of work per call, judged on the counts alone
    against the same plant scanning nothing.

    Not against the release: the plant's module, wrappers and buffer change the process's heap
    layout, and that alone moves some counts 1-2% (docs/counts.md); against its own plant at
    work 0 the planted scan is the only difference (the dispatch wrapper's instructions, ~2% of
    a jitted call's, cancel too)."""
    repo, release_hash = build_repo(work_dir, release)
    trials = []
    for phase in phases:
        start = time.monotonic()
        commit = plant_commit(repo, release_hash, phase, 0.0, work=0)
        log(f"jaxbench sensitivity: counts of the {phase} plant scanning nothing "
            f"({commit[:8]})")
        base = run_counts(repo, commit, machine=machine, profile=profile,
                          folder=os.path.join(work_dir, f"counts-{commit[:8]}"))
        reference = reference_count(base, phase)
        base_seconds = time.monotonic() - start
        for fraction in sorted(fractions or [COUNT_TARGETS[phase]], reverse=True):
            start = time.monotonic()
            work = max(1, round(fraction * reference / plants.WORK_INSTRUCTIONS_PER_BYTE))
            commit = plant_commit(repo, release_hash, phase, fraction, work=work)
            log(f"jaxbench sensitivity: {phase} + {work} bytes scanned per call, {fraction:.1%}"
                f" of {COUNT_REFERENCE[phase]} ({reference:.0f}) ({commit[:8]})")
            planted = run_counts(
                repo, commit, folder=os.path.join(work_dir, f"counts-{phase}-{work}"),
                machine=machine, profile=profile)
            trial = judge(phase, base, planted, DEFAULT_FACTOR, use_stats=False,
                          thresholds=thresholds)
            trial.fraction, trial.commit = fraction, commit
            trial.reference = (reference, reference_count(planted, phase))
            trial.base = "the plant scanning nothing"
            trial.seconds = time.monotonic() - start + base_seconds
            base_seconds = 0.0
            trials.append(trial)
            if on_trial:
                on_trial(trials)
            log(f"jaxbench sensitivity: {phase} {fraction:.1%}: {len(trial.detected)} detected, "
                f"{len(trial.missed)} missed, {len(trial.unrelated)} unrelated flagged")
            if not trial.detected and not keep_going:
                break
    return trials


def count_markdown(trials, *, release, phases, profile, machine, thresholds, load=None):
    lines = [f"# Sensitivity of the instruction counts: work planted into jax {release}", "",
             f"Machine `{machine}`, profile `{profile}`, the counts alone (`-b "
             f"{COUNT_BENCH[0]}`), each judged by its calibrated threshold (`regressions_"
             f"thresholds`; {results.COUNT_FACTOR - 1:.0%} without one)."
             + (f" The machine while it ran: {load.summary()}." if load else ""), "",
             "A count plant wraps the function where the phase happens (the same places as the "
             "timing plants) and makes each outermost call scan zero bytes: "
             f"{plants.WORK_INSTRUCTIONS_PER_BYTE:g} instructions a byte, sized to the planted "
             "fraction of the phase's reference count, and is compared with the same plant "
             "scanning nothing (same module, wrappers and buffer: the scan is the only "
             "difference). Detected: a "
             "count of the phase grew beyond its threshold. Unrelated: a count of another phase "
             "moved.",
             "", "| phase | reference count | target | smallest detected cleanly |",
             "| --- | --- | --- | --- |"]
    for phase in phases:
        best = smallest_clean(trials, phase)
        lines.append(f"| {phase} | `{COUNT_REFERENCE[phase]}` | {COUNT_TARGETS[phase]:.0%} | "
                     + ("**not detected**" if best is None else f"{best:.1%}") + " |")
    lines += ["", "## Trials", "",
              "| phase | planted | compared with | reference count: base → planted | "
              "detected by | missed | unrelated flagged | minutes |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for t in trials:
        before, after = t.reference
        lines.append(f"| {t.phase} | {t.fraction:.1%} (`{t.commit[:8]}`) | {t.base} | "
                     f"{before:,.0f} → "
                     f"{after:,.0f} (+{after / before - 1:.2%}) | {len(t.detected)}: "
                     f"{_changes(t.detected)} | {len(t.missed)}: {_changes(t.missed, 3)} | "
                     f"{len(t.unrelated)}: {_changes(t.unrelated)} | {t.seconds / 60:.1f} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- bisect self-test

# the benchmark that bisects each phase's plant
BISECT_BENCH = {
    "dispatch": (r"bench_dispatch\.JitTrivial\.time_dispatch_100_calls(\(|$)", None),
    "trace": (r"bench_models\.MLPTrainStep\.time_trace(\(|$)", None),
    "lower": (r"bench_models\.MLPTrainStep\.time_lower(\(|$)", None),
    "compile": (r"bench_models\.MLPTrainStep\.time_compile(\(|$)", None),
    "run": (r"bench_matmul\.SquareMatmul\.time_run(\(|$)", "float32"),
    "transfer": (r"bench_transfer\.ArrayTransfer\.time_to_device(\(|$)", None),
    "startup": (r"bench_startup\.ColdStart\.timeraw_import_jax(\(|$)", None),
}


def planted_history(repo, release_hash, phase, fraction, commits, at):
    """A branch of ``commits`` commits on top of the release: neutral ones (a line added to
    a text file outside the package) and, as the ``at``-th (1-based), the plant, which the
    later commits keep. Returns (branch, planted commit, last commit)."""
    branch = f"bisect-{phase}-{round(fraction * 1000):04d}"
    history._git(repo, "checkout", "-q", "-B", branch, release_hash)
    planted = None
    for i in range(1, commits + 1):
        if i != at:
            history.neutral_commit(repo, f"neutral commit {i}", env=PLANT_AUTHOR)
            continue
        paths = plants.apply(repo, phase, fraction)
        history._git(repo, "add", "--", *paths)
        history._git(repo, "commit", "-q", "-m", f"plant: {phase} takes {fraction:.0%} longer",
                     env=PLANT_AUTHOR)
        planted = history._git(repo, "rev-parse", "HEAD")
    last = history._git(repo, "rev-parse", "HEAD")
    history._git(repo, "checkout", "-q", "main")
    return branch, planted, last


@dataclass
class BisectFound:
    phase: str
    benchmark: str
    planted: str
    named: str  # the commit bisect named ('' for none)
    position: int  # the planted commit's place among the commits
    step: float  # the measured step, last / release
    steps: int
    seconds: float


def bisect_trials(*, release, phases, fraction, commits, profile, work_dir, log=print):
    """Bisect each phase's plant hidden among ``commits`` commits; [BisectFound]."""
    from ..host import bisect

    repo, release_hash = build_repo(work_dir, release)
    found = []
    for n, phase in enumerate(p for p in phases if p != plants.CONTROL):
        at = 1 + (7 * n + commits // 3) % commits  # a different place for each phase
        branch, planted, last = planted_history(repo, release_hash, phase, fraction, commits,
                                                at)
        folder = os.path.join(work_dir, f"bisect-{phase}")
        conf, conf_path = folder_config(repo, folder, profile)
        regex, params = BISECT_BENCH[phase]
        log(f"jaxbench sensitivity: bisect {phase} +{fraction:.0%}: planted at commit {at} of "
            f"{commits} ({planted[:8]})")
        start = time.monotonic()
        steps, named, step, case = bisect.bisect(
            conf_path, release_hash, last, regex, params=params, work_dir=os.path.join(
                work_dir, "builds"), say=log)
        found.append(BisectFound(phase, case.name + case.params, planted, named or "", at,
                                 step.ratio, len(steps), time.monotonic() - start))
        log(f"jaxbench sensitivity: bisect {phase}: named {(named or 'nothing')[:8]}, planted "
            f"{planted[:8]}")
    return found


def bisect_markdown(found, *, release, fraction, commits, profile, machine, load=None):
    lines = [f"# Bisect self-test: a {fraction:.0%} slowdown hidden among {commits} commits "
             f"after jax {release}", "",
             f"Machine `{machine}`, profile `{profile}`; each phase's plant is one of "
             f"{commits} commits (the others add a line to a text file), and `bisect` runs "
             "from the release to the last commit, every step an interleaved comparison."
             + (f" The machine while it ran: {load.summary()}." if load else ""), "",
             "| phase | benchmark | planted at | measured step | bisect named | right? | "
             "steps | minutes |", "|---|---|---|---|---|---|---|---|"]
    for f in found:
        named = f"`{f.named[:8]}`" if f.named else "nothing (no step)"
        right = "yes" if f.named == f.planted else "**no**"
        lines.append(f"| {f.phase} | `{md.cell(f.benchmark)}` | {f.position} "
                     f"(`{f.planted[:8]}`) | {f.step:.3f}× | {named} | {right} | {f.steps} | "
                     f"{f.seconds / 60:.1f} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- report


def smallest_clean(trials, phase):
    """The smallest fraction at which ``phase`` was detected with no unrelated flag."""
    found = [t.fraction for t in trials if t.phase == phase and t.clean]
    return min(found) if found else None


def _changes(changes, limit=6):
    shown = ", ".join(f"`{c.name}` {c.ratio:.2f}×" for c in
                      sorted(changes, key=lambda c: -abs(c.ratio - 1))[:limit])
    more = len(changes) - limit
    return (shown + (f", and {more} more" if more > 0 else "")) or "—"


def markdown(trials, *, release, phases, fractions, factor, profile, machine, bench,
             use_stats=True, rounds=None, load=None, method="ab"):
    if method == "ab":
        how = (f"factor {factor}; each trial one interleaved A/B (`ab`) of the release and the "
               "planted commit: their processes take turns (ABBA) until the Hodges-Lehmann "
               "paired ratio's 95% interval decides, unresolved cases count as not flagged")
    else:
        judged = "with asv's statistics" if use_stats else "on medians alone (--no-stats)"
        rounds_note = (f", {rounds} rounds per commit (`-a rounds={rounds}`)" if rounds
                       else ", the profile's rounds")
        how = (f"asv compare factor {factor} {judged}; each trial one `asv run "
               f"--interleave-rounds` of the release and the planted commit{rounds_note}")
    lines = [f"# Sensitivity: slowdowns planted into jax {release}", "",
             f"Machine `{machine}`, profile `{profile}`, {how}. Benchmarks: "
             + (", ".join(f"`{b}`" for b in bench) if bench else "the whole suite") + "."
             + (f" The machine while it ran: {load.summary()}." if load else ""),
             "", "A plant makes the phase take the fraction longer (each planted function spins "
             "that fraction of its own duration after its outermost call). Detected: a "
             "benchmark that times the phase got slower. Unrelated: a benchmark that times "
             "none of the planted phase changed.", "",
             "| phase | what is slowed | fractions tried | smallest detected cleanly |",
             "| --- | --- | --- | --- |"]
    for t in trials:
        if t.phase == plants.CONTROL:
            lines.append(f"| {t.phase} | {plants.describe(t.phase)} | — | flagged from noise "
                         f"alone: {len(t.unrelated)} of {len(t.unrelated) + len(t.quiet)} |")
    for phase in (p for p in phases if p != plants.CONTROL):
        tried = sorted((t.fraction for t in trials if t.phase == phase), reverse=True)
        best = smallest_clean(trials, phase)
        lines.append(f"| {phase} | {plants.describe(phase)} | "
                     f"{', '.join(f'{f:.0%}' for f in tried) or '—'} | "
                     f"{'**not detected**' if best is None else f'{best:.0%}'} |")
    show_unconfirmed = method == "ab"  # only ab has a second series
    columns = ["phase", "planted", "detected by", "missed", "unrelated flagged"]
    columns += ["not confirmed"] * show_unconfirmed + ["drift", "minutes"]
    lines += ["", "## Trials", "", "| " + " | ".join(columns) + " |",
              "| --- " * len(columns) + "|"]
    for t in trials:
        cells = [t.phase, f"{t.fraction:.0%} (`{t.commit[:8]}`)",
                 f"{len(t.detected)}: {_changes(t.detected)}",
                 f"{len(t.missed)}: {_changes(t.missed, 3)}",
                 f"{len(t.unrelated)}: {_changes(t.unrelated)}"]
        cells += [f"{len(t.unconfirmed)}: {_changes(t.unconfirmed)}"] * show_unconfirmed
        cells += ["—" if t.drift is None else f"{t.drift:.2f}×", f"{t.seconds / 60:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Drift: the median planted / release ratio of the benchmarks the plant cannot "
              "touch, i.e. how far the machine itself moved between the two commits' "
              "processes; every ratio in that trial carries it."]
    if show_unconfirmed:
        lines += ["", "Not confirmed: cases the first series of rounds (forked from the fork "
                  "servers) flagged and a second series in new interpreters did not, with the "
                  "first series' ratio; they count as not flagged in the other columns. A case "
                  "of the planted phase here, slower, is a detection the second series cost; "
                  "any other, a flag it turned away."]
    noise = sorted(len(t.unrelated) for t in trials)
    if noise:
        lines += ["", f"Unrelated benchmarks flagged per trial: median "
                  f"{noise[len(noise) // 2]}, {noise[0]} to {noise[-1]}. Where that is above "
                  "zero the machine's noise reaches the factor, and a single detection may be "
                  "noise too: trust a phase's figure when its detections repeat at the larger "
                  "fractions with ratios near the plant."]
    failed = sorted({n for t in trials for n in t.failed})
    if failed:
        lines += ["", "Failed at one of the two commits: " + ", ".join(f"`{n}`" for n in failed)]
    lines += ["", "Fractions asked for: " + ", ".join(f"{f:.0%}" for f in fractions) + "."]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- command line


def _fractions(text):
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of "
                                          "fractions like 0.5,0.2,0.1") from None
    if not values or any(not 0 <= v <= 10 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: fractions lie between 0 and 10 "
                                          "(0.1 plants 10%)")
    return values


def parse(argv):
    parser = argparse.ArgumentParser(
        prog="python -m jaxbench_helpers sensitivity",
        description="Plant a known slowdown into one phase of a real JAX release at a time, "
        "run the suite against the release and the planted commit, and report what was "
        "detected and whether unrelated benchmarks stayed quiet.")
    parser.add_argument("--release", default=DEFAULT_RELEASE,
                        help=f"jax release to plant into (default {DEFAULT_RELEASE})")
    parser.add_argument("--phase", action="append", choices=(plants.CONTROL, *plants.PHASES),
                        help="phase to plant into; repeat for several (default: the control, "
                        "a commit that slows nothing, then all seven)")
    parser.add_argument("--fractions", type=_fractions, default=list(DEFAULT_FRACTIONS),
                        help="planted slowdowns, comma-separated (default 0.5,0.2,0.1)")
    parser.add_argument("--factor", type=float, default=DEFAULT_FACTOR,
                        help=f"asv compare's factor (default {DEFAULT_FACTOR})")
    parser.add_argument("--bench", "-b", action="append",
                        help="asv benchmark regex; repeat for several (default: a panel "
                        "that times every phase; '.' for the whole suite)")
    parser.add_argument("--profile", default="regular", help="quick, regular or large "
                        "(default regular)")
    parser.add_argument("--rounds", type=int,
                        help="rounds per commit, alternating between the two (asv -a "
                        "rounds=N; default: the profile's)")
    machine.add_argument(parser)
    parser.add_argument("--work-dir", help="scratch folder: repository, configs, results "
                        "(default: a new temporary folder, kept)")
    parser.add_argument("--env-dir", help="asv environments folder (default: the config's)")
    parser.add_argument("--no-stats", action="store_true",
                        help="judge medians against the factor alone, as asv compare "
                        "--no-stats (few samples, as in the quick profile, make asv's "
                        "intervals too wide to call even a large change)")
    parser.add_argument("--method", choices=("ab", "asv"), default="ab",
                        help="ab: each trial an interleaved A/B (default); asv: one asv run "
                        "--interleave-rounds of both commits, judged by asv compare")
    parser.add_argument("--bisect", action="store_true",
                        help="instead of trials, bisect each phase's plant hidden among "
                        "--commits neutral commits with the bisect command, and report "
                        "whether it named the planted commit (the smallest --fractions)")
    parser.add_argument("--commits", type=int, default=33,
                        help="commits after the release in a --bisect history (default 33)")
    parser.add_argument("--counts", action="store_true",
                        help="instead, plant work into dispatch, trace, lower, compile and run "
                        "(or --phase) and judge the instruction counts alone; --fractions are "
                        "of each phase's reference count (default: 2%%, 5%% for run)")
    parser.add_argument("--keep-going", action="store_true",
                        help="try every fraction even after a phase missed a larger one")
    parser.add_argument("--output", "-o", help="Markdown file (default: standard output)")
    quiet.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.factor <= 1:
        parser.error(f"--factor {args.factor}: must be above 1 (1.05 means 5%)")
    if args.profile not in profiles.PROFILES:
        parser.error(f"--profile {args.profile!r}: use one of {', '.join(profiles.PROFILES)}")
    if args.rounds is not None and args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: must be 1 or more")
    if not versions.is_final(args.release):
        parser.error(f"--release {args.release!r} is not a release number like 0.10.2")
    return args


def _say(text):
    print(text, file=sys.stderr, flush=True)


def _in_session(args, machine, work_dir, body):
    """``body()`` inside the quiet timing session: (its result, the load record, None), or
    (None, None, exit code) where it failed on bad input (2) or a busy machine (4)."""
    from asv.util import UserError

    try:
        ensure_described(machine)
        with quiet.timing_session("sensitivity", allow_busy=args.allow_busy, say=_say,
                                  record_path=os.path.join(work_dir, quiet.RECORD_NAME)) as monitor:
            result = body()
    except (SensitivityError, plants.PlantError, history.HistoryError, asvconfig.ConfigError,
            calibrate.CalibrationError, ab.ABError, UserError) as err:
        print(f"jaxbench sensitivity: {err}", file=sys.stderr)
        return None, None, 2
    except quiet.BusyMachine as err:
        print(f"jaxbench sensitivity: {err}", file=sys.stderr)
        return None, None, 4
    return result, (monitor.record if monitor else None), None


def _main_counts(args):
    unknown = [p for p in args.phase or () if p not in COUNT_REFERENCE]
    if unknown:
        print(f"jaxbench sensitivity: --counts plants into {', '.join(COUNT_REFERENCE)}, not "
              f"{', '.join(unknown)}", file=sys.stderr)
        return 2
    phases = args.phase or list(COUNT_REFERENCE)
    # the fractions asked for, else each phase's target
    fractions = args.fractions if args.fractions != list(DEFAULT_FRACTIONS) else None
    machine = machine_name(args.machine)
    work_dir = os.path.abspath(args.work_dir or tempfile.mkdtemp(prefix="jaxbench-sense-"))
    thresholds = asvconfig.load_committed().get("regressions_thresholds", {})

    def write(trials, load=None):
        md.write(count_markdown(trials, release=args.release, phases=phases,
                                profile=args.profile, machine=machine, thresholds=thresholds,
                                load=load), args.output)

    trials, load, failed = _in_session(args, machine, work_dir, lambda: count_sweep(
        release=args.release, phases=phases, fractions=fractions, profile=args.profile,
        machine=machine, work_dir=work_dir, thresholds=thresholds,
        keep_going=args.keep_going, log=_say, on_trial=write if args.output else None))
    if failed:
        return failed
    write(trials, load)
    print(f"jaxbench sensitivity: scratch results in {work_dir}", file=sys.stderr)
    wanted = {p: min(fractions) if fractions else COUNT_TARGETS[p] for p in phases}
    clean = all(smallest_clean(trials, p) is not None and smallest_clean(trials, p) <= wanted[p]
                for p in phases)
    return 0 if clean else 1


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else list(argv))
    if args.counts:
        return _main_counts(args)
    phases = args.phase or [plants.CONTROL, *plants.PHASES]
    bench = args.bench or DEFAULT_BENCH
    machine = machine_name(args.machine)
    work_dir = os.path.abspath(args.work_dir or tempfile.mkdtemp(prefix="jaxbench-sense-"))

    def write(trials, load=None):  # after every trial: an interrupted sweep leaves its report
        md.write(markdown(trials, release=args.release, phases=phases,
                          fractions=args.fractions, factor=args.factor,
                          profile=args.profile, machine=machine, bench=bench,
                          use_stats=not args.no_stats, rounds=args.rounds, load=load,
                          method=args.method),
                 args.output)

    if args.bisect:
        found, load, failed = _in_session(args, machine, work_dir, lambda: bisect_trials(
            release=args.release, phases=phases, fraction=min(args.fractions),
            commits=args.commits, profile=args.profile, work_dir=work_dir, log=_say))
        if failed:
            return failed
        md.write(bisect_markdown(found, release=args.release, fraction=min(args.fractions),
                                 commits=args.commits, profile=args.profile, machine=machine,
                                 load=load), args.output)
        return 0 if all(f.named for f in found) else 1
    trials, load, failed = _in_session(args, machine, work_dir, lambda: sweep(
        release=args.release, phases=phases, fractions=args.fractions, factor=args.factor,
        bench=bench, profile=args.profile, machine=machine, work_dir=work_dir,
        env_dir=args.env_dir, rounds=args.rounds, keep_going=args.keep_going,
        use_stats=not args.no_stats, log=_say, method=args.method,
        on_trial=write if args.output else None))
    if failed:
        return failed
    write(trials, load)
    print(f"jaxbench sensitivity: scratch results in {work_dir}", file=sys.stderr)
    clean = all(smallest_clean(trials, p) == min(args.fractions) for p in phases
                if p != plants.CONTROL)
    return 0 if clean else 1
