"""The noise-floor command: real fresh processes timing real jax loops, and its arithmetic."""

import os
import re

import pytest

from jaxbench_helpers.selftest import noisefloor


@pytest.mark.judges_timings
def test_command_times_every_loop_in_pinned_fresh_processes(tmp_path, capsys):
    out = tmp_path / "floor.md"
    code = noisefloor.main(["--processes", "2", "--samples", "5", "--side", "64",
                            "--cpu-threads", "1", "--machine", "test-box", "-o", str(out),
                            "--allow-busy"])
    assert code == 0
    text = out.read_text()
    assert text.startswith("# Noise floor of `test-box`")
    # pinned to a single CPU, the one the suite would pick
    assert f"(CPUs [{max(os.sched_getaffinity(0))}])" in text
    for loop in noisefloor.LOOPS:
        row = next(line for line in text.splitlines() if line.startswith(f"| {loop} |"))
        medians, within, between, ratio = (c.strip() for c in row.split("|")[2:6])
        assert len(medians.split(", ")) == 2
        assert re.fullmatch(r"\d+(\.\d+)?%", within) and re.fullmatch(r"\d+(\.\d+)?%", between)
        assert 0 < float(ratio) < 2.5
    assert "Hardware counters: " in text
    assert re.search(r"the run loop's two medians agree within \d+\.\d%", text)
    assert "process 2/2" in capsys.readouterr().err
    assert re.search(r"The machine while it ran: (quiet|UNDER LOAD): other processes used", text)


def test_a_failing_process_is_a_clear_error():
    with pytest.raises(noisefloor.NoiseFloorError, match="exited 1"):
        noisefloor.measure_process(8, 4, "several")


def _process(run, numpy=None, dispatch=None, cpu=1.0, twin=None):
    loops = {"run": run, "run_twin": twin or run, "numpy": numpy or run,
             "dispatch": dispatch or run}
    return {"loops": {k: [(w, w * cpu) for w in v] for k, v in loops.items()}, "cpus": [1]}


def test_within_and_between_process_spreads():
    floors = noisefloor.summarise([_process([1.0, 1.0, 1.1, 1.2, 1.2]),
                                   _process([1.5, 1.5, 1.5, 1.5, 1.5])])
    run = next(f for f in floors if f.name == "run")
    assert run.medians == [1.1, 1.5]
    assert run.between == pytest.approx(1.5 / 1.1 - 1)
    # IQR/median of the first process (quartiles 1.0 and 1.2 by statistics.quantiles), 0 of the
    # second: the median of the two
    assert run.within == pytest.approx((0.2 / 1.1 + 0.0) / 2)
    assert run.cpu_over_wall == pytest.approx(1.0)


def test_twin_disagreement_is_the_largest_in_process_ratio():
    processes = [_process([1.0] * 4, twin=[1.02] * 4), _process([2.0] * 4, twin=[1.9] * 4)]
    assert noisefloor.twin_disagreement(processes) == pytest.approx(2.0 / 1.9 - 1)


def _markdown(processes, steal=0.001, counters=False):
    return noisefloor.markdown(noisefloor.summarise(processes),
                               twin=noisefloor.twin_disagreement(processes), side=8, samples=5,
                               cpu_setting="1", cpus=[1], steal=steal, counters=counters,
                               machine="m")


def test_the_reading_follows_the_figures():
    quiet = [_process([1.0, 1.0, 1.0, 1.01, 1.0]), _process([1.0, 1.0, 1.01, 1.0, 1.0])]
    text = _markdown(quiet, counters=True)
    assert "3% spread target is reachable" in text
    assert "the CPU itself running slower" in text
    assert "present (counted instructions" in text

    waiting = [_process([1.0, 1.5, 2.0, 1.0, 1.5], cpu=0.5), _process([1.0] * 5, cpu=0.5)]
    text = _markdown(waiting, steal=None)
    assert "3% spread target is not reachable" in text
    assert "Steal time: not reported" in text
    assert "medians differ by up to 50%" in text
    assert "agree within 0.0% (between processes: 50%)" in text

    text = _markdown(waiting, steal=0.2)
    assert "waited for part of its wall time" in text


def test_machine_facts_read_from_the_kernel():
    ticks = noisefloor.steal_ticks()
    if os.path.exists("/proc/stat"):
        steal, total = ticks
        assert 0 <= steal <= total
    assert isinstance(noisefloor.hardware_counters(), bool)


@pytest.mark.parametrize("argv, message", [
    (["--processes", "1"], "at least 2"),
    (["--samples", "3"], "at least 4"),
    (["--side", "0"], "1 or more"),
    (["--cpu-threads", "4"], "invalid choice"),
])
def test_bad_input(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        noisefloor.main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
