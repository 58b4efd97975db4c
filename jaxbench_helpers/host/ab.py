"""Interleaved A/B comparison of two JAX commits: the verdict a noisy machine cannot fake.

``asv continuous BASE HEAD`` measures every benchmark at BASE, then every benchmark at HEAD:
whatever the machine did in between (a neighbour on the host, a short command) lands in the
verdict. Here both commits are installed once, each in its own environment with its own asv
fork servers, and for each benchmark the processes of the two sides take turns seconds apart,
in ABBA order, round after round::

    python -m jaxbench_helpers ab BASE HEAD [--config C] [-b REGEX]... [--factor 1.10]
        [--max-rounds 16] [--servers N] [--machine NAME] [--results-dir DIR] [-o report.md]

A round gives one paired log-ratio per case (ln of B's median over A's, both measured within
seconds); the verdict is the Hodges-Lehmann estimate of those with its 95% interval
(``analysis.paired``), after dividing out the drift both sides share (the paired ratio of the
NumPy baselines, which no JAX change can move, when both sides run the same NumPy).

Round r forks its processes from each side's server r (started when a case first reaches that
round; ``--servers N`` reuses them, round r on server r mod N). A forked process inherits its
server's address-space layout and heap, and a case can run at one of two speeds fixed by them:
with one server a side every round repeated the servers' draw, and an A/A flagged such a draw
as a change (0.78x, then 1.34x with new servers); with six servers reused over 16 rounds the
rounds were only six draws, and one flag remained. A server per round makes the rounds
independent, as the interval assumes. A case
gets rounds until its interval is narrower than the threshold, or lies wholly beyond it, or
``--max-rounds`` is reached. Instruction counts are measured once per side (they cost minutes
and have their own thresholds); other values (``track_*``, ``peakmem_*``) twice per side, and
when a side's two values differ (a bandwidth: it varies between processes) they get rounds and
a paired verdict like a timing; when each side is steady but the sides differ, the value is
measured again in new interpreters (a forked process inherits its server's heap), the same way.
A case the rounds flag gets a second series of rounds, every process a new interpreter, and is
a change only when that series marks it the same way too; otherwise it is unresolved.

The results are asv results (both commits, every sample), so ``asv compare``, ``report
compare`` and the dashboard read them; the Markdown table and exit codes are those of
``report compare``: 1 when a benchmark got slower beyond the factor, 2 when one failed at
HEAD, 3 when it cannot compare, 4 when the machine is busy.

Each side's shared objects are written afresh whenever its fork servers start
(``pagecache``): an environment installed hours before the other held jaxlib's code in
scattered pages, and a fresh one compiled 8-13% faster for that alone.

``--same COMMIT`` compares a commit with itself (two separate builds): the A/A test of the
procedure on this machine.
"""

import argparse
import datetime
import itertools
import json
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field

from ..analysis import paired, report, results
from ..common import asvconfig, machine, markdown, quiet
from ..common.machine import ensure_described, machine_name
from ..install import pagecache
from . import pythons

DEFAULT_FACTOR = 1.10
MAX_ROUNDS = 16
# samples per process of a warm phase: many short processes beat few long ones here, because
# the process, not the sample, is what the machine moves
WARM_REPEAT = (5, 10, 1.0)
# samples per process of a `timeraw_*` case: each sample is a new interpreter already, so a
# round needs few; ten or more made the startup cases a fifth of a whole-suite A/A
# (results/AA.md)
NEW_INTERPRETER_REPEAT = (3, 3, 10.0)

class ABError(RuntimeError):
    pass


# ---------------------------------------------------------------- the two sides


@dataclass
class Side:
    """One commit, installed in its own environment, with its own pool of fork servers."""

    label: str  # "A" (base) or "B" (head)
    name: str  # as the user gave it
    commit: str
    env: object
    servers: list = field(default_factory=list)  # fork servers; round r uses r mod server_cap
    server_cap: int = MAX_ROUNDS
    benchmark_dir: str = None
    new_interpreter: object = None  # a spawner that starts a new interpreter every process
    cache_dirs: dict = field(default_factory=dict)
    cache_failed: dict = field(default_factory=dict)


def _side_config(conf_path, env_dir, results_dir):
    """The asv Config of ``conf_path`` with its own environment and results folders."""
    from asv.config import Config

    conf = Config.load(conf_path)
    conf.env_dir = env_dir
    conf.results_dir = results_dir
    return conf


def _environment(conf):
    from asv import environment

    found = list(environment.get_environments(conf, None))
    if len(found) != 1:
        names = ", ".join(e.name for e in found)
        raise ABError(f"the config gives {len(found)} environments ({names}); an A/B "
                      "comparison needs exactly one: derive a config with one profile and one "
                      "platform (python -m jaxbench_helpers config --profile ... --platform ...)")
    return found[0]


def build_side(label, name, commit, conf, repo, say):
    """Create the side's environment and install ``commit`` into it (once: an environment
    that already holds the commit is kept)."""
    env = _environment(conf)
    say(f"jaxbench ab: {label} = {name} ({commit[:8]}): environment {env.dir_name} in "
        f"{conf.env_dir}")
    env.create()
    env.install_project(conf, repo, commit)
    return Side(label, name, commit, env)


def write_afresh(label, env, say):
    """The environment's shared objects rewritten, so both sides' code lies in memory alike
    however long ago each was installed (``pagecache``)."""
    say(f"jaxbench ab: {label}: {pagecache.written_afresh(env._path)}")


def open_spawner(side, benchmark_dir, servers, say=print):
    """Write ``side``'s shared objects afresh, then start its first fork server on them; the
    others start when a round first needs them. ``servers``: how many at most (the rounds
    allowed, for a server per round)."""
    from asv.runner import Spawner

    side.benchmark_dir, side.server_cap = benchmark_dir, servers
    write_afresh(side.label, side.env, say)
    side.new_interpreter = Spawner(side.env, benchmark_dir)
    server(side, 0)


def server(side, round_index):
    """The fork server of round ``round_index``: a new interpreter that imported the suite once,
    so its layout and heap are drawn independently of the other rounds' servers."""
    from asv.runner import ForkServer

    index = round_index % side.server_cap
    while len(side.servers) <= index:
        started = ForkServer(side.env, side.benchmark_dir)
        ok, out = started.preimport()
        if not ok:
            started.close()  # not kept: a later round would fork from a server without the suite
            raise ABError(f"side {side.label} ({side.name}) cannot import the benchmark "
                          f"suite:\n{out}")
        side.servers.append(started)
    return side.servers[index]


def cache_dir(side, benchmark):
    """The setup_cache folder of ``benchmark``'s module on this side, made on first use;
    None for a benchmark without setup_cache. Raises ABError when setup_cache failed."""
    key = benchmark.get("setup_cache_key")
    if key is None:
        return None
    if key in side.cache_failed:
        raise ABError(side.cache_failed[key])
    if key not in side.cache_dirs:
        timeout = benchmark.get("setup_cache_timeout") or benchmark["timeout"]
        made, err = side.servers[0].create_setup_cache(benchmark["name"], timeout,
                                                       json.dumps({"cpu_affinity": None}))
        if made is None:
            side.cache_failed[key] = f"setup_cache of {key} failed on {side.name}:\n{err}"
            raise ABError(side.cache_failed[key])
        side.cache_dirs[key] = made
    return side.cache_dirs[key]


def close(sides):
    from asv import util

    for side in sides:
        for folder in side.cache_dirs.values():
            util.long_path_rmtree(folder, True)
        for forkserver in side.servers:
            forkserver.close()
        side.servers, side.cache_dirs, side.cache_failed = [], {}, {}


# ---------------------------------------------------------------- one case


@dataclass
class Run:
    """One process of one side: asv_runner's samples (timing) or value."""

    samples: list = None
    number: int = None
    value: object = None  # non-timing result; NaN: skipped
    failed: str = None  # stderr when the process failed

    @property
    def median(self):
        return statistics.median(self.samples) if self.samples else self.value


@dataclass
class Case:
    """One benchmark at one parameter combination, measured on both sides."""

    benchmark: dict
    param_idx: int
    params: str  # "('float32',)"-style label as asv shows it, "" without params
    runs: dict = field(default_factory=lambda: {"A": [], "B": []})
    started: float = 0.0
    # from its first round to its last: a second series comes after every other case's first
    seconds: float = 0.0
    fresh: bool = False  # measured in new interpreters rather than forked from the servers
    # rounds before it: the first series; from it on: the second series (new interpreters) of
    # a case the first series flagged; 0: none
    confirm_from: int = 0

    @property
    def name(self):
        return self.benchmark["name"]

    @property
    def timing(self):
        return self.benchmark["type"] == "time"

    @property
    def counted(self):
        return self.benchmark.get("unit") == results.COUNT_UNIT

    def steady(self):
        """Every process of each side gave the same value: a deterministic value."""
        return all(len({r.value for r in self.runs[label]}) <= 1 for label in "AB")

    @property
    def paired(self):
        """Judged by paired rounds: a timing, or a value that varied between processes."""
        return self.timing or not self.steady()

    def failed(self, label):
        return next((r.failed for r in self.runs[label] if r.failed), None)

    def skipped(self):
        values = [r.value for r in self.runs["A"] + self.runs["B"]
                  if not r.samples and not r.failed]
        return any(isinstance(v, float) and math.isnan(v) for v in values)

    def log_ratios(self, start=0, stop=None):
        """ln(B / A) of each complete round (of rounds ``start`` to ``stop``)."""
        return [math.log(b.median / a.median)
                for a, b in zip(self.runs["A"][start:stop], self.runs["B"][start:stop])
                if a.median and b.median]

    def series(self):
        """The log-ratios of the first series of rounds and of the second (empty: none)."""
        if not self.confirm_from:
            return self.log_ratios(), []
        return (self.log_ratios(0, self.confirm_from),
                self.log_ratios(self.confirm_from))


def _extra_params(benchmark):
    """Fewer samples per process for warm timing phases and for `timeraw_*` cases (a new
    interpreter a sample); other cold phases (one fresh object per sample: number 1, no
    warm-up) keep their own."""
    if benchmark["type"] != "time":
        return {}
    if benchmark["name"].rsplit(".", 1)[-1].startswith("timeraw_"):
        return {"repeat": list(NEW_INTERPRETER_REPEAT)}
    if not (benchmark.get("number") == 1 and not benchmark.get("warmup_time")):
        return {"repeat": list(WARM_REPEAT)}
    return {}


def run_once(side, case, fresh=False, round_index=0):
    """One process of ``side`` for ``case``: forked from the side's server of this round, or
    (``fresh``) a new interpreter."""
    from asv.runner import _run_benchmark_single_param

    try:
        cwd = cache_dir(side, case.benchmark)
        spawner = side.new_interpreter if fresh else server(side, round_index)
    except ABError as err:
        return Run(failed=str(err))
    res = _run_benchmark_single_param(case.benchmark, spawner, case.param_idx, profile=False,
                                      extra_params=_extra_params(case.benchmark), cwd=cwd)
    if res.errcode:
        return Run(failed=res.stderr or f"exit status {res.errcode}")
    if res.samples[0] is not None:
        return Run(samples=res.samples[0], number=res.number[0])
    return Run(value=res.result[0])


def order(round_index):
    """ABBA: round 0 is A then B, round 1 B then A, round 2 B then A, round 3 A then B..."""
    return ("A", "B") if round_index % 4 in (0, 3) else ("B", "A")


def measure(case, sides, *, enough, max_rounds, min_rounds):
    """Rounds of ``case`` until ``enough(estimate)`` says the paired estimate decides what is
    asked (timings, values that vary), or one run per side (counts), or two per side (values
    that came out the same each time)."""
    by_label = {s.label: s for s in sides}
    case.started = case.started or time.time()
    r = 0
    while r < max_rounds:
        for label in order(r):
            case.runs[label].append(run_once(by_label[label], case, fresh=case.fresh,
                                             round_index=r))
        if case.failed("A") or case.failed("B") or case.skipped():
            break
        if case.counted:
            break
        if not case.timing and r == 1 and case.steady():
            if case.fresh or case.runs["A"][0].value == case.runs["B"][0].value:
                break
            # one value a side, but not the same one: forked processes inherit their servers'
            # heaps, so new interpreters tell the commits apart from the servers
            case.fresh, case.runs, r = True, {"A": [], "B": []}, 0
            continue
        if case.paired and r + 1 >= min_rounds and enough(paired.hodges_lehmann(
                case.log_ratios(case.confirm_from))):
            break
        r += 1
    case.seconds = time.time() - case.started
    return case


def confirm(verdicts, sides, *, enough, max_rounds, min_rounds, say=print):
    """A second series of rounds, every process a new interpreter, for each paired case the
    first series flagged; ``judge`` then calls it a change only when both series mark it so. An A/A
    flagged ODEIntegration.time_numpy 0.74x (interval 0.64-0.87, 7 rounds forked from the
    servers); the same case alone right after read 1.001x and 0.994x. Costs rounds only where
    something was flagged."""
    flagged = [v.case for v in verdicts if v.mark in "+-" and v.case.paired]
    for i, case in enumerate(flagged, 1):
        case.confirm_from, case.fresh = len(case.runs["B"]), True
        measure(case, sides, enough=enough, max_rounds=max_rounds, min_rounds=min_rounds)
        say(f"jaxbench ab: confirming [{i}/{len(flagged)}] {case.name}{case.params}: "
            f"{len(case.runs['B']) - case.confirm_from} rounds in new interpreters")
    return flagged


# ---------------------------------------------------------------- the verdict


@dataclass
class Verdict:
    case: Case
    unit: str
    before: object  # A's median over every sample (None: failed, NaN: skipped)
    after: object
    estimate: paired.Estimate = None  # timing: the drift-normalised paired ratio
    mark: str = " "
    first: paired.Estimate = None  # where a second series ran: the first series' estimate

    @property
    def unconfirmed(self):
        """A first series flagged it and the second series did not repeat the flag."""
        return self.first is not None and self.mark == "?"


def _side_value(case, label):
    if case.failed(label):
        return None
    runs = case.runs[label]
    if not runs or case.skipped():
        return math.nan
    if case.timing:
        return statistics.median(s for r in runs for s in r.samples)
    return statistics.median(r.value for r in runs)


def drift(cases, numpy_same):
    """The paired ratio both sides share, from the NumPy baselines (code no JAX commit
    touches): every round of every baseline pooled into one estimate. None when it is not
    significantly different from 1, when there are fewer than three baselines, or when the
    sides run different NumPy versions (then the baselines measure NumPy too)."""
    if not numpy_same:
        return None
    controls = [c for c in cases if c.timing and results.is_baseline(c.name)
                and len(c.log_ratios()) >= paired.fewest_rounds()]
    if len(controls) < 3:
        return None
    pooled = paired.hodges_lehmann([d for c in controls for d in c.log_ratios()])
    return pooled.ratio if (pooled.low > 1 or pooled.high < 1) else None


def _estimate(case, log_ratios, shared_drift):
    """The paired estimate of ``log_ratios``, divided by the drift both sides shared where the
    case is a JAX timing."""
    found = paired.hodges_lehmann(log_ratios)
    if case.timing and shared_drift and not results.is_baseline(case.name):
        found = found.scaled(shared_drift)
    return found


def _paired_mark(estimate, factor):
    return paired.mark(estimate, factor) if paired.decided(estimate, factor) else "?"


def judge(cases, units, factor, shared_drift, thresholds=None):
    """A Verdict per case: timings by the paired estimate at ``factor``, values by their ratio
    (instruction counts at ``results.count_factor``)."""
    verdicts = []
    for case in cases:
        unit = results.unit_of(case.name, units)
        v = Verdict(case, unit, _side_value(case, "A"), _side_value(case, "B"))
        if results.missing(v.before) or results.missing(v.after):
            v.mark = "!" if v.before is not None and v.after is None else (
                "*" if v.before is None and v.after is not None else " ")
        elif case.paired:
            first, second = case.series()
            # after the last round an interval still wider than the threshold decides
            # nothing: reported as unresolved, never as a change
            v.estimate = _estimate(case, first, shared_drift)
            v.mark = _paired_mark(v.estimate, factor)
            if case.confirm_from:
                # a change the second series does not repeat is unresolved. Repeating asks for
                # the same mark (beyond the factor, the interval excluding no change), not for
                # an interval narrowed within the threshold too: new interpreters spread wider
                # than forks, and a 10% dispatch plant read 1.18x undecided after 16 of them
                v.first, second = v.estimate, _estimate(case, second, shared_drift)
                repeated = paired.mark(second, factor) == v.mark
                v.estimate, v.mark = second, v.mark if repeated else "?"
        elif v.before:
            ratio = v.after / v.before
            limit = (results.count_factor(case.name + case.params, thresholds)
                     if unit == results.COUNT_UNIT else factor)
            v.mark = "+" if ratio > limit else "-" if ratio < 1 / limit else " "
        way = results.direction(unit, case.name)
        if not way.higher_is_worse and v.mark in "+-":
            v.mark = "+" if v.mark == "-" else "-"
        verdicts.append(v)
    return verdicts


def as_changes(verdicts, env_name):
    """The verdicts as ``report.Change`` rows, for report compare's table and exit codes."""
    changes = []
    for v in verdicts:
        key = results.SeriesKey(v.case.name, v.case.params, env_name)
        interval = (v.estimate.ratio, v.estimate.low, v.estimate.high) if v.estimate else None
        changes.append(report.Change(key, v.unit, v.before, v.after, v.mark, interval))
    return changes


# ---------------------------------------------------------------- asv results


def save_results(side, conf, repo, benchmarks, cases, machine, results_dir):
    """Every sample of ``side`` as an asv result of its commit (merged with what is there)."""
    from asv.machine import Machine
    from asv.results import Results
    from asv.runner import BenchmarkResult

    described = Machine.load(machine_name=machine)
    described.save(results_dir)
    params = dict(described.__dict__)
    params["python"] = side.env.python
    params.update(side.env.requirements)
    result = Results(params, side.env.requirements, side.commit, repo.get_date(side.commit),
                     side.env.python, side.env.name, side.env.env_vars)
    result.load_data(results_dir)
    by_name = {}
    for case in cases:
        by_name.setdefault(case.name, []).append(case)
    for name, found in by_name.items():
        benchmark = benchmarks[name]
        combos = max(1, len(list(itertools.product(*benchmark["params"]))))
        values, samples, numbers = [math.nan] * combos, [None] * combos, [None] * combos
        stderr, errcode = "", 0
        for case in found:
            runs = case.runs[side.label]
            failed = case.failed(side.label)
            if failed:
                values[case.param_idx] = None
                stderr += failed + "\n"
                errcode = 1
            elif case.timing and runs and runs[0].samples:
                values[case.param_idx] = True
                samples[case.param_idx] = [s for r in runs for s in r.samples]
                numbers[case.param_idx] = runs[-1].number
            elif runs:
                values[case.param_idx] = _side_value(case, side.label)
        started = datetime.datetime.fromtimestamp(min(c.started for c in found),
                                                  datetime.timezone.utc)
        result.add_result(benchmark, BenchmarkResult(values, samples, numbers, errcode,
                                                     stderr.strip(), None),
                          started_at=started, duration=sum(c.seconds for c in found),
                          record_samples=True)
    result.save(results_dir)
    return result


# ---------------------------------------------------------------- the comparison


def _params_label(benchmark, idx):
    if not benchmark["params"]:
        return ""
    combo = list(itertools.product(*benchmark["params"]))[idx]
    return f"({', '.join(combo)})"


def cases_of(benchmarks):
    """A Case per benchmark and parameter combination that ``-b`` selected (asv matches a
    parameterised benchmark's regex against ``name(params)``), in setup_cache order."""
    found = []
    for name in sorted(benchmarks, key=lambda n: (benchmarks[n].get("setup_cache_key") or "",
                                                  n)):
        benchmark = benchmarks[name]
        selected = benchmarks.benchmark_selection.get(name)
        combos = max(1, len(list(itertools.product(*benchmark["params"]))))
        for idx in range(combos) if selected is None else selected:
            found.append(Case(benchmark, idx, _params_label(benchmark, idx)))
    return found


def _numpy_version(side):
    out = side.env.run(["-c", "import numpy; print(numpy.__version__)"], dots=False)
    return out.strip()


@dataclass
class Comparison:
    base: Side
    head: Side
    cases: list
    verdicts: list
    drift: float  # None: not normalised
    seconds: float
    load: object = None
    settings: list = field(default_factory=list)  # NAME=VALUE given to both sides
    numpy_same: bool = True  # both sides run one NumPy: the baselines measure the host alone


def prepare(conf_path, work_dir, results_dir=None):
    """The asv config of each side (its own environment folder) and the repository."""
    from asv import repo as asv_repo

    results_dir = results_dir or asvconfig.load(conf_path)["results_dir"]
    # asv finds the config's interpreters as pythonX.Y on PATH, in this process
    os.environ["PATH"] = pythons.asv_env(asvconfig.read(conf_path).get("pythons", []))["PATH"]
    confs = {label: _side_config(conf_path, os.path.join(work_dir, f"env-{label}"), results_dir)
             for label in "AB"}
    repo = asv_repo.get_repo(confs["A"])
    repo.pull()
    return confs, repo


def resolve(repo, conf, name):
    try:
        return repo.get_hash_from_name(name)
    except Exception as err:  # asv's NoSuchNameError and friends
        raise ABError(f"{name!r} names no commit of {conf.repo}: {err}") from None


def discover(conf, repo, side, bench):
    """asv's discovery of the benchmarks matching ``bench``, in ``side``'s environment."""
    from asv.benchmarks import Benchmarks

    benchmarks = Benchmarks.discover(conf, repo, [side.env], [side.commit],
                                     regex=list(bench) or None)
    if not len(benchmarks):
        raise ABError(f"no benchmark matches {list(bench)}")
    for benchmark in benchmarks.values():
        if benchmark.get("timeout") is None:  # as asv's runner does
            benchmark["timeout"] = side.env._default_benchmark_timeout
    return benchmarks


def reinstall(side, name, commit, conf, repo, say=print):
    """Put another commit into ``side``'s environment and restart its fork servers (the old
    ones imported the old jax)."""
    close([side])
    side.name, side.commit = name, commit
    side.env.install_project(conf, repo, commit)
    open_spawner(side, conf.benchmark_dir, side.server_cap, say)


def restart(side, conf, say=print):
    """New fork servers for ``side`` on its shared objects written afresh: after the other
    side's reinstall, both sides' code is again as fresh (a server maps the file it found)."""
    close([side])
    open_spawner(side, conf.benchmark_dir, side.server_cap, say)


def compare(conf_path, base, head, *, bench=(), factor=DEFAULT_FACTOR, max_rounds=MAX_ROUNDS,
            machine, work_dir, results_dir=None, same=False, save=True, servers=None,
            say=print):
    """Build both sides, measure every selected case interleaved, judge, and (``save``, never
    for an A/A) save asv results."""
    started = time.time()
    min_rounds = paired.fewest_rounds()
    if max_rounds < min_rounds:
        raise ABError(f"--max-rounds {max_rounds}: a 95% interval needs at least {min_rounds} "
                      "rounds")
    confs, repo = prepare(conf_path, work_dir, results_dir)
    hashes = {label: resolve(repo, confs["A"], name) for label, name in (("A", base),
                                                                        ("B", head))}
    if same and hashes["A"] != hashes["B"]:
        raise ABError("--same compares one commit with itself")
    sides = [build_side(label, name, hashes[label], confs[label], repo, say)
             for label, name in (("A", base), ("B", head))]
    try:
        benchmarks = discover(confs["A"], repo, sides[0], bench)
        for side in sides:
            open_spawner(side, confs["A"].benchmark_dir, servers or max_rounds, say)
        numpy_same = _numpy_version(sides[0]) == _numpy_version(sides[1])
        cases = cases_of(benchmarks)
        say(f"jaxbench ab: {len(cases)} cases, up to {max_rounds} rounds each (ABBA), factor "
            f"{factor}, "
            + (f"{markdown.counted(servers, 'fork server')} a side, reused" if servers
               else "a new fork server a side per round"))
        for i, case in enumerate(cases, 1):
            measure(case, sides, enough=lambda e: paired.decided(e, factor),
                    max_rounds=max_rounds, min_rounds=min_rounds)
            rounds = len(case.runs["B"])
            say(f"jaxbench ab: [{i}/{len(cases)}] {case.name}{case.params}: "
                f"{markdown.counted(rounds, 'round')}, {case.seconds:.1f} s")
        units = {name: b.get("unit", "") for name, b in benchmarks.items()}
        thresholds = asvconfig.read(conf_path).get("regressions_thresholds", {})
        while True:  # until every flagged case has had its second series (the drift moves)
            shared = drift(cases, numpy_same)
            verdicts = judge(cases, units, factor, shared, thresholds)
            if not confirm([v for v in verdicts if not v.case.confirm_from], sides,
                           enough=lambda e: paired.decided(e, factor), max_rounds=max_rounds,
                           min_rounds=min_rounds, say=say):
                break
    finally:
        close(sides)
    if save and not same:
        benchmarks.save()
        for side in sides:
            save_results(side, confs[side.label], repo, benchmarks, cases, machine,
                         confs[side.label].results_dir)
    return Comparison(sides[0], sides[1], cases, verdicts, shared, time.time() - started,
                      numpy_same=numpy_same)


def markdown_report(comparison, *, factor, machine):
    changes = as_changes(comparison.verdicts, comparison.base.env.name)
    # the cases judged by paired rounds: timings, and values that varied between processes
    rounds = [len(c.runs["B"]) for c in comparison.cases if c.paired and c.runs["B"]]
    how = (f"interleaved A/B, {min(rounds, default=0)}-{max(rounds, default=0)} rounds per "
           f"case (median {statistics.median(rounds) if rounds else 0:g}), Hodges-Lehmann "
           "paired ratio with its 95% interval, "
           + (f"divided by the drift both sides shared, {comparison.drift:.3f}× (the NumPy "
              "baselines' pooled paired ratio)" if comparison.drift else "no drift to divide "
              "out (the NumPy baselines' pooled paired ratio includes 1, or there are too few "
              "of them, or the sides run different NumPy versions)")
           + f"; {comparison.seconds / 60:.1f} min")
    seconded = [c for c in comparison.cases if c.confirm_from]
    if seconded:
        how += (f"; {markdown.counted(len(seconded), 'case')} the first series "
                "flagged measured again in new interpreters, a change only where both series "
                "see it")
    if comparison.settings:
        how += f"; both sides with {', '.join(comparison.settings)}"
    if comparison.load is not None:
        how += f"; the machine: {comparison.load.summary()}"
    text = report.compare_markdown(changes, base_name=comparison.base.name,
                                   head_name=comparison.head.name, base=comparison.base.commit,
                                   head=comparison.head.commit, machine=machine, factor=factor,
                                   use_stats=True, how=how)
    baselines = report.baselines_line(changes, factor, numpy_same=comparison.numpy_same,
                                      drift=comparison.drift)
    return (text + (f"\n{baselines}\n" if baselines else "")
            + unconfirmed_line(comparison.verdicts))


def unconfirmed_line(verdicts):
    """The cases a first series flagged and the second did not: both estimates."""
    found = []
    for v in verdicts:
        if v.unconfirmed:
            found.append(f"`{markdown.cell(v.case.name + v.case.params)}` first "
                         f"{v.first.ratio:.2f} ({v.first.low:.2f}–{v.first.high:.2f}), second "
                         f"{v.estimate.ratio:.2f} ({v.estimate.low:.2f}–{v.estimate.high:.2f})")
    if not found:
        return ""
    return (f"\n**Not confirmed ({len(found)}):** flagged by a first series of rounds forked "
            "from the fork servers and not by a second series in new interpreters (so "
            f"unresolved above, with the second's interval): {', '.join(found)}\n")


def exit_code(comparison):
    return report.compare_exit_code(as_changes(comparison.verdicts, ""))


def parse(argv):
    parser = argparse.ArgumentParser(prog="python -m jaxbench_helpers ab",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("base", nargs="?", help="commit, tag or branch (A)")
    parser.add_argument("head", nargs="?", help="commit, tag or branch (B)")
    parser.add_argument("--same", metavar="COMMIT",
                        help="A/A: compare COMMIT with itself, two separate builds")
    parser.add_argument("--config", help="asv config (default: the release-history config "
                        "the main job writes, .asv/asv.releases.conf.json)")
    parser.add_argument("--bench", "-b", action="append", default=[],
                        help="only benchmarks matching this regex (repeatable)")
    parser.add_argument("--factor", type=float, default=DEFAULT_FACTOR,
                        help=f"smallest change reported, as a ratio (default {DEFAULT_FACTOR})")
    parser.add_argument("--max-rounds", type=int, default=MAX_ROUNDS,
                        help=f"rounds per case at most (default {MAX_ROUNDS})")
    parser.add_argument("--servers", type=int,
                        help="fork servers a side, reused: round r forks from server r mod N "
                        "(default: a new server per round, so the layout each server draws "
                        "varies between rounds as the interval assumes)")
    machine.add_argument(parser)
    parser.add_argument("--work-dir", help="where the two environments live (default: a new "
                        "temporary folder; pass one to reuse builds)")
    parser.add_argument("--results-dir", help="asv results folder (default: the config's)")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for both sides' benchmark processes, "
                        "e.g. JAXBENCH_CPU_THREADS=split (repeatable)")
    parser.add_argument("--output", "-o", help="Markdown file (default: standard output)")
    quiet.add_arguments(parser)
    args = parser.parse_args(argv)
    for item in args.env:
        if "=" not in item or not item.split("=", 1)[0].isidentifier():
            parser.error(f"--env {item!r}: give NAME=VALUE")
    if args.same:
        if args.base or args.head:
            parser.error("--same takes one commit; leave out BASE and HEAD")
        args.base = args.head = args.same
    elif not (args.base and args.head):
        parser.error("give BASE and HEAD, or --same COMMIT")
    if args.factor <= 1:
        parser.error("--factor must be above 1 (1.10 means 10% either way)")
    if args.servers is not None and args.servers < 1:
        parser.error("--servers must be at least 1")
    return args


def default_config():
    from ..common import paths

    path = os.path.join(paths.STATE, "asv.releases.conf.json")
    if not os.path.isfile(path):
        raise ABError(f"no --config and no {path}; run the main job once, or write a config "
                      "with 'python -m jaxbench_helpers config'")
    return path


def main(argv=None):
    from asv.console import log
    from asv.util import UserError

    args = parse(sys.argv[1:] if argv is None else list(argv))
    log.enable(False)

    def say(text):
        print(text, file=sys.stderr, flush=True)

    machine = machine_name(args.machine)
    # the benchmark processes inherit this process's environment (asv's fork servers do)
    os.environ.update(item.split("=", 1) for item in args.env)
    try:
        conf_path = args.config or default_config()
        asvconfig.read(conf_path)  # a missing config is named before the machine is judged
        work_dir = os.path.abspath(args.work_dir or tempfile.mkdtemp(prefix="jaxbench-ab-"))
        ensure_described(machine)
        with quiet.timing_session("ab", allow_busy=args.allow_busy, say=say,
                                  record_path=os.path.join(work_dir, quiet.RECORD_NAME)) as monitor:
            comparison = compare(conf_path, args.base, args.head, bench=args.bench,
                                 factor=args.factor, max_rounds=args.max_rounds,
                                 machine=machine, work_dir=work_dir,
                                 results_dir=args.results_dir, same=bool(args.same),
                                 servers=args.servers, say=say)
        comparison.load = monitor.record if monitor else None
    except quiet.BusyMachine as err:
        say(f"jaxbench ab: {err}")
        return 4
    except (ABError, asvconfig.ConfigError, pythons.PythonError, UserError) as err:
        say(f"jaxbench ab: {err}")
        return 3
    comparison.settings = args.env
    markdown.write(markdown_report(comparison, factor=args.factor, machine=machine),
                   args.output, who="jaxbench ab")
    return exit_code(comparison)


if __name__ == "__main__":
    sys.exit(main())
