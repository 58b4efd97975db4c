"""Check the history report's largest steps with an independent measurement.

A step in ``results/REPORT.md`` comes from one asv run per release, minutes or hours apart: the
machine's own drift between those runs can make a step, or hide one. This measures the top
steps again, apart from the history: for each pair of releases around a step, an interleaved
A/B (``ab``) of the two releases in fresh environments, restricted to the benchmarks of the
steps between them, and records what it saw beside the results, where ``report`` shows it::

    python -m jaxbench_helpers verify --machine NAME [--top 10] [--results-dir results]
        [--repo .asv/jax-releases] [--profile regular] [--work-dir DIR]

Verdicts: *confirmed* (the A/B sees a change the same way, beyond ``--factor``), *noise* (the
A/B decides there is none), *unresolved* (the machine moved too much to decide), and steps
across a change of how the suite times their phase (``report.METHOD_CHANGES``) are not
measured but marked. The record is ``results/<machine>/verified.jsonl``: one step a line (asv
reads every .json file there as a result).
"""

import argparse
import os
import re
import sys
import tempfile

from ..analysis import report, results
from ..common import asvconfig, paths, quiet
from ..common.machine import check as check_machine
from ..host import ab, asvconf


def top_steps(history, top):
    worse = sorted((s for s in history.steps if s.worse), key=lambda s: -s.size)[:top]
    better = sorted((s for s in history.steps if not s.worse), key=lambda s: -s.size)[:top]
    return worse + better


def case_regex(step):
    """asv's regex for exactly the step's benchmark and parameters."""
    return "^" + re.escape(step.key.benchmark + step.key.params) + "$"


def verdict(step, v, factor):
    """What the A/B's verdict ``v`` says of the history's ``step``."""
    if v.mark == "?":
        return "unresolved"
    if v.mark == " ":
        return "noise"
    same_way = (v.mark == "+") == step.worse
    return "confirmed" if same_way else "opposite"


def verify(history, *, top, conf_path, factor, work_dir, say=print):
    """{step_id: record} for the top steps of ``history``."""
    found = {}
    pairs = {}
    for step in top_steps(history, top):
        what = report.method_change(step)
        if what:
            found[report.step_id(step)] = {"verdict": "method changed", "why": what}
            continue
        pairs.setdefault((step.before, step.after), []).append(step)
    for (before, after), steps in pairs.items():
        say(f"jaxbench verify: {before.label} -> {after.label}: {len(steps)} step(s)")
        comparison = ab.compare(conf_path, before.hash, after.hash,
                                bench=[case_regex(s) for s in steps], factor=factor,
                                machine="verify", work_dir=os.path.join(work_dir, "builds"),
                                results_dir=os.path.join(work_dir, "results"), save=False,
                                say=say)
        by_case = {v.case.name + v.case.params: v for v in comparison.verdicts}
        for step in steps:
            found[report.step_id(step)] = record(step, by_case.get(step.key.benchmark
                                                                   + step.key.params), factor)
    return found


def record(step, v, factor):
    """What is kept of the A/B's verdict ``v`` (None: the A/B has no such case) on ``step``."""
    if v is None or results.missing(v.before) or results.missing(v.after):
        return {"verdict": "not measured"}
    if v.estimate is not None:
        return {"verdict": verdict(step, v, factor), "ratio": v.estimate.ratio,
                "low": v.estimate.low, "high": v.estimate.high, "rounds": v.estimate.rounds,
                "history_ratio": step.ratio}
    if not v.before:
        return {"verdict": "not measured"}
    # a value steady in each side's processes (FLOPs, a queue depth): ab judged its ratio
    return {"verdict": verdict(step, v, factor), "ratio": v.after / v.before,
            "values": [v.before, v.after], "history_ratio": step.ratio}


def parse(argv):
    parser = argparse.ArgumentParser(prog="python -m jaxbench_helpers verify",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--machine", help="machine under --results-dir (default: the only one)")
    parser.add_argument("--results-dir", default=paths.RESULTS)
    parser.add_argument("--repo", default=paths.HISTORY_REPO)
    parser.add_argument("--branch", default="main")
    parser.add_argument("--top", type=int, default=10,
                        help="regressions and improvements checked, each (default 10)")
    parser.add_argument("--window", type=int, default=2)
    parser.add_argument("--factor", type=float, default=1.1)
    parser.add_argument("--profile", default="regular",
                        help="the profile the history was measured with (default regular)")
    parser.add_argument("--work-dir", help="where the environments live (default: a new "
                        "temporary folder)")
    quiet.add_arguments(parser)
    return parser.parse_args(argv)


def main(argv=None):
    from asv.console import log
    from asv.util import UserError

    args = parse(sys.argv[1:] if argv is None else list(argv))
    log.enable(False)

    def say(text):
        print(text, file=sys.stderr, flush=True)

    try:
        machine = results.pick_machine(args.results_dir, args.machine)
        # its verdicts are recorded under the machine's name: they must be that machine's
        check_machine(machine, args.results_dir)
        history = report.history(args.results_dir, machine, args.repo, args.branch,
                                 args.window, args.factor)
        work_dir = os.path.abspath(args.work_dir or tempfile.mkdtemp(prefix="jaxbench-verify-"))
        os.makedirs(work_dir, exist_ok=True)
        conf_path = asvconfig.write(asvconf.derive(args.repo, profile=args.profile,
                                                   results_dir=os.path.join(work_dir,
                                                                            "results")),
                                    os.path.join(work_dir, "asv.conf.json"))
        with quiet.timing_session("verify", allow_busy=args.allow_busy, say=say,
                                  record_path=os.path.join(work_dir, quiet.RECORD_NAME)):
            found = verify(history, top=args.top, conf_path=conf_path, factor=args.factor,
                           work_dir=work_dir, say=say)
    except quiet.BusyMachine as err:
        say(f"jaxbench verify: {err}")
        return 4
    except (results.ResultsError, ab.ABError, asvconfig.ConfigError, UserError) as err:
        say(f"jaxbench verify: {err}")
        return 1
    path = report.write_verified(args.results_dir, machine, found)
    say(f"jaxbench verify: {len(found)} steps recorded in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
