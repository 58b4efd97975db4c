"""The main job: JAX's newest releases, benchmarked and published.

Builds (or extends) the release-history repository, points a derived asv configuration at it,
runs the suite over the newest releases, each on the Python chosen for it (``pythons``), and
publishes ``html/`` from ``results/``. A rerun skips what already succeeded, so an interrupted
run resumes. It refuses a machine name whose recorded hardware is not this host's.
"""

import argparse
import os
import subprocess
import sys
import time

from ..common import asvconfig, git, machine, paths, quiet
from ..common.machine import machine_name
from . import asvconf, history, publish, pythons

FIRST_RELEASE = "0.4.20"


def spread(releases, count):
    """``count`` releases evenly spaced over ``releases`` (oldest first), both ends included."""
    if count < 2:
        raise SystemExit(f"--span {count}: a history needs at least 2 releases")
    if count >= len(releases):
        return list(releases)
    last = len(releases) - 1
    picks = sorted({round(i * last / (count - 1)) for i in range(count)})
    return [releases[i] for i in picks]


def asv(config, *args, env=None):
    """Run asv with ``config``; returns its exit code."""
    cmd = [sys.executable, "-m", "asv", "--config", config, *args]
    print("jaxbench: " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, env=env).returncode


def in_range(releases, spec):
    """The releases (version, hash) that the git range ``spec`` of the history names."""
    try:
        named = set(git.run(paths.HISTORY_REPO, "rev-list", "--first-parent", spec).split())
    except git.GitError as err:
        raise history.HistoryError(f"--range {spec}: {err}") from None
    chosen = [(v, h) for v, h in releases if h in named]
    if not chosen:
        raise history.HistoryError(f"--range {spec} names no release of {paths.HISTORY_REPO}")
    return chosen


def by_python(chosen, plan):
    """{python: [(version, hash)]} of the ``chosen`` releases, by ``plan`` ({version: pythons})."""
    runs = {}
    for version, commit in chosen:
        for python in plan[version]:
            runs.setdefault(python, []).append((version, commit))
    return runs


def load_record_path(results_dir, name):
    """Where the main job records how busy the machine was: beside the machine's results, as
    JSON lines (asv reads every .json file there as a result)."""
    return os.path.join(results_dir, name, quiet.RECORD_NAME)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="regular", help="quick, regular (default) or large")
    parser.add_argument("--releases", type=int, default=2,
                        help="how many of the newest releases to run (default 2)")
    parser.add_argument("--span", type=int, metavar="N",
                        help="instead, N releases spread evenly from the oldest to the newest "
                        "(both included): a history in N runs")
    parser.add_argument("--range", dest="commits", help="an asv range instead, e.g. "
                        "jax-v0.9.0..jax-v0.10.2 (tags of the release-history repository)")
    parser.add_argument("--bench", "-b", action="append", default=[],
                        help="only benchmarks matching this regex (repeatable)")
    machine.add_argument(parser)
    parser.add_argument("--machine-note", default="",
                        help="appended to the CPU model in machine.json, e.g. 'shared VM'")
    parser.add_argument("--results-dir", default=paths.RESULTS)
    parser.add_argument("--html-dir", default=paths.HTML)
    quiet.add_arguments(parser)
    args = parser.parse_args(argv)
    started = time.monotonic()
    name = machine_name(args.machine)
    try:
        # before anything runs: results of other hardware must not join this name's
        machine.check(name, args.results_dir)
        machine.keep_hardware(name, args.results_dir)
        plan = dict(history.python_plan(first=FIRST_RELEASE))
        releases = history.build(paths.HISTORY_REPO, first=FIRST_RELEASE)
        if args.commits:
            chosen = in_range(releases, args.commits)
        else:
            chosen = spread(releases, args.span) if args.span else releases[-args.releases:]
        runs = by_python(chosen, plan)
        env = pythons.asv_env(runs)
    except (machine.MachineMismatch, history.HistoryError, pythons.PythonError) as err:
        print(f"jaxbench main: {err}", file=sys.stderr)
        return 2
    # a plain 'asv run' of the derived config continues the newest release's stretch
    config = asvconfig.write(
        asvconf.derive(paths.HISTORY_REPO, profile=args.profile, results_dir=args.results_dir,
                       html_dir=args.html_dir, pythons=plan[releases[-1][0]][-1:]),
        os.path.join(paths.STATE, "asv.releases.conf.json"),
    )
    print("jaxbench: releases " + ", ".join(v for v, _ in chosen) + " ("
          + "; ".join(f"Python {p}: {len(items)}" for p, items in runs.items()) + ")",
          flush=True)

    machine.record(name, note=args.machine_note)
    bench = [a for b in args.bench for a in ("--bench", b)]
    run_rc = 0
    try:
        with quiet.timing_session("main", allow_busy=args.allow_busy,
                                  record_path=load_record_path(args.results_dir, name)):
            for python, items in runs.items():
                hashfile = os.path.join(paths.STATE, f"releases-to-run-py{python}.txt")
                with open(hashfile, "w") as f:
                    f.write("".join(f"{h}\n" for _, h in items))
                rc = asv(config, "run", f"HASHFILE:{hashfile}", "--environment",
                         f"virtualenv:{python}", "--machine", name,
                         "--skip-existing-successful", "--show-stderr", *bench, env=env)
                run_rc = run_rc or rc
    except quiet.BusyMachine as err:
        print(f"jaxbench main: {err}", file=sys.stderr)
        return 4
    # publish even after a failed benchmark: what did finish is kept and shown
    publish_rc = publish.publish(config)
    minutes = (time.monotonic() - started) / 60
    print(f"jaxbench: main job finished in {minutes:.1f} min (asv run exit {run_rc}, "
          f"publish exit {publish_rc}); to see the dashboard: python3 -m jaxbench_helpers serve "
          f"--html-dir {args.html_dir}", flush=True)
    return run_rc or publish_rc


if __name__ == "__main__":
    sys.exit(main())
