"""jaxbench's commands: ``python3 -m jaxbench_helpers COMMAND [ARGS]``.

    main      benchmark the newest JAX releases and publish html/ (the main job)
    test      run the test suite (with arguments: pytest with them)
    history   build the release-history git repository from the jax sdists
    config    write an asv config pointed at another JAX repository
    publish   asv publish, plus the dashboard's libraries and its commit pages
    serve     show a published dashboard at http://127.0.0.1:8080/ (it works offline)
    machine   this host's hardware, and which results/ names it may add results to
    install   the asv install step (pairs a jax checkout with a jaxlib)
    afresh    write an environment's shared objects afresh, where asv installs nothing
    report    Markdown of the largest steps across releases; 'report compare BASE HEAD' for a PR
              ('report load': the load record's runs and why each reads quiet or busy)
    ab        interleaved A/B comparison of two commits: verdicts a noisy machine cannot fake
    bisect    find the commit of a slowdown, every step an interleaved comparison
    verify    check the history report's largest steps with interleaved A/B comparisons
    controls  the same commit against itself under each noise control: which setting is quietest
    calibrate measure one commit several times: noise, asv compare's false positives, thresholds
    sensitivity plant a slowdown into one phase of a JAX release at a time: what the suite sees
    noisefloor  time hand-written loops in fresh processes, no asv: this machine's own noise
    burstprobe  time workloads while a CPU burns in bursts: does a burst's effect outlast it?

``main`` and ``test`` first make .venv (asv, pytest, jax) and run inside it.
"""

import importlib
import os
import sys

# command -> the module whose main(argv) runs it
COMMANDS = {
    "main": "host.mainjob",
    "history": "host.history",
    "config": "host.asvconf",
    "publish": "host.publish",
    "serve": "host.serve",
    "machine": "host.machines",
    "install": "install.step",
    "afresh": "install.pagecache",
    "report": "analysis.report",
    "ab": "host.ab",
    "bisect": "host.bisect",
    "calibrate": "selftest.calibrate",
    "verify": "selftest.verify",
    "controls": "selftest.controls",
    "sensitivity": "selftest.sensitivity",
    "noisefloor": "selftest.noisefloor",
    "burstprobe": "selftest.burstprobe",
}


def _has_asv():
    import importlib.util

    return importlib.util.find_spec("asv") is not None


# At most this many test processes at once (pytest-xdist workers, one per CPU up to it)
MAX_TEST_WORKERS = 4


def _run_tests(argv):
    """pytest with ``argv``; without arguments (the README's and CI's run), two passes: the
    tests that judge no timing one per CPU (most keep one CPU busy: a pip install, a compile,
    an asv benchmark process, a callgrind child), a test file's tests in one worker; then
    those that assert on measured times (marker ``judges_timings``) one at a time, with
    nothing else running. Both passes run; either failing fails the run."""
    import subprocess

    from .host import bootstrap

    os.chdir(bootstrap.ROOT)
    pytest = [sys.executable, "-m", "pytest"]
    if argv:
        return subprocess.run([*pytest, *argv]).returncode
    workers = min(MAX_TEST_WORKERS, len(os.sched_getaffinity(0)))
    print(f"jaxbench: the tests that judge no timing, {workers} at a time", flush=True)
    first = subprocess.run([*pytest, "-m", "not judges_timings", "-n", str(workers),
                            "--dist", "loadfile"]).returncode
    print("jaxbench: the tests that judge timings, one at a time", flush=True)
    second = subprocess.run([*pytest, "-m", "judges_timings"]).returncode
    return first or second


def main(argv):
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in (*COMMANDS, "test"):
        print(__doc__)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    command, rest = argv[0], argv[1:]
    if command in ("main", "test"):
        from .host import bootstrap

        if not bootstrap.inside():
            bootstrap.reexec_inside(argv)
    elif command not in ("install", "afresh") and not _has_asv():
        # the other commands drive or read asv, which lives in .venv
        from .host import bootstrap

        bootstrap.reexec_inside(argv, keep_cwd=True)
    if command == "test":
        return _run_tests(rest)
    module = importlib.import_module(f"jaxbench_helpers.{COMMANDS[command]}")
    return module.main(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
