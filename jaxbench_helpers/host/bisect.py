"""Bisect a slowdown to its commit, every step decided by an interleaved comparison.

``asv find`` measures each midpoint once, in its own asv run, and compares the single medians:
on a machine that drifts by 5-10% between runs, a 10% step is bisected to a neutral commit as
often as not. Here the good end stays installed in one environment (A) and each candidate is
installed in the other (B); the two take turns (ABBA) until the paired ratio's 95% interval lies
wholly on one side of the step's midpoint (the geometric mean of no change and the step), so
every step is a measured decision, not a coin toss::

    python -m jaxbench_helpers bisect GOOD BAD BENCHMARK [--params float32]
        [--config C] [--max-rounds 16] [-o bisect.md]

BENCHMARK is a regex that must match one benchmark (e.g. ``MLPTrainStep.time_trace``; asv
matches a parameterised benchmark against ``name(params)``, so end it with ``\\(`` rather
than ``$``);
``--params`` picks its parameter combination (comma-separated values, default the first).
The step itself is measured first (BAD against GOOD); a step within ``--factor`` of no change is
refused. A deterministic value (``track_*``, instruction counts) needs one run per commit.
Exit codes: 0 found, 1 no step to bisect, 3 bad input, 4 busy machine.
"""

import argparse
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass

from ..analysis import paired
from ..common import asvconfig, git, markdown, quiet
from . import ab, pythons

DEFAULT_FACTOR = 1.05


@dataclass
class Step:
    commit: str
    label: str
    ratio: float  # candidate / good
    low: float
    high: float
    rounds: int
    bad: bool
    sure: bool  # the interval cleared the midpoint (else decided by the estimate alone)


def first_parent_range(repo_path, good, bad):
    """Commits after ``good`` up to ``bad`` along bad's first parents, oldest first."""
    out = git.run(repo_path, "rev-list", "--first-parent", "--reverse", f"{good}..{bad}")
    return out.split()


def _labels(repo_path):
    tags = {}
    out = git.run(repo_path, "for-each-ref", "--format=%(objectname) %(*objectname) "
                  "%(refname:short)", "refs/tags")
    for line in out.splitlines():
        obj, peeled, name = line.split(" ", 2)
        tags.setdefault(peeled or obj, name)
    return tags


def pick_case(benchmarks, params):
    cases = ab.cases_of(benchmarks)
    names = sorted({c.name for c in cases})
    if len(names) != 1:
        raise ab.ABError(f"BENCHMARK must match one benchmark; it matches {len(names)}: "
                         f"{', '.join(names[:8])}")
    if params is None:
        return cases[0]
    wanted = "(" + ", ".join(p.strip() for p in params.split(",")) + ")"
    found = [c for c in cases if c.params.replace("'", "") == wanted]
    if not found:
        raise ab.ABError(f"--params {params}: {names[0]} has {', '.join(c.params for c in cases)}")
    return found[0]


def measure_against_good(template, sides, midpoint, max_rounds):
    """A fresh case of the template's benchmark, candidate (B) against good (A), until its
    interval clears ``midpoint`` (a ratio) either way."""
    case = ab.Case(template.benchmark, template.param_idx, template.params)
    cut = math.log(midpoint)
    ab.measure(case, sides, max_rounds=max_rounds, min_rounds=paired.fewest_rounds(),
               enough=lambda e: math.log(e.low) > cut or math.log(e.high) < cut)
    failed = case.failed("A") or case.failed("B")
    if failed or case.skipped():
        raise ab.ABError(f"{case.name}{case.params} did not run: {failed or 'skipped (n/a)'}")
    if case.timing:
        return paired.hodges_lehmann(case.log_ratios())
    a, b = case.runs["A"][0].value, case.runs["B"][0].value
    return paired.Estimate(b / a, b / a, b / a, 1)


def bisect(conf_path, good, bad, bench, *, params=None, factor=DEFAULT_FACTOR,
           max_rounds=ab.MAX_ROUNDS, work_dir, say=print):
    """(list of Step, the first bad commit or None, the measured step, the case)."""
    confs, repo = ab.prepare(conf_path, work_dir, os.path.join(work_dir, "results"))
    repo_path = asvconfig.local_repo(asvconfig.load(conf_path), conf_path)
    good_hash, bad_hash = (ab.resolve(repo, confs["A"], n) for n in (good, bad))
    candidates = first_parent_range(repo_path, good_hash, bad_hash)
    if not candidates:
        raise ab.ABError(f"{bad} is not after {good} on its first-parent line")
    labels = _labels(repo_path)
    sides = [ab.build_side("A", good, good_hash, confs["A"], repo, say),
             ab.build_side("B", bad, bad_hash, confs["B"], repo, say)]
    steps = []
    try:
        benchmarks = ab.discover(confs["A"], repo, sides[0], [bench])
        template = pick_case(benchmarks, params)
        for side in sides:
            ab.open_spawner(side, confs["A"].benchmark_dir, max_rounds, say)
        # the step: BAD against GOOD, until its interval clears the factor either way
        step = measure_against_good(template, sides, factor, max_rounds)
        say(f"jaxbench bisect: {template.name}{template.params}: {bad} / {good} = "
            f"{step.ratio:.3f} ({step.low:.3f}-{step.high:.3f}, {step.rounds} rounds)")
        if 1 / factor <= step.ratio <= factor:
            return steps, None, step, template
        midpoint = math.sqrt(step.ratio)  # halfway between no change and the step, in logs
        lo, hi = -1, len(candidates) - 1  # candidates[hi] is bad; everything up to lo is good
        while hi - lo > 1:
            mid = (lo + hi) // 2
            commit = candidates[mid]
            label = labels.get(commit, commit[:8])
            ab.reinstall(sides[1], label, commit, confs["B"], repo, say)
            ab.restart(sides[0], confs["A"], say)  # the good side's code as fresh as B's
            est = measure_against_good(template, sides, midpoint, max_rounds)
            slower = step.ratio > 1
            is_bad = (est.ratio > midpoint) == slower
            sure = math.log(est.low) > math.log(midpoint) or math.log(est.high) < math.log(
                midpoint)
            steps.append(Step(commit, label, est.ratio, est.low, est.high, est.rounds, is_bad,
                              sure))
            say(f"jaxbench bisect: {label}: {est.ratio:.3f} of good ({est.low:.3f}-"
                f"{est.high:.3f}, {est.rounds} rounds): {'bad' if is_bad else 'good'}"
                + ("" if sure else " (by the estimate alone)"))
            if is_bad:
                hi = mid
            else:
                lo = mid
        return steps, candidates[hi], step, template
    finally:
        ab.close(sides)


def markdown_report(steps, found, step, case, *, good, bad, factor, seconds, labels, load=None):
    lines = [f"### Bisect of `{case.name}{case.params}`: {good} → {bad}", ""]
    lines.append(f"The step: {bad} is {step.ratio:.3f}× {good} (95% interval {step.low:.3f}–"
                 f"{step.high:.3f}, {step.rounds} rounds); {seconds / 60:.1f} min"
                 + (f"; the machine: {load.summary()}" if load else "") + ".")
    lines.append("")
    if found is None:
        lines.append(f"**No step to bisect**: the change lies within the factor {factor} of "
                     "no change.")
        return "\n".join(lines) + "\n"
    lines.append(f"**First bad commit: `{found}`** ({labels.get(found, found[:8])}).")
    lines += ["", "| commit | ratio to good | 95% interval | rounds | verdict |",
              "|---|---|---|---|---|"]
    for s in steps:
        verdict = ("bad" if s.bad else "good") + ("" if s.sure else " (estimate only)")
        lines.append(f"| `{markdown.cell(s.label)}` | {s.ratio:.3f} | {s.low:.3f}–{s.high:.3f} "
                     f"| {s.rounds} | {verdict} |")
    return "\n".join(lines) + "\n"


def parse(argv):
    parser = argparse.ArgumentParser(prog="python -m jaxbench_helpers bisect",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("good", help="a commit without the slowdown")
    parser.add_argument("bad", help="a later commit with it")
    parser.add_argument("benchmark", help="regex matching one benchmark")
    parser.add_argument("--params", help="its parameter values, comma-separated (default: the "
                        "first combination)")
    parser.add_argument("--config", help="asv config (default: .asv/asv.releases.conf.json)")
    parser.add_argument("--factor", type=float, default=DEFAULT_FACTOR,
                        help=f"smallest step worth bisecting (default {DEFAULT_FACTOR})")
    parser.add_argument("--max-rounds", type=int, default=ab.MAX_ROUNDS)
    parser.add_argument("--work-dir", help="where the two environments live (default: a new "
                        "temporary folder)")
    parser.add_argument("--output", "-o", help="Markdown file (default: standard output)")
    quiet.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.factor <= 1:
        parser.error("--factor must be above 1")
    return args


def main(argv=None):
    from asv.console import log
    from asv.util import UserError

    args = parse(sys.argv[1:] if argv is None else list(argv))
    log.enable(False)

    def say(text):
        print(text, file=sys.stderr, flush=True)

    started = time.time()
    try:
        conf_path = args.config or ab.default_config()
        work_dir = os.path.abspath(args.work_dir or tempfile.mkdtemp(prefix="jaxbench-bisect-"))
        with quiet.timing_session("bisect", allow_busy=args.allow_busy, say=say,
                                  record_path=os.path.join(work_dir, quiet.RECORD_NAME)) as monitor:
            steps, found, step, case = bisect(conf_path, args.good, args.bad, args.benchmark,
                                              params=args.params, factor=args.factor,
                                              max_rounds=args.max_rounds, work_dir=work_dir,
                                              say=say)
        repo_path = asvconfig.local_repo(asvconfig.load(conf_path), conf_path)
        labels = _labels(repo_path)
    except quiet.BusyMachine as err:
        say(f"jaxbench bisect: {err}")
        return 4
    except (ab.ABError, asvconfig.ConfigError, git.GitError, pythons.PythonError,
            UserError) as err:
        say(f"jaxbench bisect: {err}")
        return 3
    markdown.write(markdown_report(steps, found, step, case, good=args.good, bad=args.bad,
                                   factor=args.factor, seconds=time.time() - started,
                                   labels=labels, load=monitor.record if monitor else None),
                   args.output, who="jaxbench bisect")
    return 0 if found else 1


if __name__ == "__main__":
    sys.exit(main())
