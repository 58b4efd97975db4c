"""Choose the noise controls by measurement: the same commit against itself under each setting.

Each candidate setting (environment variables for the benchmark processes: CPU pinning, hash
seed, asynchronous dispatch) gets one A/A comparison (``ab --same``: two separate builds of
one commit, processes taking turns) over a panel that times every phase. What a setting is
judged by, per phase:

* **between processes**: how far the medians of one side's processes spread round to round
  (a robust standard deviation of their logarithms, in percent): what a comparison of single
  processes, like ``asv continuous``, inherits;
* **A/A ratio**: how far the paired estimate of the commit against itself lies from 1, and
  the width of its 95% interval: what the interleaved comparison is left with;
* **flagged**: A/A cases flagged at 1.10 and 1.05 (each is a false alarm).

::

    python -m jaxbench_helpers controls --commit jax-v0.12.0.1 [--setting NAME ...]
        [-b REGEX ...] [--profile regular] [--work-dir DIR] [-o results/NOISE-CONTROLS.md]
"""

import argparse
import math
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass

from ..analysis import paired
from ..common import asvconfig, machine, paths, quiet
from ..common import markdown as md
from ..common.machine import ensure_described, machine_name
from ..host import ab, asvconf
from . import sensitivity

# name -> (environment of the benchmark processes, what it is)
SETTINGS = {
    "pinned": ({"JAXBENCH_CPU_THREADS": "1"},
               "the process and its threads on one CPU, one BLAS thread"),
    "all": ({"JAXBENCH_CPU_THREADS": "all"},
            "every CPU, pools and BLAS sized to the machine"),
    "split": ({"JAXBENCH_CPU_THREADS": "split"},
              "XLA's pools on all CPUs but the last, the Python thread on the last"),
    "pinned-hashseed": ({"JAXBENCH_CPU_THREADS": "1", "PYTHONHASHSEED": "0"},
                        "pinned, and the same string hashes in every process"),
    "pinned-sync": ({"JAXBENCH_CPU_THREADS": "1", "JAXBENCH_CPU_ASYNC_DISPATCH": "off"},
                    "pinned, CPU dispatch synchronous (a call returns when its work is done)"),
}
FACTORS = (1.10, 1.05)


def phase_of(name):
    """The phase a timing measures, for grouping (the method name without ``time_``)."""
    method = name.rsplit(".", 1)[-1]
    for prefix in ("time_", "timeraw_"):
        if method.startswith(prefix):
            return method[len(prefix):]
    return method


def robust_sd(logs):
    """1.4826 x the median absolute deviation: a standard deviation one slow process cannot
    inflate."""
    if len(logs) < 3:
        return None
    centre = statistics.median(logs)
    return 1.4826 * statistics.median(abs(x - centre) for x in logs)


@dataclass
class CaseNoise:
    name: str
    phase: str
    between: float  # robust sd of ln(process median), both sides pooled around their centres
    estimate: paired.Estimate
    flagged: dict  # factor -> bool


def case_noise(case):
    sides = []
    for label in "AB":
        logs = [math.log(r.median) for r in case.runs[label] if r.samples]
        centre = statistics.median(logs) if logs else 0
        sides += [x - centre for x in logs]
    est = paired.hodges_lehmann(case.log_ratios())
    return CaseNoise(case.name + case.params, phase_of(case.name), robust_sd(sides), est,
                     {f: paired.mark(est, f) != " " and paired.decided(est, f)
                      for f in FACTORS})


def measure(setting, *, conf_path, commit, bench, work_dir, say):
    env, _ = SETTINGS[setting]
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        comparison = ab.compare(conf_path, commit, commit, bench=bench, machine="controls",
                                work_dir=os.path.join(work_dir, "builds"), same=True, say=say)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    cases = [c for c in comparison.cases if c.timing and len(c.log_ratios()) >= 3]
    return [case_noise(c) for c in cases], comparison.seconds


def summarise(found):
    """{phase: {setting: (median between, median |ln A/A|, median width, flagged per factor,
    cases)}}."""
    table = {}
    for setting, noises in found.items():
        by_phase = {}
        for n in noises:
            by_phase.setdefault(n.phase, []).append(n)
        for phase, group in by_phase.items():
            between = [n.between for n in group if n.between is not None]
            table.setdefault(phase, {})[setting] = (
                statistics.median(between) if between else None,
                statistics.median(abs(math.log(n.estimate.ratio)) for n in group),
                statistics.median(n.estimate.width for n in group),
                {f: sum(n.flagged[f] for n in group) for f in FACTORS}, len(group))
    return table


def best(row):
    """The setting with the least spread between processes in one phase's row."""
    known = {s: v for s, v in row.items() if v[0] is not None}
    return min(known, key=lambda s: known[s][0]) if known else None


def markdown(found, seconds, *, commit, machine, profile, bench, load=None):
    table = summarise(found)
    settings = list(found)
    lines = [f"# Noise controls: `{commit}` against itself under each setting", "",
             f"Machine `{machine}`, profile `{profile}`; each setting one A/A (`ab --same`: two "
             "builds of the commit, processes taking turns, ABBA) over "
             + (", ".join(f"`{b}`" for b in bench) if bench else "the whole suite") + "."
             + (f" The machine while it ran: {load.summary()}." if load else ""), "",
             "| setting | environment | what it is | minutes |", "|---|---|---|---|"]
    for s in settings:
        env, what = SETTINGS[s]
        env_text = " ".join(f"`{k}={v}`" for k, v in env.items())
        lines.append(f"| {s} | {env_text} | {what} | {seconds[s] / 60:.1f} |")
    lines += ["", "Per phase: the spread between processes (robust sd of the process medians, "
              "%), then the A/A paired ratio's distance from 1 and its 95% interval's width "
              "(medians over the phase's cases, %), then cases flagged at 1.10 / 1.05 (false "
              "alarms). **Bold**: the least spread between processes.", "",
              "| phase | cases | " + " | ".join(settings) + " |",
              "|---|---|" + "---|" * len(settings)]
    for phase in sorted(table):
        row = table[phase]
        winner = best(row)
        cells = []
        for s in settings:
            if s not in row:
                cells.append("—")
                continue
            between, off, width, flagged, _ = row[s]
            text = (f"{100 * between:.1f}%" if between is not None else "—")
            text = f"**{text}**" if s == winner else text
            cells.append(f"{text}; ±{100 * off:.1f}%, {100 * width:.1f}%; "
                         + " / ".join(str(flagged[f]) for f in FACTORS))
        cases = max(v[4] for v in row.values())
        lines.append(f"| {phase} | {cases} | " + " | ".join(cells) + " |")
    wins = {}
    for phase, row in table.items():
        winner = best(row)
        if winner:
            wins.setdefault(winner, []).append(phase)
    lines += ["", "Least spread between processes: " + "; ".join(
        f"**{s}** in {md.counted(len(p), 'phase')} ({', '.join(sorted(p))})"
        for s, p in sorted(wins.items(), key=lambda kv: -len(kv[1]))) + "."]
    return "\n".join(lines) + "\n"


def parse(argv):
    parser = argparse.ArgumentParser(prog="python -m jaxbench_helpers controls",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--commit", required=True, help="tag, branch or hash to measure")
    parser.add_argument("--setting", action="append", choices=list(SETTINGS),
                        help="setting to try; repeat (default: all of them)")
    parser.add_argument("--bench", "-b", action="append",
                        help="benchmark regex (default: the sensitivity panel, every phase)")
    parser.add_argument("--repo", default=paths.HISTORY_REPO,
                        help="the JAX repository (default: the release-history one)")
    parser.add_argument("--profile", default="regular")
    machine.add_argument(parser)
    parser.add_argument("--work-dir", help="builds and scratch results (default: a new "
                        "temporary folder)")
    parser.add_argument("--output", "-o", help="Markdown file (default: standard output)")
    quiet.add_arguments(parser)
    return parser.parse_args(argv)


def main(argv=None):
    from asv.console import log
    from asv.util import UserError

    args = parse(sys.argv[1:] if argv is None else list(argv))
    log.enable(False)

    def say(text):
        print(text, file=sys.stderr, flush=True)

    settings = args.setting or list(SETTINGS)
    bench = args.bench or sensitivity.DEFAULT_BENCH
    machine = machine_name(args.machine)
    work_dir = os.path.abspath(args.work_dir or tempfile.mkdtemp(prefix="jaxbench-controls-"))
    os.makedirs(work_dir, exist_ok=True)
    found, seconds = {}, {}
    try:
        ensure_described(machine)
        conf_path = asvconfig.write(asvconf.derive(args.repo, profile=args.profile,
                                                   results_dir=os.path.join(work_dir,
                                                                            "results")),
                                    os.path.join(work_dir, "asv.conf.json"))
        with quiet.timing_session("controls", allow_busy=args.allow_busy, say=say,
                                  record_path=os.path.join(work_dir, quiet.RECORD_NAME)) as mon:
            for setting in settings:
                say(f"jaxbench controls: {setting}")
                found[setting], seconds[setting] = measure(
                    setting, conf_path=conf_path, commit=args.commit, bench=bench,
                    work_dir=work_dir, say=say)
                md.write(markdown(found, seconds, commit=args.commit, machine=machine,
                                  profile=args.profile, bench=bench), args.output,
                         who="jaxbench controls")
    except quiet.BusyMachine as err:
        say(f"jaxbench controls: {err}")
        return 4
    except (ab.ABError, asvconfig.ConfigError, UserError) as err:
        say(f"jaxbench controls: {err}")
        return 1
    md.write(markdown(found, seconds, commit=args.commit, machine=machine,
                      profile=args.profile, bench=bench, load=mon.record if mon else None),
             args.output, who="jaxbench controls")
    return 0


if __name__ == "__main__":
    sys.exit(main())
