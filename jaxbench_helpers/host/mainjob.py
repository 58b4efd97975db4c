"""The main job: JAX's newest releases, benchmarked and published.

Builds (or extends) the release-history repository, points a derived asv configuration at it,
runs the suite over the newest releases this Python can install, and publishes ``html/`` from
``results/``. A rerun skips what already succeeded, so an interrupted run resumes.
"""

import argparse
import os
import subprocess
import sys
import time

from ..common import asvconfig, machine, paths
from ..common.machine import machine_name
from . import asvconf, history, publish

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


def asv(config, *args):
    """Run asv with ``config``; returns its exit code."""
    cmd = [sys.executable, "-m", "asv", "--config", config, *args]
    print("jaxbench: " + " ".join(cmd), flush=True)
    return subprocess.run(cmd).returncode


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
    parser.add_argument("--machine", default=machine_name(),
                        help="machine name for results/ (default: JAXBENCH_MACHINE or hostname)")
    parser.add_argument("--machine-note", default="",
                        help="appended to the CPU model in machine.json, e.g. 'shared VM'")
    parser.add_argument("--results-dir", default=paths.RESULTS)
    parser.add_argument("--html-dir", default=paths.HTML)
    args = parser.parse_args(argv)
    started = time.monotonic()

    releases = history.build(paths.HISTORY_REPO, first=FIRST_RELEASE)
    config = asvconfig.write(
        asvconf.derive(paths.HISTORY_REPO, profile=args.profile, results_dir=args.results_dir,
                       html_dir=args.html_dir),
        os.path.join(paths.STATE, "asv.releases.conf.json"),
    )
    if args.commits:
        spec = args.commits
    else:
        chosen = spread(releases, args.span) if args.span else releases[-args.releases:]
        print("jaxbench: releases " + ", ".join(v for v, _ in chosen), flush=True)
        hashfile = os.path.join(paths.STATE, "releases-to-run.txt")
        with open(hashfile, "w") as f:
            f.write("".join(f"{h}\n" for _, h in chosen))
        spec = f"HASHFILE:{hashfile}"

    machine.record(args.machine, note=args.machine_note)
    bench = [a for b in args.bench for a in ("--bench", b)]
    run_rc = asv(config, "run", spec, "--machine", args.machine, "--skip-existing-successful",
                 "--show-stderr", *bench)
    # publish even after a failed benchmark: what did finish is kept and shown
    publish_rc = publish.publish(config)
    minutes = (time.monotonic() - started) / 60
    print(f"jaxbench: main job finished in {minutes:.1f} min (asv run exit {run_rc}, "
          f"publish exit {publish_rc}); open {args.html_dir}/index.html or run "
          f"'asv --config {config} preview'", flush=True)
    return run_rc or publish_rc


if __name__ == "__main__":
    sys.exit(main())
