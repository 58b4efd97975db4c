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
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_REPO = os.path.join(ROOT, ".asv", "jax-releases")
DEFAULT_RESULTS = os.path.join(ROOT, "results")
UPSTREAM_URL = "https://github.com/jax-ml/jax"
UPSTREAM_LINE = "Upstream commit:"
# facts about the environment, not performance: a new release changes them by design
SKIPPED_UNITS = ("version",)
SKIPPED_MODULES = ("bench_environment",)


class ReportError(ValueError):
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


def skipped(name, unit):
    return unit in SKIPPED_UNITS or name.split(".", 1)[0] in SKIPPED_MODULES


# ---------------------------------------------------------------- git


def _git(repo, *args):
    try:
        proc = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True)
    except FileNotFoundError as err:
        raise ReportError("git is not installed (or not on PATH)") from err
    if proc.returncode:
        raise ReportError(f"git {' '.join(args)} failed in {repo}: {proc.stderr.strip()}")
    return proc.stdout


@dataclass(frozen=True)
class Commit:
    hash: str
    label: str  # the tag (jax-v0.10.2) or the short hash and subject
    upstream: str  # the upstream JAX commit it stands for ('' when unknown)


def first_parent_commits(repo, branch):
    """[Commit] along ``branch``'s first-parent history, oldest first."""
    if not os.path.isdir(repo):
        raise ReportError(f"--repo {repo} is not a folder; pass the release-history repository "
                          "(python -m jaxbench_helpers history) or a JAX clone")
    tags = {}
    for line in _git(repo, "for-each-ref", "--format=%(objectname) %(*objectname) "
                     "%(refname:short)", "refs/tags").splitlines():
        obj, peeled, name = line.split(" ", 2)
        tags.setdefault(peeled or obj, []).append(name)
    try:
        log = _git(repo, "log", "--first-parent", "--reverse", "--format=%H%x1f%s%x1f%B%x1e",
                   branch, "--")
    except ReportError as err:
        raise ReportError(f"{err}\nIs {branch!r} a branch of {repo}? Pass --branch") from None
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
    except ReportError:
        raise ReportError(f"{name!r} names no commit in {repo}") from None


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


def machine_name(given=None):
    """The machine name results go under: ``given`` (--machine), else JAXBENCH_MACHINE, else
    the host name."""
    import platform as host

    return given or os.environ.get("JAXBENCH_MACHINE") or host.node()


def machines(results_dir):
    if not os.path.isdir(results_dir):
        raise ReportError(f"--results-dir {results_dir} is not a folder of asv results")
    return sorted(d for d in os.listdir(results_dir)
                  if os.path.exists(os.path.join(results_dir, d, "machine.json")))


def pick_machine(results_dir, machine):
    found = machines(results_dir)
    if machine:
        if machine not in found:
            raise ReportError(f"no results for machine {machine!r} in {results_dir}; it has "
                              f"{', '.join(found) or 'none'}")
        return machine
    if len(found) != 1:
        raise ReportError(f"{results_dir} has results for {len(found)} machines "
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


def missing(value):
    """None (failed) or NaN (skipped)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


# ---------------------------------------------------------------- step detection


@dataclass
class Step:
    key: SeriesKey
    unit: str
    before: Commit  # the last measured commit before the step
    after: Commit  # the first measured commit after it
    median_before: float
    median_after: float
    n_before: int  # commits in the window before the step
    n_after: int
    worse: bool
    direction: Direction = field(repr=False, default=None)
    position: int = 0  # index of ``after`` in its series

    # the step's smallest sure size: nearest value after over nearest value before, so one
    # outlier in a window cannot inflate it
    least_ratio: float = 1.0

    @property
    def ratio(self):
        return self.median_after / self.median_before

    @property
    def size(self):
        return abs(math.log(self.least_ratio))


def asv_says_different(a, b):
    """asv's own test (the one asv compare uses) on two adjacent measurements; True when it
    cannot tell, because either has no statistics."""
    try:
        from asv import _stats
    except ImportError:  # asv's statistics moved: the window rule alone decides
        return True
    if not (a.stats and b.stats) or 1 in (a.stats.get("repeat"), b.stats.get("repeat")):
        return True
    return _stats.is_different(a.samples, b.samples, a.stats, b.stats)


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


def series_steps(key, points, unit, window, factor, use_stats=True):
    """The steps of one series: ``points`` is [(Commit, Measurement)] oldest first, no missing
    values. ``use_stats=False`` leaves out rule (3), asv's test."""
    way = direction(unit, key.benchmark)
    candidates = []
    for j in range(1, len(points)):
        left, right = points[j - 1][1], points[j][1]
        if left.version != right.version:
            continue
        before = [m.value for _, m in points[max(0, j - window):j] if m.version == left.version]
        after = [m.value for _, m in points[j:j + window] if m.version == right.version]
        b, a = statistics.median(before), statistics.median(after)
        if b <= 0 or a <= 0:
            continue  # ratios of non-positive values mean nothing
        rising = a > b
        least = min(after) / max(before) if rising else max(after) / min(before)
        if factor >= least >= 1 / factor or (least > 1) != rising:
            continue  # within the factor, or the windows overlap
        if use_stats and not asv_says_different(left, right):
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


@dataclass
class History:
    commits: list  # [Commit] measured, oldest first
    steps: list
    series: dict  # SeriesKey -> [(Commit, Measurement)] with values
    failed_newest: list  # SeriesKey failing at the newest measured commit
    counts: dict  # 'failed', 'skipped', 'off_branch'
    units: dict


def history(results_dir, machine, repo, branch="main", window=2, factor=1.1, use_stats=True):
    if window < 1:
        raise ReportError("--window must be 1 or more")
    if factor < 1:
        raise ReportError("--factor must be 1 or more (1.1 means 10% either way)")
    order = first_parent_commits(repo, branch)
    measured = load_measurements(results_dir, machine)
    if not measured:
        raise ReportError(f"no asv results for machine {machine!r} in {results_dir}")
    commits = [c for c in order if c.hash in measured]
    if not commits:
        raise ReportError(f"none of the {len(measured)} commits with results in {results_dir} "
                          f"is on {branch!r} of {repo}; pass the repository they were measured "
                          "from (--repo) and its branch (--branch)")
    units = load_units(results_dir)
    counts = {"failed": 0, "skipped": 0,
              "off_branch": len(set(measured) - {c.hash for c in commits})}
    series = {}
    for commit in commits:
        for key, m in measured[commit.hash].items():
            if skipped(key.benchmark, unit_of(key.benchmark, units)):
                continue
            if m.value is None:
                counts["failed"] += 1
            elif missing(m.value):
                counts["skipped"] += 1
            else:
                series.setdefault(key, []).append((commit, m))
    newest = measured[commits[-1].hash]
    failed_newest = sorted((k for k, m in newest.items()
                            if m.value is None and not skipped(k.benchmark, unit_of(
                                k.benchmark, units))), key=_sort_key)
    steps = [s for key, points in series.items()
             for s in series_steps(key, points, unit_of(key.benchmark, units), window, factor,
                                   use_stats)]
    return History(commits, steps, series, failed_newest, counts, units)


# ---------------------------------------------------------------- markdown


def _sort_key(key):
    return (key.benchmark, key.params, key.env)


def _cell(text):
    return str(text).replace("|", "\\|")


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


def _steps_table(steps, window, show_env):
    head = ("| # | benchmark | params | phase | releases | before | after | ratio | change "
            "| upstream commits |")
    rows = [head, "|" + "---|" * 10]
    for i, s in enumerate(steps, 1):
        dagger = " †" if s.n_after < window else ""
        name = s.key.workload + (f" [{s.key.env}]" if show_env else "")
        word = s.direction.worse if s.worse else s.direction.better
        rows.append(
            f"| {i} | `{_cell(name)}` | {_cell(s.key.params) or '—'} | `{s.key.phase}` | "
            f"{_cell(s.before.label)} → {_cell(s.after.label)}{dagger} | "
            f"{human(s.median_before, s.unit)} | {human(s.median_after, s.unit)} | "
            f"{s.ratio:.2f} | ≥{max(s.least_ratio, 1 / s.least_ratio):.2f}× {word} | "
            f"{_upstream_cell(s)} |")
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
        return (f"{s.least_ratio:.2f} `{_cell(s.key.workload)}{_cell(s.key.params)}` "
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
                     use_stats=True):
    envs = {k.env for k in report.series}
    show_env = len(envs) > 1
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
        f"## Regressions ({len(worse)} found, top {min(top, len(worse))})",
        "",
    ]
    lines += _steps_table(worse[:top], window, show_env) if worse else ["None found."]
    lines += ["", f"## Improvements ({len(better)} found, top {min(top, len(better))})", ""]
    lines += _steps_table(better[:top], window, show_env) if better else ["None found."]
    lines += ["", "## By phase (the phase that moved most first)", ""]
    lines += _phase_summary(report)
    lines += ["", f"## Failing at the newest measured commit ({last.label})", ""]
    if report.failed_newest:
        lines += [f"* `{_cell(k.benchmark)}{_cell(k.params)}`"
                  + (f" [{k.env}]" if show_env else "") for k in report.failed_newest]
    else:
        lines.append("None.")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- compare


@dataclass
class Change:
    key: SeriesKey
    unit: str
    before: object
    after: object
    mark: str  # asv's marks: '+' worse, '-' better, '!' broke, '*' fixed, 'x' not comparable,
    # ' ' unchanged or skipped

    @property
    def ratio(self):
        if missing(self.before) or missing(self.after) or self.before == 0:
            return None
        return self.after / self.before


def compare(results_dir, machine, base, head, factor=1.1, use_stats=True, units=None):
    """[Change] for every benchmark and parameter combination in either commit's results,
    classified as asv compare and asv continuous do."""
    from asv.commands.compare import _is_result_better

    units = units if units is not None else load_units(results_dir)
    found = load_measurements(results_dir, machine, [base, head])
    for name, commit in (("BASE", base), ("HEAD", head)):
        if commit not in found:
            raise ReportError(f"no results for {name} {commit[:12]} on machine {machine!r} in "
                              f"{results_dir}; run 'asv continuous BASE HEAD' first (without "
                              "--quick, which saves nothing)")
    one, two = found[base], found[head]
    changes = []
    for key in sorted(set(one) | set(two), key=_sort_key):
        unit = unit_of(key.benchmark, units)
        if skipped(key.benchmark, unit):
            continue
        a, b = one.get(key, Measurement(math.nan)), two.get(key, Measurement(math.nan))
        ss_a, ss_b = (a.stats, a.samples), (b.stats, b.samples)
        if a.version is not None and b.version is not None and a.version != b.version:
            mark = "x"
        elif a.value is not None and b.value is None:
            mark = "!"
        elif a.value is None and b.value is not None:
            mark = "*"
        elif missing(a.value) or missing(b.value):
            mark = " "
        elif _is_result_better(b.value, a.value, ss_b, ss_a, factor, use_stats=use_stats):
            mark = "-"
        elif _is_result_better(a.value, b.value, ss_a, ss_b, factor, use_stats=use_stats):
            mark = "+"
        else:
            mark = " "
        way = direction(unit, key.benchmark)
        if not way.higher_is_worse and mark in "+-":
            mark = "+" if mark == "-" else "-"  # a higher rate is better
        changes.append(Change(key, unit, a.value, b.value, mark))
    return changes


def compare_exit_code(changes):
    """2 when a benchmark failed at HEAD, 1 when one got worse beyond the factor, else 0."""
    if any(c.after is None for c in changes):
        return 2
    return 1 if any(c.mark == "+" for c in changes) else 0


def compare_markdown(changes, *, base_name, head_name, base, head, machine, factor, use_stats):
    show_env = len({c.key.env for c in changes}) > 1
    worse = sorted((c for c in changes if c.mark == "+"), key=_change_size, reverse=True)
    better = sorted((c for c in changes if c.mark == "-"), key=_change_size, reverse=True)
    broke = [c for c in changes if c.mark == "!"]
    fixed = [c for c in changes if c.mark == "*"]
    failed = [c for c in changes if c.after is None]
    rest = len(changes) - len(worse) - len(better) - len(broke) - len(fixed)
    code = compare_exit_code(changes)
    verdict = {2: "**A benchmark failed at HEAD.**", 1: "**Performance decreased.**",
               0: "No significant slowdown."}[code]
    lines = [
        f"### Benchmarks: {base_name} (`{base[:8]}`) → {head_name} (`{head[:8]}`)",
        "",
        f"{verdict} Machine `{machine}`, factor {factor}"
        + (", asv statistics" if use_stats else ", medians only") + f": {len(worse)} worse, "
        f"{len(better)} better, {len(broke)} newly failing, {len(fixed)} fixed, {rest} unchanged "
        "or not comparable.",
        "",
    ]
    shown = worse + better + broke + fixed
    if shown:
        lines += ["| change | benchmark | before | after | ratio |", "|---|---|---|---|---|"]
        for c in shown:
            way = direction(c.unit, c.key.benchmark)
            word = {"+": way.worse, "-": way.better, "!": "failed", "*": "fixed"}[c.mark]
            name = c.key.benchmark + c.key.params + (f" [{c.key.env}]" if show_env else "")
            ratio = f"{c.ratio:.2f}" if c.ratio is not None else "n/a"
            lines.append(f"| {word} | `{_cell(name)}` | {human(c.before, c.unit)} | "
                         f"{human(c.after, c.unit)} | {ratio} |")
    else:
        lines.append("No benchmark changed beyond the factor.")
    lines.append("")
    if failed:
        names = ", ".join(f"`{_cell(c.key.benchmark + c.key.params)}`" for c in failed)
        lines.append(f"**Failed at HEAD ({len(failed)}):** {names}")
    else:
        lines.append("**Failed at HEAD:** none.")
    return "\n".join(lines) + "\n"


def _change_size(change):
    """How far a change went, either way: |log ratio|."""
    ratio = change.ratio
    return abs(math.log(ratio)) if ratio else 0.0


# ---------------------------------------------------------------- command line


def _write(text, output):
    if output:
        os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
        with open(output, "w") as f:
            f.write(text)
        print(f"jaxbench report: wrote {output}", file=sys.stderr)
    else:
        sys.stdout.write(text)


def history_main(argv):
    parser = argparse.ArgumentParser(prog="python -m jaxbench_helpers report",
                                     description="The largest persistent steps between "
                                     "consecutive measured releases, as Markdown.")
    parser.add_argument("--results-dir", default=DEFAULT_RESULTS)
    parser.add_argument("--machine", help="machine under --results-dir (default: the only one)")
    parser.add_argument("--repo", default=DEFAULT_REPO,
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
    machine = pick_machine(args.results_dir, args.machine)
    report = history(args.results_dir, machine, args.repo, args.branch, args.window,
                     args.factor, args.use_stats)
    _write(history_markdown(report, results_dir=args.results_dir, machine=machine,
                            repo=args.repo, branch=args.branch, top=args.top,
                            window=args.window, factor=args.factor,
                            use_stats=args.use_stats), args.output)
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
        from asv.config import Config

        conf = Config.load(args.config)
        results_dir, repo = results_dir or conf.results_dir, repo or conf.repo
    if not results_dir:
        raise ReportError("pass --config (the asv config) or --results-dir")
    machine = pick_machine(results_dir, args.machine)
    hashes = []
    for name in (args.base, args.head):
        if repo and os.path.isdir(repo):
            hashes.append(resolve(repo, name))
        else:  # a remote repository: match a hash prefix against the saved results
            from asv.results import get_result_hash_from_prefix

            short = get_result_hash_from_prefix(results_dir, machine, name)
            full = next((c for c in load_measurements(results_dir, machine)
                         if short and c.startswith(short)), None)
            if not full:
                raise ReportError(f"{name!r} matches no results in {results_dir}; pass a hash, "
                                  "or --repo with a local clone to resolve names")
            hashes.append(full)
    changes = compare(results_dir, machine, *hashes, factor=args.factor,
                      use_stats=args.use_stats)
    _write(compare_markdown(changes, base_name=args.base, head_name=args.head, base=hashes[0],
                            head=hashes[1], machine=machine, factor=args.factor,
                            use_stats=args.use_stats), args.output)
    return compare_exit_code(changes)


def main(argv=None):
    from asv.util import UserError

    argv = sys.argv[1:] if argv is None else list(argv)
    comparing = bool(argv) and argv[0] == "compare"
    try:
        return compare_main(argv[1:]) if comparing else history_main(argv)
    except (ReportError, UserError) as err:
        print(f"jaxbench report: {err}", file=sys.stderr)
        # compare's 1 and 2 mean slower and failed: an input error must not look like either
        return 3 if comparing else 1


if __name__ == "__main__":
    sys.exit(main())
