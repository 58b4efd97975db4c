"""Does a burst of load slow what runs after it, or only what runs during it? Without asv.

    python -m jaxbench_helpers burstprobe [--seconds 200] [--start 10] [--period 20]
        [--burst 2] [--side 1024] [--cpu-threads all|1] [-o report.md]

The load record marks the measurements a spell of others' load covered, and one second after
it (``quiet.py``). Whether a burst's effect outlasts it (a cold cache, a moved thread, the host's
clock) decides whether that second is enough; asv's samples are too coarse and too few to see
it, so this probe times, in one fresh process, three workloads back to back, each sample
stamped with its start and end:

    dispatch  100 calls of a jitted ``x * 2 + 1`` on 16 floats, each waited for
    sort      ``np.sort`` of 32K float64, eight times (no JAX)
    matmul    a jitted side x side float32 matmul, waited for (with ``--cpu-threads all`` XLA
              runs a large one on every CPU, so a burst takes CPU from it)

while a second process burns one whole CPU in a busy loop for ``--burst`` s every ``--period``
s from ``--start`` s in, each burst's span logged. Each sample goes to a bucket by where it
lies: during a burst (overlapping it), 0-0.5, 0.5-2, 2-5, 5-10 and over 10 s after the last
burst ended, or before the first. The report gives each bucket's median against the median of
the samples 5 s or more after a burst: the workloads' own pace, away from the bursts.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from ..analysis import results
from ..common import machine, paths, quiet
from ..common import markdown as md
from ..runtime import cpu_threads

WORKLOADS = ("dispatch", "sort", "matmul")
DISPATCH_CALLS = 100
SORT_LENGTH = 1 << 15
SORT_REPEATS = 8
# (bucket, seconds after the last burst ended: from, to)
AFTER = (("0–0.5 s after", 0.0, 0.5), ("0.5–2 s after", 0.5, 2.0), ("2–5 s after", 2.0, 5.0),
         ("5–10 s after", 5.0, 10.0), ("over 10 s after", 10.0, float("inf")))
DURING = "during a burst"
BEFORE = "before the first"
# the reference: samples this long or more after a burst ended
SETTLED = 5.0


class BurstProbeError(RuntimeError):
    pass


# ---------------------------------------------------------------- the two child processes


def _sample(side, seconds):
    """Warm the workloads, say the start time on standard output, then time them back to back
    for ``seconds``; the samples as JSON on the last line."""
    cpu_threads.apply()
    import jax
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(0)
    small = jnp.ones(16)
    affine = jax.jit(lambda x: x * 2.0 + 1.0)
    vector = rng.random(SORT_LENGTH)
    matrix = jax.device_put(rng.random((side, side), dtype=np.float32))
    matmul = jax.jit(lambda a: a @ a)

    def dispatch():
        for _ in range(DISPATCH_CALLS):
            affine(small).block_until_ready()

    def sort():
        for _ in range(SORT_REPEATS):
            np.sort(vector)

    def multiply():
        matmul(matrix).block_until_ready()

    bodies = (dispatch, sort, multiply)
    for _ in range(5):  # compile, caches, first-touch pages
        for body in bodies:
            body()
    start = time.time()
    print(json.dumps({"start": start}), flush=True)
    samples = []
    while time.time() < start + seconds:
        begun = time.time()
        times = []
        for body in bodies:
            t = time.perf_counter()
            body()
            times.append(time.perf_counter() - t)
        samples.append([begun, time.time(), *times])
    print(json.dumps({"samples": samples, "cpus": sorted(os.sched_getaffinity(0)),
                      "jax": jax.__version__, "numpy": np.__version__}), flush=True)
    return 0


def burst_starts(start, period, burst, seconds):
    """Seconds from the sampling's start at which a burst begins: each ends within the run."""
    starts, k = [], 0
    while start + k * period + burst <= seconds:
        starts.append(start + k * period)
        k += 1
    return starts


def _burn(origin, start, period, burst, seconds):
    """Busy-loop one CPU for ``burst`` s at each of the burst starts; print each span."""
    for offset in burst_starts(start, period, burst, seconds):
        begin = origin + offset
        while time.time() < begin:
            time.sleep(0.01)
        began = time.time()
        while time.time() < begin + burst:
            pass
        print(json.dumps([began, time.time()]), flush=True)
    return 0


def _child(kind, *args):
    return [sys.executable, "-m", "jaxbench_helpers.selftest.burstprobe", kind,
            *map(str, args)], paths.project_on_path(os.environ)


def probe(*, seconds, start, period, burst, side, cpu_setting):
    """Run the sampler and the burner; (samples, bursts, the sampler's facts)."""
    argv, env = _child("--child-sample", side, seconds)
    env[cpu_threads.CPU_THREADS_ENV] = cpu_setting
    sampler = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env)
    first = sampler.stdout.readline()
    if not first:
        sampler.wait()
        raise BurstProbeError(f"the sampling process exited {sampler.returncode} before it "
                              f"started:\n{sampler.stderr.read()[-2000:]}")
    origin = json.loads(first)["start"]
    # the burner is the parent's child, not the sampler's: it keeps the whole affinity mask
    # even when the sampler is pinned to one CPU
    argv, env = _child("--child-burn", origin, start, period, burst, seconds)
    burner = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env)
    out, err = sampler.communicate()
    if sampler.returncode != 0:
        burner.kill()  # its bursts would load the machine for nothing
    burned, burn_err = burner.communicate()
    if sampler.returncode != 0:
        raise BurstProbeError(f"the sampling process exited {sampler.returncode}:\n"
                              f"{err[-2000:]}")
    if burner.returncode != 0:
        raise BurstProbeError(f"the burning process exited {burner.returncode}:\n"
                              f"{burn_err[-2000:]}")
    facts = json.loads(out.strip().splitlines()[-1])
    bursts = [tuple(json.loads(line)) for line in burned.splitlines() if line.strip()]
    return facts.pop("samples"), bursts, facts


# ---------------------------------------------------------------- arithmetic


def bucket_of(begun, ended, bursts):
    """The bucket of a sample stamped [begun, ended] among bursts [(start, end), ...]."""
    if any(begun <= end and ended >= start for start, end in bursts):
        return DURING
    ends = [end for _, end in bursts if end < begun]
    if not ends:
        return BEFORE
    gap = begun - max(ends)
    return next(name for name, low, high in AFTER if low <= gap < high)


def buckets(samples, bursts):
    """{bucket: [per-workload seconds, ...]} in report order, empty buckets left out."""
    found = {name: [] for name in (DURING, *(a[0] for a in AFTER), BEFORE)}
    for begun, ended, *times in samples:
        found[bucket_of(begun, ended, bursts)].append(times)
    return {name: rows for name, rows in found.items() if rows}


def settled(found):
    """The rows of ``buckets`` ``SETTLED`` s or more after a burst."""
    return [times for name, low, _ in AFTER if low >= SETTLED for times in found.get(name, [])]


def reference(found):
    """Each workload's median over the settled samples of ``buckets``."""
    rows = settled(found)
    if not rows:
        raise BurstProbeError(f"no sample lies {SETTLED:.0f} s or more after a burst, so "
                              "nothing tells the workloads' own pace; lengthen --period or "
                              "--seconds")
    return [statistics.median(column) for column in zip(*rows)]


def ratios(found, ref):
    """{bucket: (samples, [each workload's median / its reference])}."""
    return {name: (len(rows), [statistics.median(column) / r
                               for column, r in zip(zip(*rows), ref)])
            for name, rows in found.items()}


def markdown(samples, bursts, facts, *, seconds, start, period, burst, side, cpu_setting,
             machine, load=None):
    found = buckets(samples, bursts)
    ref = reference(found)
    table = ratios(found, ref)
    names = [f"jit dispatch, {DISPATCH_CALLS} calls", f"`np.sort` 32K ×{SORT_REPEATS}",
             f"jit {side}×{side} matmul"]
    lines = [f"# Does a burst's effect outlast it? `{machine}`", "",
             f"One process (jax {facts['jax']}, NumPy {facts['numpy']}, "
             f"JAXBENCH_CPU_THREADS={cpu_setting}, CPUs {facts['cpus']}) timed the workloads "
             f"back to back for {seconds:.0f} s, {len(samples)} samples each stamped; a second "
             f"process burned one whole CPU for {burst:g} s every {period:g} s from {start:g} s "
             f"in ({md.counted(len(bursts), 'burst')}). Each bucket's median sample against "
             f"the median of the samples {SETTLED:.0f} s or more after a burst." + (
                 f" The machine while it ran: {load.summary()}." if load else ""), "",
             "| place | samples | " + " | ".join(names) + " |",
             "|---|---|" + "---|" * len(names),
             f"| median {SETTLED:.0f} s or more after (seconds) | "
             f"{len(settled(found))} | "
             + " | ".join(results.human(r, "seconds") for r in ref) + " |"]
    for name, (count, values) in table.items():
        lines.append(f"| {name} | {count} | " + " | ".join(f"{v:.3f}" for v in values) + " |")
    lines += ["", "## Reading", ""]
    soon = [name for name, _, high in AFTER if high <= SETTLED and name in table]
    for i, label in enumerate(names):
        during = table[DURING][1][i] if DURING in table else None
        text = f"- {label}: " + (f"{during:.3f}× during a burst" if during is not None
                                  else "no sample during a burst")
        if soon:
            worst = max(soon, key=lambda name: abs(table[name][1][i] - 1))
            off = abs(table[worst][1][i] - 1)
            text += (f"; within {SETTLED:.0f} s after one, at most {off:.1%} from its settled "
                     f"pace ({worst})")
        lines.append(text + ".")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- command line


def parse(argv):
    parser = argparse.ArgumentParser(
        prog="python -m jaxbench_helpers burstprobe",
        description="Time three workloads back to back in one process while another burns a "
        "whole CPU in bursts, and report each workload's pace during a burst and in the "
        "seconds after it against its pace away from the bursts.")
    parser.add_argument("--seconds", type=float, default=200.0,
                        help="how long the workloads are timed (default 200)")
    parser.add_argument("--start", type=float, default=10.0,
                        help="seconds in at which the first burst starts (default 10)")
    parser.add_argument("--period", type=float, default=20.0,
                        help="seconds from one burst's start to the next's (default 20)")
    parser.add_argument("--burst", type=float, default=2.0,
                        help="seconds each burst burns a CPU (default 2)")
    parser.add_argument("--side", type=int, default=1024,
                        help="matrix side of the matmul (default 1024: XLA runs it on every "
                        "CPU the process may use)")
    parser.add_argument("--cpu-threads", choices=cpu_threads.CHOICES, default="all",
                        help="JAXBENCH_CPU_THREADS for the timed process (default all, so a "
                        "burst competes with the matmul's threads)")
    machine.add_argument(parser)
    parser.add_argument("--output", "-o", help="Markdown file (default: standard output)")
    quiet.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.burst <= 0 or args.start < 0 or args.side < 1:
        parser.error(f"--burst {args.burst:g} must be above 0, --start {args.start:g} not "
                     f"below 0, --side {args.side} 1 or more")
    if args.period < args.burst + SETTLED + 1:
        parser.error(f"--period {args.period:g}: at least --burst + {SETTLED + 1:.0f} "
                     f"({args.burst + SETTLED + 1:g}), so that samples {SETTLED:.0f} s after a "
                     "burst tell the workloads' own pace")
    if not burst_starts(args.start, args.period, args.burst, args.seconds)[1:]:
        parser.error(f"--seconds {args.seconds:g}: too short for two bursts (the second ends "
                     f"at {args.start + args.period + args.burst:g} s)")
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--child-sample"]:
        return _sample(int(argv[1]), float(argv[2]))
    if argv[:1] == ["--child-burn"]:
        return _burn(*map(float, argv[1:6]))
    return quiet.main_guard(lambda: _run(parse(argv)))


def _run(args):
    name = machine.report_name(args.machine)
    try:
        with quiet.timing_session("burstprobe", allow_busy=args.allow_busy,
                                  say=lambda m: print(m, file=sys.stderr)) as monitor:
            samples, bursts, facts = probe(seconds=args.seconds, start=args.start,
                                           period=args.period, burst=args.burst,
                                           side=args.side, cpu_setting=args.cpu_threads)
        text = markdown(samples, bursts, facts, seconds=args.seconds, start=args.start,
                        period=args.period, burst=args.burst, side=args.side,
                        cpu_setting=args.cpu_threads, machine=name,
                        load=monitor.record if monitor else None)
    except BurstProbeError as err:
        print(f"jaxbench burstprobe: {err}", file=sys.stderr)
        return 2
    md.write(text, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
