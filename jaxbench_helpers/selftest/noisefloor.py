"""The machine's own noise floor, measured without asv: can any suite reach a target here?

    python -m jaxbench_helpers noisefloor [--processes 6] [--samples 40] [--side 1000]
        [--cpu-threads 1|all] [-o report.md]

Fresh processes, one after another, each pinned as the suite pins (JAXBENCH_CPU_THREADS), run
the same hand-written loops:

    run       a jitted side x side float32 matmul, each call waited for (block_until_ready),
              alternating sample by sample with a twin (the same function jitted again)
    dispatch  100 calls of a jitted function of a scalar, then one wait (per call)
    numpy     the same matmul in NumPy: no JAX at all, the control

Per loop it reports the spread within a process (IQR / median of its samples) and between
processes (largest / smallest process median): what a benchmark of this cost can at best show
here, whatever the harness. The twin shows what alternation buys: two identical loops timed turn
about share the machine's slow spells. It also reports why, where the kernel can tell: CPU time
over wall time (1.0 with a slow process means the CPU itself ran slower, as under a busy
neighbour on a shared host; below 1 the process waited), the steal time the hypervisor reported,
and whether hardware counters exist (counted instructions would not depend on the host's load).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

from ..analysis import results
from ..common import machine, paths, quiet
from ..common import markdown as md
from ..runtime import cpu_threads

LOOPS = ("run", "dispatch", "numpy")
COMPUTE_LOOPS = ("run", "numpy")
DISPATCH_CALLS = 100
# spread the calibration target asks for; the verdict says whether this machine allows it
TARGET_SPREAD = 0.03
PMU_DIRS = ("/sys/bus/event_source/devices/cpu", "/sys/bus/event_source/devices/cpu_core")


class NoiseFloorError(RuntimeError):
    pass


# ---------------------------------------------------------------- one process


def _time_loops(side, samples):
    """{loop: [(wall seconds, CPU seconds), ...]} for this process; pins before jax starts."""
    cpu_threads.apply()
    import jax
    import numpy as np

    host = np.random.default_rng(0).standard_normal((side, side), dtype=np.float32)
    matrix = jax.device_put(host)
    matmul = jax.jit(lambda a: a @ a)
    twin = jax.jit(lambda a: a @ a)
    scalar = jax.device_put(np.float32(1.0))
    increment = jax.jit(lambda s: s + 1)

    def run():
        matmul(matrix).block_until_ready()

    def dispatch():
        for _ in range(DISPATCH_CALLS):
            out = increment(scalar)
        out.block_until_ready()

    def run_twin():
        twin(matrix).block_until_ready()

    def numpy():
        host @ host

    def timed(body):
        wall, cpu = time.perf_counter(), time.process_time()
        body()
        return time.perf_counter() - wall, time.process_time() - cpu

    found = {}
    for names, bodies in ((("run", "run_twin"), (run, run_twin)), (("dispatch",), (dispatch,)),
                          (("numpy",), (numpy,))):
        for body in bodies:
            for _ in range(3):  # compile, caches, first-touch pages
                body()
        times = [[timed(body) for body in bodies] for _ in range(samples)]
        for i, name in enumerate(names):
            found[name] = [t[i] for t in times]
    found["dispatch"] = [(w / DISPATCH_CALLS, c / DISPATCH_CALLS) for w, c in found["dispatch"]]
    return found


def _child(argv):
    side, samples = int(argv[0]), int(argv[1])
    loops = _time_loops(side, samples)
    print(json.dumps({"loops": loops, "cpus": sorted(os.sched_getaffinity(0))}))
    return 0


def measure_process(side, samples, cpu_setting):
    """Run the loops in a fresh interpreter with JAXBENCH_CPU_THREADS=cpu_setting."""
    env = paths.project_on_path(dict(os.environ, **{cpu_threads.CPU_THREADS_ENV: cpu_setting}))
    proc = subprocess.run([sys.executable, "-m", "jaxbench_helpers.selftest.noisefloor", "--child",
                           str(side), str(samples)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise NoiseFloorError(f"a measuring process exited {proc.returncode}:\n"
                              f"{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- the machine


def steal_ticks():
    """(steal, total) CPU ticks since boot from /proc/stat, or None where there is none."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if fields[0] != "cpu" or len(fields) < 9:
        return None
    ticks = [int(x) for x in fields[1:]]
    # guest time is already counted in user time
    return ticks[7], sum(ticks[:8])


def hardware_counters():
    return any(os.path.isdir(d) for d in PMU_DIRS)


# ---------------------------------------------------------------- statistics


def _iqr_over_median(values):
    q1, _, q3 = statistics.quantiles(values, n=4)
    return (q3 - q1) / statistics.median(values)


@dataclass
class LoopFloor:
    """One loop's samples in every process."""

    name: str
    processes: list  # per process: [(wall, cpu), ...]

    @property
    def medians(self):
        return [statistics.median(w for w, _ in p) for p in self.processes]

    @property
    def within(self):
        """Median over processes of the spread of one process's samples."""
        return statistics.median(_iqr_over_median([w for w, _ in p]) for p in self.processes)

    @property
    def between(self):
        """Largest over smallest process median, minus one."""
        return max(self.medians) / min(self.medians) - 1

    @property
    def cpu_over_wall(self):
        wall = sum(w for p in self.processes for w, _ in p)
        return sum(c for p in self.processes for _, c in p) / wall


def summarise(processes):
    """[LoopFloor] from the processes' JSON results."""
    return [LoopFloor(name, [p["loops"][name] for p in processes]) for name in LOOPS]


def twin_disagreement(processes):
    """Largest |run median / twin median - 1| over processes: same-process alternation."""
    run = LoopFloor("run", [p["loops"]["run"] for p in processes]).medians
    twin = LoopFloor("run_twin", [p["loops"]["run_twin"] for p in processes]).medians
    return max(abs(a / b - 1) for a, b in zip(run, twin))


def markdown(floors, *, twin, side, samples, cpu_setting, cpus, steal, counters, machine,
             load=None):
    n = len(floors[0].processes)
    lines = [f"# Noise floor of `{machine}`", "",
             f"{n} fresh processes one after another, JAXBENCH_CPU_THREADS={cpu_setting} "
             f"(CPUs {cpus}), {samples} samples per loop each; no asv. `run`: a jitted "
             f"{side}x{side} float32 matmul waited for; `dispatch`: per call of "
             f"{DISPATCH_CALLS} jitted scalar calls then one wait; `numpy`: the same matmul "
             "in NumPy (no JAX)." + (f" The machine while it ran: {load.summary()}." if load
                                     else ""), "",
             "| loop | process medians | spread within a process (median IQR/median) | "
             "between processes (largest/smallest - 1) | CPU time / wall time |",
             "| --- | --- | --- | --- | --- |"]
    for f in floors:
        medians = ", ".join(results.human(m, "seconds") for m in f.medians)
        lines.append(f"| {f.name} | {medians} | {f.within:.1%} | {f.between:.1%} | "
                     f"{f.cpu_over_wall:.2f} |")
    worst_within = max(f.within for f in floors)
    worst_between = max(f.between for f in floors)
    numpy_floor = next(f for f in floors if f.name == "numpy")
    lines += ["", "## Reading", ""]
    lines.append(f"- Same code, fresh processes: medians differ by up to {worst_between:.0%} "
                 f"(NumPy, without JAX: {numpy_floor.between:.0%}). A same-commit comparison "
                 "of single processes cannot be quieter than that; more interleaved rounds "
                 "(asv `-a rounds=N`) average it down, roughly by the square root of N.")
    run = next(f for f in floors if f.name == "run")
    lines.append(f"- Alternating sample by sample with a twin in the same process, the run "
                 f"loop's two medians agree within {twin:.1%} (between processes: "
                 f"{run.between:.0%}): both sides of an A/B that take turns share the "
                 "machine's slow spells, so alternation, not more samples in one process, is "
                 "what resolves small changes here.")
    reach = "reachable" if worst_within < TARGET_SPREAD else "not reachable"
    lines.append(f"- Spread within one process: up to {worst_within:.1%}, so a "
                 f"{TARGET_SPREAD:.0%} spread target is {reach} on this machine by any "
                 "benchmark of these costs.")
    # the dispatch loop hands work to XLA's threads and sleeps between, so only the compute
    # loops say whether a slow spell was spent running
    ratio = min(f.cpu_over_wall for f in floors if f.name in COMPUTE_LOOPS)
    if steal is None:
        lines.append("- Steal time: not reported by this kernel.")
    else:
        lines.append(f"- Steal time while measuring: {steal:.2%} of CPU time; CPU time / "
                     f"wall time of the compute loops {ratio:.2f}" + (
                         ": the process ran the whole time, so slow spells are the CPU "
                         "itself running slower (a busy neighbour on the host, shared caches "
                         "or memory bandwidth), which no setting inside this machine removes."
                         if ratio > 0.95 else
                         ": the process waited for part of its wall time (descheduled or "
                         "blocked), which pinning or a quieter machine can remove."))
    lines.append("- Hardware counters: " + (
        "present (counted instructions would be a load-independent measure)." if counters
        else "absent (a virtual machine without a virtual PMU), so instruction counts "
        "cannot stand in for time here."))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- command line


def parse(argv):
    parser = argparse.ArgumentParser(
        prog="python -m jaxbench_helpers noisefloor",
        description="Time hand-written block_until_ready loops in fresh processes, without "
        "asv, and report how much the same code varies on this machine: the floor any "
        "benchmark here sits on.")
    parser.add_argument("--processes", type=int, default=6,
                        help="fresh processes, one after another (default 6)")
    parser.add_argument("--samples", type=int, default=40,
                        help="timed samples per loop in each process (default 40)")
    parser.add_argument("--side", type=int, default=1000,
                        help="matrix side of the matmul loops (default 1000, the regular "
                        "profile's)")
    parser.add_argument("--cpu-threads", choices=cpu_threads.CHOICES, default="1",
                        help="JAXBENCH_CPU_THREADS for the processes (default 1, as the "
                        "regular profile)")
    machine.add_argument(parser)
    parser.add_argument("--output", "-o", help="Markdown file (default: standard output)")
    quiet.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.processes < 2:
        parser.error(f"--processes {args.processes}: at least 2, to compare processes")
    if args.samples < 4:
        parser.error(f"--samples {args.samples}: at least 4, for quartiles")
    if args.side < 1:
        parser.error(f"--side {args.side}: must be 1 or more")
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--child"]:
        return _child(argv[1:])
    return quiet.main_guard(lambda: _run(parse(argv)))


def _run(args):
    name = machine.report_name(args.machine)
    before = steal_ticks()
    try:
        with quiet.timing_session("noisefloor", allow_busy=args.allow_busy,
                                  say=lambda m: print(m, file=sys.stderr)) as monitor:
            processes = []
            for i in range(args.processes):
                print(f"jaxbench noisefloor: process {i + 1}/{args.processes}",
                      file=sys.stderr, flush=True)
                processes.append(measure_process(args.side, args.samples, args.cpu_threads))
    except NoiseFloorError as err:
        print(f"jaxbench noisefloor: {err}", file=sys.stderr)
        return 2
    after = steal_ticks()
    steal = None
    if before and after and after[1] > before[1]:
        steal = (after[0] - before[0]) / (after[1] - before[1])
    md.write(markdown(summarise(processes), twin=twin_disagreement(processes),
                           side=args.side, samples=args.samples,
                           cpu_setting=args.cpu_threads, cpus=processes[0]["cpus"],
                           steal=steal, counters=hardware_counters(), machine=name,
                           load=monitor.record if monitor else None),
                  args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
