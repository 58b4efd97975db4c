"""controls: judging noise settings by A/A comparisons; the asynchronous-dispatch switch."""

import math
import os
import subprocess
import sys

import pytest

from jaxbench_helpers.host import ab
from jaxbench_helpers.selftest import controls


def _case(name, a, b):
    case = ab.Case({"name": name, "type": "time", "params": []}, 0, "")
    case.runs["A"] = [ab.Run(samples=[m], number=1) for m in a]
    case.runs["B"] = [ab.Run(samples=[m], number=1) for m in b]
    return case


def _steady(name, spread, rounds=8):
    """Process medians alternating by +-spread around 1 ms on both sides."""
    medians = [1e-3 * (1 + spread * (-1) ** i) for i in range(rounds)]
    return controls.case_noise(_case(name, medians, list(reversed(medians))))


def test_the_setting_with_the_least_spread_between_processes_wins_its_phase():
    found = {"pinned": [_steady("b.C.time_run", 0.01), _steady("b.D.time_trace", 0.05)],
             "all": [_steady("b.C.time_run", 0.04), _steady("b.D.time_trace", 0.02)]}
    table = controls.summarise(found)
    assert controls.best(table["run"]) == "pinned"
    assert controls.best(table["trace"]) == "all"
    assert table["run"]["pinned"][0] == pytest.approx(1.4826 * math.log(1.01) * 1, rel=0.05)
    text = controls.markdown(found, {"pinned": 60, "all": 90}, commit="c", machine="m",
                             profile="regular", bench=["x"])
    run_row = next(line for line in text.splitlines() if line.startswith("| run |"))
    assert "**1.5%**" in run_row.split("|")[3]  # pinned's cell is bold
    assert "**pinned** in 1 phase (run)" in text and "**all** in 1 phase (trace)" in text


def test_an_aa_case_far_from_one_is_a_false_alarm():
    drifted = controls.case_noise(_case("b.C.time_run", [1e-3] * 8,
                                        [1.2e-3 * (1 + 0.001 * i) for i in range(8)]))
    assert drifted.flagged == {1.10: True, 1.05: True}
    assert _steady("b.C.time_run", 0.01).flagged == {1.10: False, 1.05: False}


@pytest.mark.parametrize("value, expected", [("off", "False"), ("on", "True")])
def test_async_dispatch_can_be_switched_for_the_benchmark_processes(value, expected):
    code = ("from jaxbench_helpers.runtime import platform; platform.configure()\n"
            "from jax._src import xla_bridge as x; print(x._CPU_ENABLE_ASYNC_DISPATCH.value)")
    env = dict(os.environ, JAXBENCH_CPU_ASYNC_DISPATCH=value)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == expected, out.stderr


def test_a_bad_async_dispatch_value_is_named():
    code = "from jaxbench_helpers.runtime import platform; platform.configure()"
    env = dict(os.environ, JAXBENCH_CPU_ASYNC_DISPATCH="maybe")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode != 0 and "JAXBENCH_CPU_ASYNC_DISPATCH='maybe'" in out.stderr
