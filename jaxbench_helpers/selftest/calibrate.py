"""Noise calibration: one commit measured several times, and what asv makes of the differences.

Each run is a separate ``asv run`` of the same commit into its own scratch results folder (never
the config's own ``results_dir``), the environment's shared objects written afresh before it
as the install step leaves them (``install/pagecache.py``)::

    python -m jaxbench_helpers calibrate [--config C] [--commit jax-v0.10.2]
        [--runs 2 | --installs N] [--factor 1.10] [-b REGEX ...] [--profile quick]
        [--machine NAME] [--python same] [--work-dir DIR] [--env-dir DIR]
        [--from-runs WORK_DIR] [-o results.md] [--write-config asv.conf.json [--widen-only]]

Without ``--config`` the suite runs against the release-history repository
``.asv/jax-releases`` (``python -m jaxbench_helpers history``). ``--python same`` measures the
running interpreter's jax instead of an asv-built environment (``asv run --python=same
--set-commit-hash COMMIT``).

``--installs N`` measures N installs of the same code instead of N runs of one: the commit and
N-1 commits on top of it, in a scratch clone of the config's repository, that each add a line to
a text file outside the package. asv builds and installs each anew, as it does every commit of a
history, and installs of the same code move some instruction counts further than runs of one
install do (``results/COUNTS.md``), so thresholds from installs are what a step between two
commits has to clear. ``--widen-only`` writes a threshold only where it is wider than the
config's entry, so the thresholds of runs and of installs can be combined.

The Markdown report gives, per benchmark and parameter combination: the median of each run,
the spread within each run (interquartile range / median, from asv's ``stats_q_25`` and
``stats_q_75``), the change between runs (largest / smallest run median - 1; the instruction
counts of runs 2, 3, ... start from other heap layouts, ``run_environment``) and whether
``asv compare --factor F`` would flag two runs of the same commit. From the change between runs
it proposes ``regressions_thresholds`` for ``asv publish`` and, with ``--write-config``, writes
them into an asv config, leaving the rest of the file as it is.
"""

import argparse
import itertools
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from ..analysis import results
from ..common import asvconfig, git, machine, paths, quiet
from ..common import markdown as md
from ..common.machine import ensure_described, machine_name
from ..host import asvconf, history, pythons
from ..install import pagecache
from ..runtime import counts, profiles

# asv publish's threshold where regressions_thresholds has no matching entry
ASV_DEFAULT_THRESHOLD = 0.05
# a spread (IQR / median within a run) below this counts as quiet in the summary
QUIET_SPREAD = 0.03
THRESHOLD_STEP = 0.05
# instruction counts (results.COUNT_UNIT): their thresholds start at 0.5%, in steps of 0.5%
COUNT_FLOOR = 0.005
COUNT_STEP = 0.005
KEY = "regressions_thresholds"
# beside the runs in the work folder: how busy the machine was while they ran
LOAD_RECORD = quiet.RECORD_NAME
# the heap layouts the instruction counts of runs 2, 3, ... start from (counts.HEAP_SHIFT_ENV;
# run 1 starts as every asv run does): a commit moves the layout wherever it changes code, and
# with it a count, so the change between runs includes some of what a commit does to a count
# (not all: installs of other code move counts further, results/COUNTS.md)
COUNT_LAYOUTS = ("4120,7", "65544,100", "100008,333", "24600,50")
# in each run's folder: the environment calibrate gave that run beyond its own
RUN_ENVIRONMENT = "environment.json"
# in the work folder of --installs: the commits measured, one install each, in order
INSTALLS_RECORD = "installs.json"
INSTALLS_BRANCH = "jaxbench-installs"


class CalibrationError(ValueError):
    pass


# ---------------------------------------------------------------- statistics


def spread(measurement):
    """Interquartile range / median of one run's samples (None without statistics)."""
    stats, value = measurement.stats, measurement.value
    if not stats or results.missing(value) or not value:
        return None
    q25, q75 = stats.get("q_25"), stats.get("q_75")
    if q25 is None or q75 is None:
        return None
    return (q75 - q25) / abs(value)


def flagged(a, b, factor):
    """Whether asv compare at ``factor`` marks ``b`` against ``a`` as changed (either way).

    asv's own rule (``asv.commands.compare._is_result_better``): the ratio must exceed the
    factor, and, where both runs have statistics from more than one sample, asv's test must call
    them different (Mann-Whitney U on recorded samples, else non-overlapping 99% intervals).
    """
    from asv.commands.compare import _is_result_better

    if results.missing(a.value) or results.missing(b.value):
        return False
    ss_a, ss_b = (a.stats, a.samples), (b.stats, b.samples)
    return bool(_is_result_better(a.value, b.value, ss_a, ss_b, factor)
                or _is_result_better(b.value, a.value, ss_b, ss_a, factor))


@dataclass
class Case:
    """One benchmark at one parameter combination (and environment), across the runs."""

    key: results.SeriesKey
    unit: str
    runs: list  # [results.Measurement], one per run

    @property
    def name(self):
        """asv's name for it on the regressions page: benchmark(params)."""
        return self.key.benchmark + self.key.params

    @property
    def values(self):
        return [m.value for m in self.runs]

    @property
    def complete(self):
        """Every run has a value (no failure, no skip)."""
        return not any(results.missing(v) for v in self.values)

    @property
    def failed(self):
        return any(v is None for v in self.values)

    @property
    def spreads(self):
        return [spread(m) for m in self.runs]

    @property
    def worst_spread(self):
        found = [s for s in self.spreads if s is not None]
        return max(found) if found else None

    @property
    def spread_quiet(self):
        """The worst spread (interquartile range / median) of the runs with quartiles is below
        QUIET_SPREAD; False when no run has them."""
        return self.worst_spread is not None and self.worst_spread < QUIET_SPREAD

    @property
    def change(self):
        """Largest / smallest run median - 1: how far apart the runs came out."""
        if not self.complete:
            return None
        values = [abs(v) for v in self.values]
        if min(values) == 0:
            return 0.0 if max(values) == 0 else None
        return max(values) / min(values) - 1

    @property
    def medians_agree(self):
        """The run medians came out within QUIET_SPREAD of each other."""
        return self.change is not None and self.change < QUIET_SPREAD

    @property
    def ratios(self):
        """Each run's median / the first run's."""
        first = self.values[0]
        if not self.complete or not first:
            return None
        return [v / first for v in self.values[1:]]

    def flagged_pairs(self, factor):
        """[(i, j)] run pairs (1-based) asv compare would flag."""
        return [(i + 1, j + 1) for i, j in itertools.combinations(range(len(self.runs)), 2)
                if flagged(self.runs[i], self.runs[j], factor)]


def cases(runs, units=None):
    """[Case] for every benchmark × parameters × environment in any of ``runs``
    ({SeriesKey: Measurement} each); a case a run lacks counts as skipped there."""
    units = units or {}
    keys = sorted(set().union(*runs), key=lambda k: (k.benchmark, k.params, k.env))
    return [Case(k, results.unit_of(k.benchmark, units),
                 [run.get(k, results.Measurement(math.nan)) for run in runs]) for k in keys]


def proposed_threshold(case, margin, floor=None, step=None):
    """max(floor, margin × change between runs), rounded up to ``step`` (None: no change
    known). Instruction counts, which a machine cannot move, get a floor and a step ten times
    finer than asv's default threshold."""
    if case.change is None:
        return None
    counted = case.unit == results.COUNT_UNIT
    floor = floor if floor is not None else COUNT_FLOOR if counted else ASV_DEFAULT_THRESHOLD
    step = step if step is not None else COUNT_STEP if counted else THRESHOLD_STEP
    wanted = max(floor, margin * case.change)
    return round(math.ceil(wanted / step - 1e-9) * step, 4)


def _median_of(complete, margin):
    """The median threshold a comparison of the cases other than counts meets (asv's default
    where none is written), as a sentence."""
    values = [proposed_threshold(c, margin) for c in complete if c.unit != results.COUNT_UNIT]
    values = [v for v in values if v is not None]
    if not values:
        return ""
    return (f" Their median over the {len(values)} cases other than instruction counts: "
            f"**{statistics.median(values):.2f}**.")


def threshold_regex(name):
    """A regex for regressions_thresholds matching exactly this benchmark(params) entry; asv
    matches it against the name plus '@branch'."""
    return re.escape(name) + "(@|$)"


def thresholds(found, margin):
    """{regex: threshold} for the cases whose proposed threshold differs from asv's default:
    above it for timings, and every instruction count (the largest over environments where one
    name has several)."""
    by_name = {}
    for case in found:
        t = proposed_threshold(case, margin)
        if t is not None and (t > ASV_DEFAULT_THRESHOLD or case.unit == results.COUNT_UNIT):
            by_name[case.name] = max(t, by_name.get(case.name, 0))
    return {threshold_regex(name): t for name, t in sorted(by_name.items())}


# ---------------------------------------------------------------- the config file


def _object_end(text, start):
    """Index just after the JSON(5) object that opens at ``text[start] == '{'``."""
    depth, i, quote = 0, start, None
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif text.startswith("//", i):
            i = text.find("\n", i)
            if i < 0:
                break
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise CalibrationError(f"unbalanced braces after {KEY!r}")


def _format_dict(entries, indent):
    if not entries:
        return "{}"
    inner = indent + "    "
    rows = [f"{inner}{json.dumps(k)}: {v}" for k, v in entries.items()]
    return "{\n" + ",\n".join(rows) + "\n" + indent + "}"


def write_thresholds(path, new, replaced=(), widen_only=False):
    """Set ``new`` ({regex: threshold}) in the config at ``path``, keeping its other entries
    except those in ``replaced`` (the entries of the calibrated cases, re-decided now); with
    ``widen_only`` an entry is only ever raised, and none is removed. Only the
    regressions_thresholds value changes, or the key is inserted before "benchmark_dir"; the
    file's comments stay. Returns the resulting dict."""
    from asv.config import Config

    try:
        current = asvconfig.read(path)
        with open(path) as f:
            text = f.read()
    except (OSError, asvconfig.ConfigError) as err:
        raise CalibrationError(f"--write-config {path}: cannot read it as an asv config "
                               f"({err})") from None
    existing = current.get(KEY) or {}
    if not isinstance(existing, dict):
        raise CalibrationError(f"{path}: {KEY} is not a dict of regex -> threshold")
    if widen_only:
        merged = dict(existing)
        merged.update({k: max(v, existing.get(k, v)) for k, v in new.items()})
    else:
        merged = {k: v for k, v in existing.items() if k not in set(replaced) | set(new)}
        merged.update(new)
    merged = dict(sorted(merged.items()))
    found = re.search(r'^([ \t]*)"' + KEY + r'"\s*:\s*', text, flags=re.M)
    if found:
        indent = found.group(1)
        start = found.end()
        if text[start:start + 1] != "{":
            raise CalibrationError(f"{path}: {KEY} is not an object")
        end = _object_end(text, start)
        updated = text[:start] + _format_dict(merged, indent) + text[end:]
    else:
        anchor = re.search(r'^([ \t]*)"benchmark_dir"\s*:', text, flags=re.M)
        if anchor:
            indent, at = anchor.group(1), anchor.start()
        else:  # no anchor: make it the first key
            brace = re.search(r"^\s*\{[ \t]*\n", re.sub(r"//[^\n]*", lambda m: " " * len(
                m.group()), text))
            if not brace:
                raise CalibrationError(f"{path}: no top-level object found")
            indent, at = "    ", brace.end()
        updated = (text[:at] + f'{indent}"{KEY}": {_format_dict(merged, indent)},\n\n'
                   + text[at:])
    tmp = path + ".calibrate.tmp"
    with open(tmp, "w") as f:
        f.write(updated)
    try:
        loaded = Config.load(tmp).regressions_thresholds
    except Exception as err:  # never leave a config asv cannot read
        os.remove(tmp)
        raise CalibrationError(f"{path}: the edited config did not load ({err}); left as it "
                               "was") from None
    if loaded != merged:
        os.remove(tmp)
        raise CalibrationError(f"{path}: the edited config reads back differently; left as it "
                               "was")
    os.replace(tmp, path)
    return merged


# ---------------------------------------------------------------- running asv


def default_config():
    if not os.path.isdir(paths.HISTORY_REPO):
        raise CalibrationError(f"no --config and no release-history repository at "
                               f"{paths.HISTORY_REPO}; build it (python -m jaxbench_helpers "
                               "history --dest .asv/jax-releases) or pass --config")
    return asvconf.derive(paths.HISTORY_REPO)


def _matrix_first(conf, name):
    values = conf.get("matrix", {}).get("env_nobuild", {}).get(name) or [None]
    return values[0] if isinstance(values, list) else values


def run_asv(conf_path, commit, *, machine, bench, same_python, env, echo=True,
            range_spec=False, extra=()):
    """One ``asv run`` of ``commit`` (or, with ``range_spec``, of asv's range ``commit``);
    asv's output goes to stderr as it comes."""
    cmd = [sys.executable, "-m", "asv", "--config", conf_path, "run", "--machine", machine,
           "--show-stderr", *extra]
    if same_python:
        cmd += ["--python=same", "--set-commit-hash", commit]
    else:
        cmd += [commit if range_spec else f"{commit}^!"]
        # asv looks for the config's Pythons as pythonX.Y on PATH
        env = pythons.asv_env(asvconfig.read(conf_path).get("pythons", []), env)
    cmd += [a for b in bench for a in ("--bench", b)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)
    tail = []
    for line in proc.stdout:
        if echo:
            sys.stderr.write(line)
        tail = (tail + [line])[-40:]
    proc.wait()
    # 2: some benchmark failed; the report lists it
    if proc.returncode not in (0, 2):
        raise CalibrationError(f"asv run exited {proc.returncode}:\n{''.join(tail)}")
    return proc.returncode


def load_run(results_dir, machine):
    """(commit hash, {SeriesKey: Measurement}, units) of one run's scratch results."""
    found = results.load_measurements(results_dir, machine)
    if len(found) != 1:
        raise CalibrationError(f"{results_dir} holds results for {len(found)} commits, not 1: "
                               "did asv run anything? (check -b and --commit)")
    (commit, measured), = found.items()
    return commit, measured, results.load_units(results_dir)


def run_environment(run):
    """What calibrate sets in the environment of run ``run`` (1-based): the heap layout its
    count children start from, the first run's unshifted."""
    if run == 1:
        return {}
    return {counts.HEAP_SHIFT_ENV: COUNT_LAYOUTS[(run - 2) % len(COUNT_LAYOUTS)]}


def recorded_environment(results_folder):
    """The environment ``measure`` recorded for the run of ``results_folder``; None for a run
    made before calibrate recorded it."""
    try:
        with open(os.path.join(os.path.dirname(results_folder), RUN_ENVIRONMENT)) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def check_work_dir(conf, work_dir):
    own_results = os.path.realpath(conf["results_dir"])
    if os.path.realpath(work_dir).startswith(own_results + os.sep) or (
            os.path.realpath(work_dir) == own_results):
        raise CalibrationError(f"--work-dir {work_dir} lies inside the config's results folder "
                               f"{own_results}; pick a scratch folder")


def neutral_installs(conf, commit, installs, work_dir):
    """A clone of the config's repository in ``work_dir`` with ``installs`` - 1 neutral commits
    (``history.neutral_commit``) on top of ``commit``; records them in ``INSTALLS_RECORD``.
    Returns (the config pointed at the clone, [commit hash, neutral commit hashes])."""
    check_work_dir(conf, work_dir)
    source = conf["repo"]
    found = git.run(source, "rev-parse", "-q", "--verify", f"{commit}^{{commit}}",
                    check=False) if os.path.isdir(source) else None
    if found is None or found.returncode:
        raise CalibrationError(f"--installs: no commit {commit!r} in the config's repository "
                               f"{source} (--installs needs a local repository)")
    base = found.stdout.strip()
    clone = os.path.join(work_dir, "repo")
    if os.path.exists(clone):
        raise CalibrationError(f"{clone} exists already; pass an empty --work-dir")
    os.makedirs(work_dir, exist_ok=True)
    # --shared: the clone borrows the source's objects, so a history of every release costs
    # nothing to copy; the source is only read
    history._git(work_dir, "clone", "-q", "--shared", "--no-checkout", source, clone)
    history._git(clone, "checkout", "-q", "-B", INSTALLS_BRANCH, base)
    commits = [base] + [history.neutral_commit(clone, f"neutral commit {i} (calibrate "
                                               "--installs)") for i in range(1, installs)]
    with open(os.path.join(work_dir, INSTALLS_RECORD), "w") as f:
        json.dump({"repo": clone, "commits": commits}, f)
    return dict(conf, repo=clone), commits


def recorded_installs(work_dir):
    """The commits an ``--installs`` calibration measured in ``work_dir``, in order (None
    where the runs measured one commit)."""
    try:
        with open(os.path.join(work_dir, INSTALLS_RECORD)) as f:
            return json.load(f)["commits"]
    except FileNotFoundError:
        return None


def measure(conf, *, commits, machine, bench, profile, work_dir, same_python, env_dir=None,
            echo=True):
    """Run asv once per entry of ``commits`` (one commit repeated, or one install each), one
    run at a time, each with its own config copy and results folder under ``work_dir``, and
    its count children's heap layout (``run_environment``). Returns [results folder]."""
    check_work_dir(conf, work_dir)
    env = dict(os.environ)
    env.pop(counts.HEAP_SHIFT_ENV, None)  # each run's own (run_environment)
    conf = json.loads(json.dumps(conf))
    if env_dir:
        conf["env_dir"] = os.path.abspath(env_dir)
    if profile:
        conf.setdefault("matrix", {}).setdefault("env_nobuild", {})["JAXBENCH_PROFILE"] = [
            profile]
    if same_python:
        # an existing environment ignores the matrix: its variables come from ours
        for name in ("JAXBENCH_PROFILE", "JAXBENCH_PLATFORM"):
            value = _matrix_first(conf, name)
            if value:
                env[name] = value
    folders = []
    runs = len(commits)
    for i, commit in enumerate(commits, 1):
        folder = os.path.join(work_dir, f"run-{i}")
        if os.path.exists(folder):
            raise CalibrationError(f"{folder} exists already; pass an empty --work-dir")
        os.makedirs(folder)
        results = os.path.join(folder, "results")
        conf_path = os.path.join(folder, "asv.conf.json")
        with open(conf_path, "w") as f:
            json.dump(dict(conf, results_dir=results, html_dir=os.path.join(folder, "html")),
                      f, indent=4)
        extra = run_environment(i)
        with open(os.path.join(folder, RUN_ENVIRONMENT), "w") as f:
            json.dump(extra, f)
        print(f"jaxbench calibrate: run {i} of {runs} ({commit}) into {results}",
              file=sys.stderr, flush=True)
        if not same_python and os.path.isdir(conf["env_dir"]):
            # asv installs nothing when the commit is installed already: lay the kept
            # environment out as the install step leaves a new one
            print(f"jaxbench calibrate: {conf['env_dir']}: "
                  f"{pagecache.written_afresh(conf['env_dir'])}", file=sys.stderr, flush=True)
        run_asv(conf_path, commit, machine=machine, bench=bench, same_python=same_python,
                env={**env, **extra}, echo=echo)
        folders.append(results)
    return folders


def _say(text):
    print(text, file=sys.stderr, flush=True)  # standard output may carry the report


def earlier_runs(work_dir):
    """The results folders an earlier calibration left in ``work_dir`` (run-1, run-2...)."""
    runs = os.listdir(work_dir) if os.path.isdir(work_dir) else []
    numbers = sorted(int(d[4:]) for d in runs if re.fullmatch(r"run-\d+", d))
    folders = [os.path.join(work_dir, f"run-{n}", "results") for n in numbers]
    folders = [f for f in folders if os.path.isdir(f)]
    if len(folders) < 2:
        raise CalibrationError(f"--from-runs {work_dir}: {len(folders)} run folders "
                               "(run-N/results) there; comparing needs 2 or more, as an "
                               "earlier calibrate --work-dir leaves them")
    return folders


# ---------------------------------------------------------------- markdown


def _value(value, unit):
    """A run's median with its unit; whole numbers (versions, counts) as they are."""
    if unit not in ("seconds", "bytes") and isinstance(value, (int, float)) and not \
            results.missing(value) and float(value).is_integer():
        return f"{int(value)} {unit}".strip()
    return results.human(value, unit)


def wide_but_steady(case, factor, spread_limit):
    """Whether a case's samples vary over ``spread_limit`` within a run while its run medians
    agree within QUIET_SPREAD and asv compare flags no pair: the host's slow spells widen the
    quartiles, and the median, which asv compare and ``ab`` read, rides them out."""
    worst = case.worst_spread
    return (worst is not None and worst > spread_limit and case.medians_agree
            and not case.flagged_pairs(factor))


WIDE_BUT_STEADY_ADVICE = (
    "Their samples vary within a run, yet their run medians agree: slow spells of the machine "
    "come and go within a run, and a run's median rides them out. Judge a change in them by "
    "the ratio of medians (`asv compare`, or `ab`'s paired ratio for a small one), not by their "
    "spread; a longer inner loop does not narrow a spread of this kind, since each sample "
    "still falls inside or outside a spell. They were steady in these runs only: the spells' "
    "rate moves within hours, so calibrate again at another hour before relying on it.")


def advice(case, factor, spread_limit):
    """Why a case is not to be trusted, and what to do about it ('' when it is fine, and for
    a case wide within a run but steady between runs: see ``wide_but_steady``)."""
    if wide_but_steady(case, factor, spread_limit):
        return ""
    reasons = []
    pairs = case.flagged_pairs(factor)
    worst = case.worst_spread
    if pairs:
        # the smallest factor, in steps of 0.05, that the observed ratio does not exceed
        quiet_factor = math.ceil((1 + (case.change or 0)) * 20 - 1e-9) / 20
        runs = ", ".join(f"{i}/{j}" for i, j in pairs)
        reasons.append(f"asv compare flags runs {runs} of the same commit: compare it with "
                       f"--factor {quiet_factor:.2f} or more, or measure it with more rounds "
                       "and samples (regular profile)")
    if worst is not None and worst > spread_limit:
        reasons.append(f"samples vary {md.percent(worst)} within a run: more samples (regular "
                       "profile), a quieter machine, or a longer inner loop")
    elif case.change is not None and case.change > spread_limit and not pairs:
        reasons.append(f"run medians differ {md.percent(case.change)}: keep its regressions "
                       "threshold at least at the proposed value")
    return "; ".join(reasons)


def layouts_line(found, environments):
    """A sentence on the heap layouts the runs' instruction counts started from ('' without
    counts)."""
    if not any(c.unit == results.COUNT_UNIT for c in found):
        return ""
    if not environments or any(e is None for e in environments):
        return ("* Instruction counts: the runs' heap layouts were not recorded (runs made "
                "before calibrate varied them); thresholds from runs of one layout do not "
                "cover what a commit's changes elsewhere do to a count")
    shifts = [e.get(counts.HEAP_SHIFT_ENV) for e in environments]
    named = "; ".join(f"run {i}: " + (f"`{counts.HEAP_SHIFT_ENV}={s}`" if s else "unshifted")
                      for i, s in enumerate(shifts, 1))
    return ("* Instruction counts: each run's count children started from another heap layout "
            f"({named}), as a commit that changes code elsewhere moves it, so the change "
            "between runs includes what that does to a count")


def markdown(found, *, commit, commit_name, runs, machine, factor, margin, spread_limit,
             profile, proposed, loads, written=None, folders=(), environments=None,
             installs=None, raised=None):
    complete = [c for c in found if c.complete]
    failed = [c for c in found if c.failed]
    skipped = [c for c in found if not c.complete and not c.failed]
    timed = [c for c in complete if c.worst_spread is not None]
    quiet = [c for c in timed if c.spread_quiet]
    false_positives = [c for c in complete if c.flagged_pairs(factor)]
    changes = sorted((c for c in complete if c.change is not None), key=lambda c: c.change)
    noisy = [(c, advice(c, factor, spread_limit)) for c in complete]
    noisy = [(c, why) for c, why in noisy if why]
    wide = [c for c in complete if wide_but_steady(c, factor, spread_limit)]
    show_env = len({c.key.env for c in found}) > 1

    def label(case):
        return f"`{md.cell(case.name)}`" + (f" [{md.cell(case.key.env)}]" if show_env else "")

    steady = [c for c in timed if c.medians_agree]

    def share_of(subset):
        return (f"{len(subset)} of {len(timed)} timed cases "
                f"({100 * len(subset) / len(timed):.0f}%)" if timed else "no timed case")

    benchmarks = len({c.key.benchmark for c in complete})
    load_text = "; ".join(r.summary() for r in loads) if loads else "not recorded"
    if installs:
        title = f"{commit_name} installed {runs} times"
        neutral = ", ".join(f"`{c[:8]}`" for c in installs[1:])
        what = (f"commit `{commit[:8]}` and the neutral commits on top of it ({neutral}: each "
                f"adds a line to `{history.NEUTRAL_FILE}`, outside the package); each run a "
                "separate `asv run` of one of them, which builds and installs the same code "
                "anew")
    else:
        title = f"{commit_name} measured {runs} times"
        what = f"commit `{commit[:8]}`; each run a separate `asv run` of the same commit"
    lines = [
        f"# Noise calibration: {title}",
        "",
        f"Machine `{machine}`, {what}, profile `{profile or 'as configured'}`. The machine "
        f"while it ran: {load_text}.",
        "",
        f"* Benchmark × parameter cases with a value in every run: **{len(complete)}**, of "
        f"{benchmarks} benchmarks ({len(failed)} failed, {len(skipped)} skipped in some run; "
        "left out)",
        f"* Spread within a run (interquartile range / median, the worse run) below "
        f"{QUIET_SPREAD:.0%}: **{share_of(quiet)}**",
        # a run's median rides out the host's slow spells of a fraction of a second that
        # widen its quartiles; asv compare reads the medians (results/HEAP-FAULTS.md)
        f"* Run medians within {QUIET_SPREAD:.0%} of each other (change between runs below "
        f"{QUIET_SPREAD:.0%}): **{share_of(steady)}**",
        f"* False positives of `asv compare --factor {factor}` between runs of this one commit: "
        f"**{len(false_positives)}** of {len(complete)}",
    ]
    baselines = [c for c in timed if results.is_baseline(c.key.benchmark)]
    if baselines and len(baselines) < len(timed):
        # no JAX runs in them: their noise is the host's in these runs, not the library's
        lines.append(
            f"* The NumPy baselines (`{results.CONTROL_PHASE}`, no JAX in them: what the host "
            f"did to plain compute in these runs): spread within a run below "
            f"{QUIET_SPREAD:.0%} for "
            f"{sum(c.spread_quiet for c in baselines)} of {len(baselines)}, "
            f"run medians within {QUIET_SPREAD:.0%} for "
            f"{sum(c.medians_agree for c in baselines)} of {len(baselines)}")
    layouts = layouts_line(found, environments)
    if layouts:
        lines.append(layouts)
    if changes:
        mid = statistics.median(c.change for c in changes)
        largest = changes[-1]
        lines.append(f"* Change between runs (largest / smallest run median − 1): median "
                     f"{md.percent(mid)}, largest {md.percent(largest.change)}"
                     + (f" ({label(largest)})" if largest.change else ""))
    lines += [
        "",
        f"asv flags a pair only when the ratio exceeds {factor} and asv's statistics call the "
        "two different (Mann-Whitney U where samples were recorded, else non-overlapping 99% "
        "intervals; with a single sample in a run, the ratio alone decides).",
        "",
        f"## Too noisy to trust ({len(noisy)})",
        "",
    ]
    if noisy:
        lines += ["| benchmark | spread | change between runs | flagged | what to do |",
                  "|---|---|---|---|---|"]
        for c, why in sorted(noisy, key=lambda cw: -(cw[0].change or 0)):
            lines.append(f"| {label(c)} | {md.percent(c.worst_spread)} | {md.percent(c.change)} | "
                         f"{'yes' if c.flagged_pairs(factor) else 'no'} | {why} |")
        lines += ["", "What to do: compare these with a larger factor than the rest (or leave "
                  "them out of a pull-request verdict), use the `regular` profile (two rounds, "
                  "up to five samples each) rather than `quick`, and calibrate again with more "
                  "runs (`--runs 3` or more) on a quieter machine before trusting a change "
                  "smaller than their proposed threshold."]
    else:
        lines.append(f"None: no case was flagged, or varied over {spread_limit:.0%} except "
                     "within runs whose medians agree.")
    lines += [
        "",
        f"## Wide within a run, steady between runs ({len(wide)})",
        "",
    ]
    if wide:
        lines += ["| benchmark | spread | change between runs |", "|---|---|---|"]
        for c in sorted(wide, key=lambda c: -c.worst_spread):
            lines.append(f"| {label(c)} | {md.percent(c.worst_spread)} | "
                         f"{md.percent(c.change)} |")
        lines += ["", WIDE_BUT_STEADY_ADVICE]
    else:
        lines.append(f"None: no case varied over {spread_limit:.0%} within a run while its run "
                     f"medians agreed within {QUIET_SPREAD:.0%}.")
    lines += [
        "",
        "## Proposed `regressions_thresholds`",
        "",
        f"Threshold = max({ASV_DEFAULT_THRESHOLD}, {margin} × change between runs), rounded up "
        f"to {THRESHOLD_STEP}; for instruction counts max({COUNT_FLOOR}, {margin} × change), "
        f"rounded up to {COUNT_STEP}. `asv publish` leaves a step smaller than its threshold "
        "off the regressions page unless the step is needed to explain the gap between the "
        f"best and the newest value. {len(proposed)} of {len(complete)} cases need another "
        f"than asv's default {ASV_DEFAULT_THRESHOLD} (timings above it, every count)."
        + _median_of(complete, margin),
        "",
        "```json",
        f'"{KEY}": ' + _format_dict(proposed, ""),
        "```",
        "",
    ]
    if written and raised is not None:
        lines.append(f"Written into `{written}` where wider than its entry: "
                     f"{len(raised)} of {len(proposed)} raised, the others kept.")
    elif written:
        lines.append(f"Written into `{written}`.")
    else:
        lines.append("Write them into a config with `--write-config asv.conf.json`.")
    run_heads = " | ".join(f"run {i}" for i in range(1, runs + 1))
    lines += [
        "",
        "## Every case",
        "",
        f"| benchmark | {run_heads} | spread per run | ratio to run 1 | flagged at {factor} "
        "| threshold |",
        "|---|" + "---|" * runs + "---|---|---|---|",
    ]
    for c in found:
        medians = " | ".join(_value(v, c.unit) for v in c.values)
        spreads = " / ".join(md.percent(s) for s in c.spreads)
        ratios = " / ".join(f"{r:.3f}" for r in c.ratios) if c.ratios else "—"
        pairs = c.flagged_pairs(factor)
        flag = ("runs " + ", ".join(f"{i}/{j}" for i, j in pairs)) if pairs else "no"
        t = proposed_threshold(c, margin)
        lines.append(f"| {label(c)} | {medians} | {spreads} | {ratios} | {flag} | "
                     f"{'—' if t is None else t} |")
    if folders:
        lines += ["", "Results of each run: " + ", ".join(f"`{f}`" for f in folders)]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- command line


def parse(argv):
    parser = argparse.ArgumentParser(
        prog="python -m jaxbench_helpers calibrate",
        description="Measure one commit several times with asv and report the noise: spread "
        "within runs, change between runs, asv compare's false positives, and proposed "
        "regressions_thresholds.")
    parser.add_argument("--config", help="asv config (default: one derived for the "
                        "release-history repository .asv/jax-releases)")
    parser.add_argument("--commit", help="commit, tag or branch to measure (default: the head "
                        "of the config's first branch)")
    parser.add_argument("--runs", type=int, help="asv runs of the commit (default 2)")
    parser.add_argument("--installs", type=int, metavar="N",
                        help="measure N installs of the commit's code instead: the commit and "
                        "N-1 neutral commits on top of it, in a scratch clone, one run each")
    parser.add_argument("--factor", type=float, default=1.10,
                        help="asv compare's factor to test for false positives (default 1.10)")
    parser.add_argument("--bench", "-b", action="append", default=[],
                        help="asv benchmark regex; repeat for several (default: the whole suite)")
    parser.add_argument("--profile", help="quick, regular or large (default: the config's)")
    machine.add_argument(parser)
    parser.add_argument("--python", choices=["same"],
                        help="'same': measure this interpreter's jax (asv --python=same "
                        "--set-commit-hash COMMIT) instead of an asv-built environment")
    parser.add_argument("--work-dir", help="scratch folder for each run's config and results "
                        "(default: a new temporary folder, kept)")
    parser.add_argument("--env-dir", help="asv environments folder (default: the config's; "
                        "do not share it with an asv run in progress)")
    parser.add_argument("--margin", type=float, default=2.0,
                        help="threshold = max(0.05, MARGIN × change between runs) (default 2)")
    parser.add_argument("--spread-limit", type=float, default=ASV_DEFAULT_THRESHOLD,
                        help="a spread or change between runs above this is too noisy "
                        "(default 0.05, asv's default regression threshold)")
    parser.add_argument("--from-runs", metavar="WORK_DIR",
                        help="run nothing: report on the runs an earlier calibrate left in "
                        "its --work-dir (to try another --factor or --margin, or to write "
                        "the config afterwards)")
    parser.add_argument("--output", "-o", help="Markdown file (default: standard output)")
    quiet.add_arguments(parser)
    parser.add_argument("--write-config", metavar="PATH",
                        help="write the proposed regressions_thresholds into this asv config")
    parser.add_argument("--widen-only", action="store_true",
                        help="with --write-config: raise an entry where the proposal is wider, "
                        "never lower or remove one (to add installs' thresholds to runs')")
    args = parser.parse_args(argv)
    if args.runs is not None and args.installs is not None:
        parser.error("--runs and --installs: pass one (--installs N is N runs, one install "
                     "each)")
    if args.installs is not None and args.python == "same":
        parser.error("--installs with --python same: an existing environment installs "
                     "nothing; drop --python same")
    if args.from_runs and (args.runs is not None or args.installs is not None):
        parser.error("--from-runs reports on the runs already there; drop --runs/--installs")
    what = "installs" if args.installs is not None else "runs"
    count = getattr(args, what)
    if count is not None and count < 2:
        parser.error(f"--{what} {count}: comparing needs 2 {what} or more")
    args.runs = args.runs or 2
    if args.widen_only and not args.write_config:
        parser.error("--widen-only applies to --write-config PATH; pass the config to widen")
    if args.factor <= 1:
        parser.error(f"--factor {args.factor}: must be above 1 (1.10 means 10%)")
    if args.margin <= 0 or args.spread_limit <= 0:
        parser.error("--margin and --spread-limit must be positive")
    if args.profile and args.profile not in profiles.PROFILES:
        parser.error(f"--profile {args.profile!r}: use one of {', '.join(profiles.PROFILES)}")
    if args.write_config and not os.path.isfile(args.write_config):
        parser.error(f"--write-config {args.write_config} does not exist; pass an asv config "
                     "to update (a copy of asv.conf.json, say)")
    return args


def main(argv=None):
    from asv.util import UserError

    args = parse(sys.argv[1:] if argv is None else list(argv))
    try:
        conf = asvconfig.load(args.config) if args.config else default_config()
        commit_name = args.commit or conf.get("branches", ["main"])[0]
        machine = machine_name(args.machine)
        if args.from_runs:
            work_dir = args.from_runs
            folders = earlier_runs(work_dir)
        else:
            work_dir = os.path.abspath(args.work_dir
                                       or tempfile.mkdtemp(prefix="jaxbench-calib-"))
            ensure_described(machine)
            if args.installs:
                conf, measured = neutral_installs(conf, commit_name, args.installs, work_dir)
            else:
                measured = [commit_name] * args.runs
            with quiet.timing_session("calibrate", allow_busy=args.allow_busy,
                                      record_path=os.path.join(work_dir, LOAD_RECORD),
                                      say=_say):
                folders = measure(conf, commits=measured, machine=machine, bench=args.bench,
                                  profile=args.profile, work_dir=work_dir,
                                  same_python=args.python == "same", env_dir=args.env_dir)
        loads = quiet.read_records(os.path.join(work_dir, LOAD_RECORD))
        loaded = [load_run(f, machine) for f in folders]
        installs = recorded_installs(work_dir)
        order = [c for c, _, _ in loaded]
        if installs and order != installs[:len(order)]:
            raise CalibrationError(f"the runs in {work_dir} measured {order}, not the installs "
                                   f"recorded in {INSTALLS_RECORD}: {installs}")
        if not installs and len(set(order)) != 1:
            raise CalibrationError(f"the runs measured different commits: {sorted(set(order))}")
        units = {}
        for _, _, u in loaded:
            units.update(u)
        found = cases([m for _, m, _ in loaded], units)
        proposed = thresholds([c for c in found if c.complete], args.margin)
        written = raised = None
        if args.write_config and args.widen_only:
            before = asvconfig.read(args.write_config).get(KEY) or {}
            write_thresholds(args.write_config, proposed, widen_only=True)
            raised = [k for k, v in proposed.items() if k not in before or v > before[k]]
        elif args.write_config:
            replaced = [threshold_regex(c.name) for c in found if c.complete]
            write_thresholds(args.write_config, proposed, replaced)
        written = args.write_config
        text = markdown(found, commit=order[0], commit_name=commit_name, runs=len(folders),
                        machine=machine, factor=args.factor, margin=args.margin,
                        spread_limit=args.spread_limit,
                        profile=args.profile or _matrix_first(conf, "JAXBENCH_PROFILE"),
                        proposed=proposed, loads=loads, written=written, folders=folders,
                        environments=[recorded_environment(f) for f in folders],
                        installs=installs, raised=raised)
    except (CalibrationError, results.ResultsError, asvconfig.ConfigError, UserError) as err:
        print(f"jaxbench calibrate: {err}", file=sys.stderr)
        return 1
    except quiet.BusyMachine as err:
        print(f"jaxbench calibrate: {err}", file=sys.stderr)
        return 4
    if args.output:
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        with open(args.output, "w") as f:
            f.write(text)
        print(f"jaxbench calibrate: wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
