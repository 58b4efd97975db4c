"""verify: what an interleaved A/B of two releases says of a history step."""

import re

from jaxbench_helpers.analysis import paired, report, results
from jaxbench_helpers.host import ab
from jaxbench_helpers.selftest import verify


def _step(worse):
    key = results.SeriesKey("bench_matmul.SquareMatmul.time_run", "('float32')", "env")
    before, after = (results.Commit(c * 40, f"jax-v0.5.{i}", "") for i, c in enumerate("ab"))
    return report.Step(key, "seconds", before, after, 1.0, 1.5 if worse else 0.6, 2, 2, worse,
                       results.direction("seconds"), 1, 1.5 if worse else 0.6)


def _verdict(mark):
    case = ab.Case({"name": "x", "type": "time", "params": []}, 0, "")
    return ab.Verdict(case, "seconds", 1.0, 1.5, paired.Estimate(1.5, 1.4, 1.6, 8), mark)


def test_verdicts():
    assert verify.verdict(_step(True), _verdict("+"), 1.1) == "confirmed"
    assert verify.verdict(_step(False), _verdict("-"), 1.1) == "confirmed"
    assert verify.verdict(_step(True), _verdict("-"), 1.1) == "opposite"
    assert verify.verdict(_step(True), _verdict(" "), 1.1) == "noise"
    assert verify.verdict(_step(True), _verdict("?"), 1.1) == "unresolved"


def test_the_regex_selects_exactly_the_steps_case():
    regex = verify.case_regex(_step(True))
    assert re.search(regex, "bench_matmul.SquareMatmul.time_run('float32')")
    assert not re.search(regex, "bench_matmul.SquareMatmul.time_run('float64')")
    assert not re.search(regex, "bench_matmul.SquareMatmul.time_run_x('float32')")


def test_a_steady_value_is_judged_by_its_ratio_a_missing_one_is_not_measured():
    case = ab.Case({"name": "x", "type": "track", "params": []}, 0, "")
    larger = ab.Verdict(case, "flops", 1e7, 7e8, None, "+")
    assert verify.record(_step(True), larger, 1.1) == {
        "verdict": "confirmed", "ratio": 70.0, "values": [1e7, 7e8], "history_ratio": 1.5}
    assert verify.record(_step(False), larger, 1.1)["verdict"] == "opposite"
    same = ab.Verdict(case, "flops", 1e7, 1e7, None, " ")
    assert verify.record(_step(True), same, 1.1)["verdict"] == "noise"
    failed = ab.Verdict(case, "flops", 1e7, None, None, "!")
    assert verify.record(_step(True), failed, 1.1) == {"verdict": "not measured"}
    assert verify.record(_step(True), None, 1.1) == {"verdict": "not measured"}
