"""Markdown reports from asv results: the largest steps across JAX releases, and a PR comparison.

History (the largest persistent steps between consecutive measured releases, per benchmark,
parameter combination and phase)::

    python -m jaxbench_helpers report [--results-dir results] [--machine NAME]
        [--repo .asv/jax-releases] [--branch main] [--top 10] [--window 2] [--factor 1.1]
        [--no-stats] [-o results/REPORT.md]

Comparison of two commits, for a pull-request comment (after ``asv continuous BASE HEAD``)::

    python -m jaxbench_helpers report compare BASE HEAD --config asv.mine.conf.json
        [--machine NAME] [--factor 1.5] [--no-stats] [-o comment.md]

``compare`` exits 1 when a benchmark got slower by more than the factor, 2 when a benchmark
failed at HEAD, 3 when it cannot compare (no results, unknown commit), else 0.
"""

import argparse
import json
import math
import os
import statistics
import sys
from dataclasses import dataclass, field

from ..common import asvconfig, markdown, paths, quiet
from ..runtime import versions
from . import results
from .results import ResultsError as ReportError

UPSTREAM_URL = "https://github.com/jax-ml/jax"


# ---------------------------------------------------------------- step detection


@dataclass
class Step:
    key: results.SeriesKey
    unit: str
    before: results.Commit  # the last measured commit before the step
    after: results.Commit  # the first measured commit after it
    median_before: float
    median_after: float
    n_before: int  # commits in the window before the step
    n_after: int
    worse: bool
    direction: results.Direction = field(repr=False, default=None)
    position: int = 0  # index of ``after`` in its series

    # the step's smallest sure size: nearest value after over nearest value before, so one
    # outlier in a window cannot inflate it
    least_ratio: float = 1.0
    # what the NumPy baselines did across the same commits: their ratios (a list), NUMPY_CHANGED,
    # or None (not a timing, or no baselines there)
    baselines: object = None
    # labels of the commits in the step's windows whose value of this benchmark was measured
    # while the machine's load record says it was busy
    under_load: list = field(default_factory=list)

    @property
    def ratio(self):
        return self.median_after / self.median_before

    @property
    def size(self):
        return abs(math.log(self.least_ratio))


STEP_RULE = (
    "A step is reported between two consecutive measured commits when (1) every value at up to "
    "{window} commits after it lies beyond every value at up to {window} commits before it "
    "(the change persists and is not a one-commit spike), (2) even the nearest two of those "
    "values differ by more than a factor {factor} (the \"at least\" in the change column; "
    "steps are ranked by it, and the ratio column is that of the medians), and (3) asv's own test "
    "(Mann-Whitney U on samples, else non-overlapping 99% confidence intervals, as asv compare "
    "uses) finds the two adjacent commits different. Windows never cross a change of the "
    "benchmark's code version. Of steps within {window} commits of each other in one series, "
    "only the largest is kept. Failed and skipped values are left out of the series. A step "
    "marked † has fewer than {window} commits after it (the newest ones): not yet confirmed."
)


def windows(points, before, after, window):
    """The points that judge a step from ``points[before]`` to ``points[after]``: up to
    ``window`` each side, ending at ``before`` and starting at ``after``, each of its end's
    code version."""
    left, right = points[before][1].version, points[after][1].version
    return ([p for p in points[max(0, before + 1 - window):before + 1] if p[1].version == left],
            [p for p in points[after:after + window] if p[1].version == right])


def series_steps(key, points, unit, window, factor, use_stats=True):
    """The steps of one series: ``points`` is [(Commit, Measurement)] oldest first, no missing
    values. ``use_stats=False`` leaves out rule (3), asv's test."""
    way = results.direction(unit, key.benchmark)
    candidates = []
    for j in range(1, len(points)):
        left, right = points[j - 1][1], points[j][1]
        if left.version != right.version:
            continue
        before, after = ([m.value for _, m in side] for side in windows(points, j - 1, j, window))
        if min(before) <= 0 or min(after) <= 0:
            continue  # ratios of non-positive values mean nothing (a count that reads 0)
        b, a = statistics.median(before), statistics.median(after)
        rising = a > b
        least = min(after) / max(before) if rising else max(after) / min(before)
        if factor >= least >= 1 / factor or (least > 1) != rising:
            continue  # within the factor, or the windows overlap
        if use_stats and not results.asv_says_different(left, right):
            continue
        candidates.append(Step(key, unit, points[j - 1][0], points[j][0], b, a, len(before),
                               len(after), worse=rising == way.higher_is_worse, direction=way,
                               position=j, least_ratio=least))
    kept = []
    for step in sorted(candidates, key=lambda s: -s.size):
        if not any(abs(step.position - k.position) <= window and k.worse == step.worse
                   for k in kept):
            kept.append(step)
    return kept


NUMPY_CHANGED = "numpy changed"


def baselines_across(step, baselines, numpy, window):
    """The NumPy baselines' ratios of medians across ``step``'s two commits, each baseline's
    windows taken as the step's are (up to ``window`` values each side, one code version):
    they moved with the host, not with JAX. ``baselines``: the history's series of
    ``time_numpy``; ``numpy``: {commit hash: {env: NumPy version}}. NUMPY_CHANGED when the
    windows do not all record one NumPy version; None when the step is not a timing or its
    environment has no baselines."""
    if step.unit != "seconds":
        return None
    ratios, versions = [], set()
    for key, points in baselines.items():
        if key.env != step.key.env or key == step.key:
            continue
        hashes = [c.hash for c, _ in points]
        if step.before.hash not in hashes or step.after.hash not in hashes:
            continue
        i, j = hashes.index(step.before.hash), hashes.index(step.after.hash)
        left, right = points[i][1], points[j][1]
        if left.version != right.version:
            continue
        before, after = windows(points, i, j, window)
        versions |= {numpy[c.hash].get(key.env) for c, _ in before + after}
        ratios.append(statistics.median(m.value for _, m in after)
                      / statistics.median(m.value for _, m in before))
    if not ratios:
        return None
    if len(versions) != 1 or None in versions:
        return NUMPY_CHANGED
    return ratios


@dataclass
class History:
    commits: list  # [results.Commit] measured, oldest first
    steps: list
    series: dict  # results.SeriesKey -> [(results.Commit, results.Measurement)] with values
    failed_newest: list  # results.SeriesKey failing at the newest measured commit
    counts: dict  # 'failed', 'skipped', 'off_branch'
    units: dict


def history(results_dir, machine, repo, branch="main", window=2, factor=1.1, use_stats=True):
    if window < 1:
        raise ReportError("--window must be 1 or more")
    if factor < 1:
        raise ReportError("--factor must be 1 or more (1.1 means 10% either way)")
    order = results.first_parent_commits(repo, branch)
    measured = results.load_measurements(results_dir, machine)
    if not measured:
        raise ReportError(f"no asv results for machine {machine!r} in {results_dir}")
    commits = [c for c in order if c.hash in measured]
    if not commits:
        raise ReportError(f"none of the {len(measured)} commits with results in {results_dir} "
                          f"is on {branch!r} of {repo}; pass the repository they were measured "
                          "from (--repo) and its branch (--branch)")
    units = results.load_units(results_dir)

    def unit(key):
        return results.unit_of(key.benchmark, units)

    counts = {"failed": 0, "skipped": 0,
              "off_branch": len(set(measured) - {c.hash for c in commits})}
    series = {}
    for commit in commits:
        for key, m in measured[commit.hash].items():
            if results.skipped(key.benchmark, unit(key)):
                continue
            if m.value is None:
                counts["failed"] += 1
            elif results.missing(m.value):
                counts["skipped"] += 1
            else:
                series.setdefault(key, []).append((commit, m))
    newest = measured[commits[-1].hash]
    failed_newest = sorted((k for k, m in newest.items()
                            if m.value is None and not results.skipped(k.benchmark, unit(k))),
                           key=_sort_key)
    steps = [s for key, points in series.items()
             for s in series_steps(key, points, unit(key), window, factor, use_stats)]
    baselines = {k: p for k, p in series.items() if results.is_baseline(k.benchmark)}
    numpy = {c.hash: results.numpy_versions(measured[c.hash]) for c in commits}
    loaded = {(r.commit_hash, name, r.env_name)
              for r, name, _ in results.measured_under_load(results_dir, machine)}
    for s in steps:
        s.baselines = baselines_across(s, baselines, numpy, window)
        s.under_load = [c.label for side in windows(series[s.key], s.position - 1, s.position,
                                                    window)
                        for c, _ in side if (c.hash, s.key.benchmark, s.key.env) in loaded]
    return History(commits, steps, series, failed_newest, counts, units)


# ---------------------------------------------------------------- markdown


def _sort_key(key):
    return (key.benchmark, key.params, key.env)


def _known(upstream):
    return len(upstream) >= 7 and upstream != "unknown"


def _upstream_cell(step):
    """The upstream commits of the releases around a step, linked to their diff on GitHub."""
    a, b = step.before.upstream, step.after.upstream
    if not (a or b):
        return "—"
    text = f"`{a[:8] or '?'}`…`{b[:8] or '?'}`"
    if _known(a) and _known(b):
        return f"[{text}]({UPSTREAM_URL}/compare/{a}...{b})"
    return text


# Where the suite's way of timing a phase changed with the release (the compat probes): a step
# across such a boundary is a change of method, not of JAX. (phase method, first release timed
# the new way, what changed)
METHOD_CHANGES = (
    ("time_trace", (0, 4, 29), "before jax 0.4.29 tracing is timed with jax.make_jaxpr, from "
     "0.4.29 with jax.jit(f).trace (the trace stage that lowering was split from)"),
)
# one JSON object a line, beside the machine's results (asv reads every .json file there)
VERIFIED_NAME = "verified.jsonl"


def _release(commit):
    """The release a release-history commit stands for, from its tag (jax-v0.4.29), or None."""
    label = commit.label
    return versions.release(label[len("jax-v"):]) if label.startswith("jax-v") else None


def method_change(step):
    """What changed in how ``step``'s phase is timed between its two commits, or None."""
    before, after = _release(step.before), _release(step.after)
    if before is None or after is None:
        return None
    for phase, first, what in METHOD_CHANGES:
        if step.key.phase == phase and before < first <= after:
            return what
    return None


def step_id(step):
    """The key under which a verification of ``step`` is recorded."""
    return f"{step.key.benchmark}{step.key.params}|{step.before.hash}|{step.after.hash}"


def load_verified(results_dir, machine):
    """{step_id: verification} that ``verify`` recorded for ``machine``, or {}."""
    path = os.path.join(results_dir, machine, VERIFIED_NAME)
    try:
        with open(path) as f:
            records = [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return {}
    return {r.pop("step"): r for r in records}


def write_verified(results_dir, machine, found):
    """Add ``found`` ({step_id: verification}) to the machine's record; returns its path."""
    kept = load_verified(results_dir, machine)
    kept.update(found)
    path = os.path.join(results_dir, machine, VERIFIED_NAME)
    with open(path, "w") as f:
        for step in sorted(kept):
            f.write(json.dumps(dict(kept[step], step=step), sort_keys=True) + "\n")
    return path


def _check_cell(step, verified):
    change = method_change(step)
    if change:
        return "method changed"
    found = verified.get(step_id(step))
    if found is None:
        return "—"
    if found["verdict"] in ("confirmed", "noise", "unresolved"):
        if "low" not in found:  # a value the same in each side's processes: no interval
            return f"{found['verdict']}: A/B {found['ratio']:.2f}× (steady values)"
        return (f"{found['verdict']}: A/B {found['ratio']:.2f}× "
                f"({found['low']:.2f}–{found['high']:.2f})")
    return markdown.cell(found["verdict"])


def _baselines_cell(step):
    found = step.baselines
    if found is None:
        return "—"
    if found == NUMPY_CHANGED:
        return "NumPy changed"
    # their median is the machine's: one baseline may move for its own reasons
    middle = statistics.median(found)
    as_far = middle >= step.least_ratio if step.least_ratio > 1 else middle <= step.least_ratio
    return (f"{middle:.2f} ({min(found):.2f}–{max(found):.2f}, {len(found)})"
            + (" **as far**" if as_far else ""))


def _steps_table(steps, window, show_env, verified=None, show_baselines=False):
    checks = verified is not None
    head = ("| # | benchmark | params | phase | releases | before | after | ratio | change "
            "| upstream commits |" + (" NumPy baselines there |" if show_baselines else "")
            + (" independent check |" if checks else ""))
    rows = [head, "|" + "---|" * (10 + show_baselines + checks)]
    for i, s in enumerate(steps, 1):
        dagger = " †" if s.n_after < window else ""
        if s.under_load:
            dagger += f" · busy at {', '.join(s.under_load)}"
        name = s.key.workload + (f" [{s.key.env}]" if show_env else "")
        word = s.direction.worse if s.worse else s.direction.better
        rows.append(
            f"| {i} | `{markdown.cell(name)}` | {markdown.cell(s.key.params) or '—'} | "
            f"`{s.key.phase}` | "
            f"{markdown.cell(s.before.label)} → {markdown.cell(s.after.label)}{dagger} | "
            f"{results.human(s.median_before, s.unit)} | {results.human(s.median_after, s.unit)} | "
            f"{s.ratio:.2f} | ≥{max(s.least_ratio, 1 / s.least_ratio):.2f}× {word} | "
            f"{_upstream_cell(s)} |" + (f" {_baselines_cell(s)} |" if show_baselines else "")
            + (f" {_check_cell(s, verified)} |" if checks else ""))
    return rows


def _phase_summary(report):
    phases = {}
    for key in report.series:
        phases.setdefault(key.phase, {"series": 0, "worse": [], "better": []})
        phases[key.phase]["series"] += 1
    for s in report.steps:
        phases[s.key.phase]["worse" if s.worse else "better"].append(s)

    def largest(steps):
        if not steps:
            return "—"
        s = max(steps, key=lambda s: s.size)
        where = markdown.cell(s.key.workload + s.key.params)
        return (f"{s.least_ratio:.2f} `{where}` "
                f"({s.after.label})")

    moved = sorted(phases.items(), key=lambda kv: -max(
        [s.size for s in kv[1]["worse"] + kv[1]["better"]], default=0))
    rows = ["| phase | series | regressions | improvements | largest regression (at least) "
            "| largest improvement (at least) |", "|" + "---|" * 6]
    for phase, p in moved:
        rows.append(f"| `{phase}` | {p['series']} | {len(p['worse'])} | {len(p['better'])} | "
                    f"{largest(p['worse'])} | {largest(p['better'])} |")
    return rows


def _machine_line(results_dir, machine):
    try:
        with open(os.path.join(results_dir, machine, "machine.json")) as f:
            info = json.load(f)
    except (OSError, ValueError):
        return f"machine `{machine}`"
    facts = ", ".join(str(info[k]) for k in ("cpu", "arch", "os") if info.get(k))
    cores = f", {info['num_cpu']} cores" if info.get("num_cpu") else ""
    return f"machine `{machine}` ({facts}{cores})" if facts else f"machine `{machine}`"


def history_markdown(report, *, results_dir, machine, repo, branch, top, window, factor,
                     use_stats=True, verified=None):
    envs = {k.env for k in report.series}
    show_env = len(envs) > 1
    show_baselines = any(results.is_baseline(k.benchmark) for k in report.series)
    first, last = report.commits[0], report.commits[-1]
    worse = sorted((s for s in report.steps if s.worse), key=lambda s: -s.size)
    better = sorted((s for s in report.steps if not s.worse), key=lambda s: -s.size)
    lines = [
        "# JAX performance across releases: the largest steps",
        "",
        f"{_machine_line(results_dir, machine)}; {len(report.commits)} measured commits on "
        f"`{branch}` of `{os.path.basename(os.path.abspath(repo))}`, from {first.label} to "
        f"{last.label}; {len(report.series)} series (benchmark × parameters"
        + (" × environment" if show_env else "") + f") with values; "
        f"{report.counts['failed']} failed and {report.counts['skipped']} skipped values left "
        "out" + (f"; {report.counts['off_branch']} measured commits not on the branch ignored"
                 if report.counts["off_branch"] else "") + ".",
        "",
        "**How a step is found.** " + STEP_RULE.format(window=window, factor=factor)
        + ("" if use_stats else " Rule (3) is off here (--no-stats): medians only."),
        "Ratios are after / before; version-tracking benchmarks (`bench_environment`) are not "
        "performance and are left out. `time_numpy` is NumPy's own time on the same inputs: a "
        "step there is the machine's noise, not JAX's, and a scale for the other steps.",
        "",
    ]
    if show_baselines:
        lines += [
            "**NumPy baselines there.** For a timing's step, the median of the other NumPy "
            "baselines' ratios of medians (`time_numpy`, no JAX in them) across the same two "
            "commits and windows, then their lowest–highest and how many: what the machine "
            "alone did there. **as far**: their median moved the same way at least as far as the "
            "step's smallest sure size, so the step may be the machine's; measure it again with "
            "`ab`. *NumPy changed*: the windows ran more than one NumPy version, so the "
            "baselines say nothing of the machine there.", ""]
    if any(s.under_load for s in report.steps):
        lines += [
            "**busy at** a release: the machine's load record (`quiet.jsonl` beside the "
            "results) says other processes used it while that release's value in the step's "
            "windows was measured. The step may be the load's; measure it again (`ab`).", ""]
    lines += [
        f"## Regressions ({len(worse)} found, top {min(top, len(worse))})",
        "",
    ]
    if verified is not None:
        lines[-2:-2] = [
            "**Independent check.** `verify` measured the steps again, apart from the history: "
            "an interleaved A/B (`ab`) of the two releases in fresh environments, processes "
            "taking turns, Hodges-Lehmann paired ratio with its 95% interval. *confirmed*: the "
            "A/B sees the change in the same direction beyond the factor; *noise*: it sees "
            "none; *unresolved*: the machine moved too much to decide; *method changed*: the "
            "suite times this phase differently across the step (" + "; ".join(
                what for _, _, what in METHOD_CHANGES) + "); —: not checked.", ""]
    lines += (_steps_table(worse[:top], window, show_env, verified, show_baselines) if worse
              else ["None found."])
    lines += ["", f"## Improvements ({len(better)} found, top {min(top, len(better))})", ""]
    lines += (_steps_table(better[:top], window, show_env, verified, show_baselines)
              if better else ["None found."])
    lines += ["", "## By phase (the phase that moved most first)", ""]
    lines += _phase_summary(report)
    lines += ["", f"## Failing at the newest measured commit ({last.label})", ""]
    if report.failed_newest:
        lines += [f"* `{markdown.cell(k.benchmark)}{markdown.cell(k.params)}`"
                  + (f" [{k.env}]" if show_env else "") for k in report.failed_newest]
    else:
        lines.append("None.")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- compare


@dataclass
class Change:
    key: results.SeriesKey
    unit: str
    before: object
    after: object
    mark: str  # asv's marks: '+' worse, '-' better, '!' broke, '*' fixed, 'x' not comparable,
    # ' ' unchanged or skipped; '?' an A/B left unresolved (its interval stayed too wide)
    # an interleaved A/B's paired ratio and its interval: (ratio, low, high)
    interval: tuple = None

    @property
    def ratio(self):
        if self.interval:
            return self.interval[0]
        if results.missing(self.before) or results.missing(self.after) or self.before == 0:
            return None
        return self.after / self.before


def compare(results_dir, machine, base, head, factor=1.1, use_stats=True, units=None,
            thresholds=None, found=None):
    """[Change] for every benchmark and parameter combination in either commit's results,
    classified as asv compare and asv continuous do; instruction counts at
    ``results.count_factor`` (``thresholds``: the config's regressions_thresholds).
    ``found``: the two commits' measurements, when the caller has read them already."""
    from asv.commands.compare import _is_result_better

    units = units if units is not None else results.load_units(results_dir)
    if found is None:
        found = results.load_measurements(results_dir, machine, [base, head])
    for name, commit in (("BASE", base), ("HEAD", head)):
        if commit not in found:
            raise ReportError(f"no results for {name} {commit[:12]} on machine {machine!r} in "
                              f"{results_dir}; run 'asv continuous BASE HEAD' first (without "
                              "--quick, which saves nothing)")
    one, two = found[base], found[head]

    def limit(key, unit):
        if unit == results.COUNT_UNIT:
            return results.count_factor(key.benchmark + key.params, thresholds)
        return factor

    changes = []
    for key in sorted(set(one) | set(two), key=_sort_key):
        unit = results.unit_of(key.benchmark, units)
        if results.skipped(key.benchmark, unit):
            continue
        absent = results.Measurement(math.nan)
        a, b = one.get(key, absent), two.get(key, absent)
        ss_a, ss_b = (a.stats, a.samples), (b.stats, b.samples)
        if a.version is not None and b.version is not None and a.version != b.version:
            mark = "x"
        elif a.value is not None and b.value is None:
            mark = "!"
        elif a.value is None and b.value is not None:
            mark = "*"
        elif results.missing(a.value) or results.missing(b.value):
            mark = " "
        elif _is_result_better(b.value, a.value, ss_b, ss_a, limit(key, unit),
                               use_stats=use_stats):
            mark = "-"
        elif _is_result_better(a.value, b.value, ss_a, ss_b, limit(key, unit),
                               use_stats=use_stats):
            mark = "+"
        else:
            mark = " "
        way = results.direction(unit, key.benchmark)
        if not way.higher_is_worse and mark in "+-":
            mark = "+" if mark == "-" else "-"  # a higher rate is better
        changes.append(Change(key, unit, a.value, b.value, mark))
    return changes


def compare_exit_code(changes):
    """2 when a benchmark failed at HEAD, 1 when one got worse beyond the factor, else 0."""
    if any(c.after is None for c in changes):
        return 2
    return 1 if any(c.mark == "+" for c in changes) else 0


def compare_markdown(changes, *, base_name, head_name, base, head, machine, factor, use_stats,
                     how=None):
    """The PR comment's table. ``how`` replaces the line on asv's statistics (an interleaved
    A/B says how it judged); rows with an interval show it."""
    show_env = len({c.key.env for c in changes}) > 1
    worse = sorted((c for c in changes if c.mark == "+"), key=_change_size, reverse=True)
    better = sorted((c for c in changes if c.mark == "-"), key=_change_size, reverse=True)
    broke = [c for c in changes if c.mark == "!"]
    fixed = [c for c in changes if c.mark == "*"]
    failed = [c for c in changes if c.after is None]
    unresolved = [c for c in changes if c.mark == "?"]
    rest = len(changes) - len(worse) - len(better) - len(broke) - len(fixed) - len(unresolved)
    code = compare_exit_code(changes)
    verdict = {2: "**A benchmark failed at HEAD.**", 1: "**Performance decreased.**",
               0: "No significant slowdown."}[code]
    lines = [
        f"### Benchmarks: {base_name} (`{base[:8]}`) → {head_name} (`{head[:8]}`)",
        "",
        f"{verdict} Machine `{machine}`, factor {factor}"
        + (f", {how}" if how else ", asv statistics" if use_stats else ", medians only")
        + f": {len(worse)} worse, "
        f"{len(better)} better, {len(broke)} newly failing, {len(fixed)} fixed, "
        + (f"{len(unresolved)} unresolved, " if unresolved else "")
        + f"{rest} unchanged or not comparable.",
        "",
    ]
    shown = worse + better + broke + fixed
    intervals = any(c.interval for c in shown)
    if shown:
        lines += ["| change | benchmark | before | after | ratio |"
                  + (" 95% interval |" if intervals else ""),
                  "|---|---|---|---|---|" + ("---|" if intervals else "")]
        for c in shown:
            way = results.direction(c.unit, c.key.benchmark)
            word = {"+": way.worse, "-": way.better, "!": "failed", "*": "fixed"}[c.mark]
            name = c.key.benchmark + c.key.params + (f" [{c.key.env}]" if show_env else "")
            ratio = f"{c.ratio:.2f}" if c.ratio is not None else "n/a"
            row = (f"| {word} | `{markdown.cell(name)}` | {results.human(c.before, c.unit)} | "
                   f"{results.human(c.after, c.unit)} | {ratio} |")
            if intervals:
                row += (f" {c.interval[1]:.3f}–{c.interval[2]:.3f} |" if c.interval
                        else " — |")
            lines.append(row)
    else:
        lines.append("No benchmark changed beyond the factor.")
    lines.append("")
    if unresolved:
        names = ", ".join(f"`{markdown.cell(c.key.benchmark + c.key.params)}` "
                          f"({c.interval[1]:.2f}–{c.interval[2]:.2f})" for c in unresolved)
        lines += [f"**Unresolved ({len(unresolved)}):** the machine moved these too much to "
                  f"decide within the rounds allowed (95% interval wider than the factor, or, in "
                  f"`ab`, a change a second series of rounds did not repeat): "
                  f"{names}", ""]
    if failed:
        names = ", ".join(f"`{markdown.cell(c.key.benchmark + c.key.params)}`" for c in failed)
        lines.append(f"**Failed at HEAD ({len(failed)}):** {names}")
    else:
        lines.append("**Failed at HEAD:** none.")
    return "\n".join(lines) + "\n"


def baselines_line(changes, factor, *, numpy_same, drift=None):
    """What the NumPy baselines, which no JAX commit moves, did in this comparison: their
    flags are the host's, and a JAX case's flag no larger than theirs may be the host's too.
    None without baselines, or unless both sides ran one NumPy (``numpy_same``). ``drift``:
    the ratio an A/B divided out of the JAX cases, which is the baselines' own."""
    # 'x': the baseline's own code changed between the commits, so not the host's alone
    judged = [c for c in changes if results.is_baseline(c.key.benchmark)
              and c.unit == "seconds" and c.ratio is not None and c.mark != "x"]
    if not judged or not numpy_same:
        return None
    flagged = [c for c in judged if c.mark in "+-"]
    unresolved = sum(c.mark == "?" for c in judged)
    ratios = [c.ratio for c in judged]
    kind = ("paired ratios" if all(c.interval for c in judged)
            else "ratios of medians (HEAD / BASE)")
    line = (f"**NumPy baselines** (`{results.CONTROL_PHASE}`, no JAX in them: the host's own "
            f"noise in this comparison): {len(flagged)} of {len(judged)} flagged at {factor}"
            + (f", {unresolved} unresolved" if unresolved else "")
            + f"; their {kind} {min(ratios):.3f}–{max(ratios):.3f}"
            # the drift is their pooled ratio: dividing them by it would hide what it measured
            + (" as measured, not divided by the drift (it is theirs)." if drift else "."))
    if flagged:
        line += (" The host moved plain compute beyond the factor in this comparison: a JAX "
                 "case flagged by no more than the baselines' largest may be the host's; "
                 "compare again at a quieter hour.")
    return line


def load_line(changes, under_load, base, head):
    """Which compared cases of each side the machine's load record (``quiet.jsonl`` beside the
    results) says were measured while other processes used the machine, and which of them are
    flagged; None where none was. ``under_load``: ``results.measured_under_load``'s list."""
    loaded = {}  # (commit, benchmark, environment) -> the busy run's record
    for result, name, record in under_load:
        loaded[(result.commit_hash, name, result.env_name)] = record
    sides, records, flagged = [], {}, []
    for label, commit in (("BASE", base), ("HEAD", head)):
        hit = [c for c in changes if (commit, c.key.benchmark, c.key.env) in loaded]
        if not hit:
            continue
        sides.append(f"{label} (`{commit[:8]}`) {len(hit)} of {len(changes)} cases")
        for c in hit:
            record = loaded[(commit, c.key.benchmark, c.key.env)]
            records[(record.command, record.started)] = record
            if c.mark in "+-" and c not in flagged:
                flagged.append(c)
    if not sides:
        return None
    runs = "; ".join(f"`{r.command}` from {r.started[:19]}: {r.summary()}"
                     for r in records.values())
    line = (f"**Measured under load:** {', '.join(sides)} ran while the machine's load record "
            f"(`{quiet.RECORD_NAME}` beside the results) says other processes used it ({runs}). ")
    if flagged:
        names = ", ".join(f"`{markdown.cell(c.key.benchmark + c.key.params)}` ({c.ratio:.2f})"
                          for c in flagged)
        line += (f"Flagged among them ({len(flagged)}): {names}; their ratios may be the load's: "
                 "measure them again with `ab`.")
    else:
        line += "None of them is flagged here."
    return line


def same_numpy(found, base, head):
    """Whether both commits' measurements (``found``, as ``results.load_measurements`` gives
    them) record one NumPy version (``track_numpy_version``) in every environment; False when
    either has none, since then the baselines may measure a NumPy change rather than the
    host."""
    recorded = results.numpy_versions(found.get(base, {}))
    return bool(recorded) and recorded == results.numpy_versions(found.get(head, {}))


def _change_size(change):
    """How far a change went, either way: |log ratio|."""
    ratio = change.ratio
    return abs(math.log(ratio)) if ratio else 0.0


# ---------------------------------------------------------------- command line


def history_main(argv):
    parser = argparse.ArgumentParser(prog="python -m jaxbench_helpers report",
                                     description="The largest persistent steps between "
                                     "consecutive measured releases, as Markdown.")
    parser.add_argument("--results-dir", default=paths.RESULTS)
    parser.add_argument("--machine", help="machine under --results-dir (default: the only one)")
    parser.add_argument("--repo", default=paths.HISTORY_REPO,
                        help="the git repository of the measured commits (default: the "
                        "release-history repository the main job builds)")
    parser.add_argument("--branch", default="main")
    parser.add_argument("--top", type=int, default=10, help="rows per table (default 10)")
    parser.add_argument("--window", type=int, default=2,
                        help="commits on each side of a step whose medians are compared")
    parser.add_argument("--factor", type=float, default=1.1,
                        help="smallest change reported, as a ratio (default 1.1)")
    parser.add_argument("--no-stats", dest="use_stats", action="store_false",
                        help="leave out asv's statistical test (rule 3): medians only")
    parser.add_argument("--output", "-o", help="Markdown file (default: standard output)")
    args = parser.parse_args(argv)
    machine = results.pick_machine(args.results_dir, args.machine)
    report = history(args.results_dir, machine, args.repo, args.branch, args.window,
                     args.factor, args.use_stats)
    verified = load_verified(args.results_dir, machine)
    markdown.write(history_markdown(report, results_dir=args.results_dir, machine=machine,
                                    repo=args.repo, branch=args.branch, top=args.top,
                                    window=args.window, factor=args.factor,
                                    use_stats=args.use_stats,
                                    verified=verified or None), args.output)
    return 0


def compare_main(argv):
    parser = argparse.ArgumentParser(
        prog="python -m jaxbench_helpers report compare",
        description="Two commits' saved asv results as a pull-request comment (Markdown). "
        "Exit 1: a benchmark got worse beyond --factor; 2: a benchmark failed at HEAD.")
    parser.add_argument("base", help="the reference commit (name or hash)")
    parser.add_argument("head", help="the commit under test")
    parser.add_argument("--config", help="the asv config the results were made with (gives "
                        "the results folder and repository)")
    parser.add_argument("--results-dir", help="instead of --config")
    parser.add_argument("--repo", help="instead of --config: resolves BASE and HEAD names")
    parser.add_argument("--machine")
    parser.add_argument("--factor", type=float, default=1.1,
                        help="as asv continuous --factor (default 1.1)")
    parser.add_argument("--no-stats", dest="use_stats", action="store_false",
                        help="compare medians only, as asv --no-stats")
    parser.add_argument("--output", "-o", help="Markdown file (default: standard output)")
    args = parser.parse_args(argv)
    results_dir, repo = args.results_dir, args.repo
    if args.config:
        conf = asvconfig.load(args.config)
        results_dir, repo = results_dir or conf["results_dir"], repo or conf["repo"]
        thresholds = conf.get("regressions_thresholds", {})
    else:
        thresholds = asvconfig.read(paths.CONFIG).get("regressions_thresholds", {})
    if not results_dir:
        raise ReportError("pass --config (the asv config) or --results-dir")
    machine = results.pick_machine(results_dir, args.machine)
    hashes = []
    for name in (args.base, args.head):
        if repo and os.path.isdir(repo):
            hashes.append(results.resolve(repo, name))
        else:  # a remote repository: match a hash prefix against the saved results
            from asv.results import get_result_hash_from_prefix

            short = get_result_hash_from_prefix(results_dir, machine, name)
            full = next((c for c in results.load_measurements(results_dir, machine)
                         if short and c.startswith(short)), None)
            if not full:
                raise ReportError(f"{name!r} matches no results in {results_dir}; pass a hash, "
                                  "or --repo with a local clone to resolve names")
            hashes.append(full)
    # every result file of the machine is read to find the two commits': read them once
    found = results.load_measurements(results_dir, machine, hashes)
    changes = compare(results_dir, machine, *hashes, factor=args.factor,
                      use_stats=args.use_stats, thresholds=thresholds, found=found)
    text = compare_markdown(changes, base_name=args.base, head_name=args.head, base=hashes[0],
                            head=hashes[1], machine=machine, factor=args.factor,
                            use_stats=args.use_stats)
    notes = [baselines_line(changes, args.factor, numpy_same=same_numpy(found, *hashes)),
             load_line(changes, results.measured_under_load(results_dir, machine), *hashes)]
    markdown.write(text + "".join(f"\n{note}\n" for note in notes if note), args.output)
    return compare_exit_code(changes)


def load_markdown(records, source):
    """The load records as a table: each timing run, how much of the machine others used, and
    which rule, if any, calls it under load."""
    lines = [f"# Load records: `{source}`", "",
             f"A run reads quiet when other processes used at most "
             f"{markdown.percent(quiet.BUSY_LIMIT)} of the machine's CPU time over it and their "
             f"bursts, their time beyond {markdown.percent(quiet.SPELL_LIMIT)} in the one-second "
             f"samples above it (busy seconds), are at most "
             f"{markdown.percent(quiet.BURST_SHARE)} of it. ≤: a record from before bursts were "
             "kept, judged by their bound. What a run marks: all its timed benchmarks under "
             "others overall, the ones its spells overlap under bursts alone, and in a quiet run "
             f"the ones its strong spells overlap, those where others reached "
             f"{markdown.percent(quiet.RING_PEAK)} of the machine.", "",
             "| command | started | minutes | others | steal | busy seconds | bursts "
             "| verdict | busiest |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in records:
        bound = "≤ " if r.burst_seconds is None else ""
        verdict = ("unfinished" if not r.ended else "quiet" if r.quiet
                   else f"UNDER LOAD: {', '.join(r.load_reasons)}")
        if r.ended and r.quiet and r.strong_spells:
            verdict += f", {markdown.counted(len(r.strong_spells), 'strong spell')}"
        lines.append(f"| `{markdown.cell(r.command)}` | {r.started[:19]} | {r.seconds / 60:.1f} "
                     f"| {markdown.percent(r.others_share)} | {markdown.percent(r.steal_share)} "
                     f"| {r.busy_seconds} | {bound}{100 * r.burst_share:.2f}% | {verdict} "
                     f"| {markdown.cell(', '.join(r.busiest)) or '—'} |")
    loaded = sum(1 for r in records if r.ended and not r.quiet)
    lines += ["", f"{loaded} of {len(records)} runs under load."]
    return "\n".join(lines) + "\n"


def load_main(argv):
    parser = argparse.ArgumentParser(
        prog="python -m jaxbench_helpers report load",
        description="The load record beside a machine's results (quiet.jsonl): each timing "
        "run, how busy the rest of the machine was, and why the dashboard rings its points.")
    parser.add_argument("--results-dir", default=paths.RESULTS)
    parser.add_argument("--machine", help="machine under --results-dir (default: the only one)")
    parser.add_argument("--record", help=f"a {quiet.RECORD_NAME} file instead (as sensitivity "
                        "and calibrate write in their work folders)")
    parser.add_argument("--output", "-o", help="Markdown file (default: standard output)")
    args = parser.parse_args(argv)
    path = args.record or os.path.join(
        args.results_dir, results.pick_machine(args.results_dir, args.machine),
        quiet.RECORD_NAME)
    if not os.path.isfile(path):
        raise ReportError(f"no load record at {path}: a timing command writes "
                          f"{quiet.RECORD_NAME} beside the results it makes")
    try:
        text = load_markdown(quiet.read_records(path), path)
    except (ValueError, TypeError, AttributeError) as err:
        raise ReportError(f"{path} is not a load record ({err}); its lines are the JSON "
                          "records timing commands write") from None
    markdown.write(text, args.output)
    return 0


def main(argv=None):
    from asv.util import UserError

    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["load"]:
        try:
            return load_main(argv[1:])
        except (ReportError, OSError) as err:
            print(f"jaxbench report: {err}", file=sys.stderr)
            return 1
    comparing = bool(argv) and argv[0] == "compare"
    try:
        return compare_main(argv[1:]) if comparing else history_main(argv)
    except (ReportError, asvconfig.ConfigError, UserError) as err:
        print(f"jaxbench report: {err}", file=sys.stderr)
        # compare's 1 and 2 mean slower and failed: an input error must not look like either
        return 3 if comparing else 1


if __name__ == "__main__":
    sys.exit(main())

