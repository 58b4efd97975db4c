"""The paired-rounds statistics behind the interleaved A/B verdict."""

import math
import random
from types import SimpleNamespace

import pytest

from jaxbench_helpers.analysis import paired, results
from jaxbench_helpers.host import ab


@pytest.mark.parametrize("n, critical", [
    # two-sided 5% critical values of the Wilcoxon signed-rank statistic (standard tables)
    (5, None), (6, 0), (7, 2), (8, 3), (9, 5), (10, 8), (12, 13), (15, 25), (20, 52),
])
def test_critical_ranks_match_the_tables(n, critical):
    assert paired.critical_rank(n) == critical


def test_fewest_rounds_for_a_95_percent_interval():
    assert paired.fewest_rounds() == 6
    assert paired.fewest_rounds(0.90) == 5


def test_estimate_and_interval_of_a_known_sample():
    d = [math.log(r) for r in (1.02, 0.99, 1.01, 1.03, 1.00, 1.02, 0.98, 1.01)]
    est = paired.hodges_lehmann(d)
    walsh = sorted((d[i] + d[j]) / 2 for i in range(8) for j in range(i, 8))
    assert est.rounds == 8
    assert est.ratio == pytest.approx(math.exp((walsh[17] + walsh[18]) / 2))
    assert (est.low, est.high) == (pytest.approx(math.exp(walsh[3])),
                                   pytest.approx(math.exp(walsh[-4])))
    assert est.low < est.ratio < est.high


def test_one_round_hit_by_a_slow_spell_barely_moves_the_estimate():
    d = [math.log(1.0 + 0.005 * i) for i in range(-4, 5)]
    spoiled = d[:-1] + [math.log(1.8)]  # B met a slow spell in one round
    assert paired.hodges_lehmann(spoiled).ratio < 1.02
    mean = math.exp(sum(spoiled) / len(spoiled))
    assert mean > 1.06  # what a plain mean would have said


def _noisy(true_ratio, rounds, noise, seed):
    rng = random.Random(seed)
    return [math.log(true_ratio) + rng.gauss(0, noise) for _ in range(rounds)]


@pytest.mark.parametrize("seed", range(20))
def test_a_real_twenty_percent_change_is_flagged_and_no_change_is_not(seed):
    slower = paired.hodges_lehmann(_noisy(1.2, 8, 0.03, seed))
    faster = paired.hodges_lehmann(_noisy(1 / 1.2, 8, 0.03, seed))
    same = paired.hodges_lehmann(_noisy(1.0, 8, 0.03, seed))
    assert paired.mark(slower, 1.10) == "+"
    assert paired.mark(faster, 1.10) == "-"
    assert paired.mark(same, 1.10) == " "


def test_a_change_below_the_factor_is_not_flagged_however_sure():
    sure = paired.hodges_lehmann(_noisy(1.05, 16, 0.002, 0))
    assert sure.low > 1  # certainly slower...
    assert paired.mark(sure, 1.10) == " "  # ...but not by 10%


def test_decided_when_the_interval_is_narrower_than_the_threshold_or_beyond_it():
    assert not paired.decided(paired.hodges_lehmann(_noisy(1.0, 5, 0.001, 0)), 1.10)  # too few
    assert paired.decided(paired.hodges_lehmann(_noisy(1.0, 6, 0.001, 0)), 1.10)
    wide = paired.hodges_lehmann(_noisy(1.0, 6, 0.2, 1))
    assert wide.width > math.log(1.10) and not paired.decided(wide, 1.10)
    beyond = paired.Estimate(2.0, 1.5, 3.0, 6)
    assert paired.decided(beyond, 1.10)


def test_scaling_divides_out_a_shared_drift():
    est = paired.Estimate(1.10, 1.05, 1.15, 8).scaled(1.10)
    assert (est.ratio, est.low, est.high) == (pytest.approx(1.0), pytest.approx(1.05 / 1.10),
                                              pytest.approx(1.15 / 1.10))


def test_no_rounds_is_an_error():
    with pytest.raises(ValueError, match="no rounds"):
        paired.hodges_lehmann([])


def _case(name, a_medians, b_medians):
    case = ab.Case({"name": name, "type": "time", "params": [["float32"]]}, 0, "('float32')")
    case.runs["A"] = [ab.Run(samples=[m], number=1) for m in a_medians]
    case.runs["B"] = [ab.Run(samples=[m], number=1) for m in b_medians]
    return case


def test_an_ab_case_the_machine_kept_too_noisy_is_unresolved_not_flagged():
    # B is 35% slower in the middle, but rounds swing from a third to triple
    swings = [-1.1, 1.4, 0.3, -0.8, 1.1, 0.3, -0.5, 0.9, 0.3, 0.6, -0.2, 0.3, 1.2, -0.9, 0.3, 0.3]
    wide = _case("bench_x.W.time_run", [1.0] * 16, [math.exp(x) for x in swings])
    clear = _case("bench_x.C.time_run", [1.0] * 8, [1.3 + 0.001 * i for i in range(8)])
    (w, c) = ab.judge([wide, clear], {}, 1.10, None)
    assert w.mark == "?" and c.mark == "+"
    assert ab.exit_code(ab.Comparison(None, None, [wide], [w], None, 0)) == 0


def test_an_instruction_count_is_judged_by_its_calibrated_threshold():
    def count(name, a, b):
        case = ab.Case({"name": name, "type": "track", "params": []}, 0, "")
        case.runs["A"], case.runs["B"] = [ab.Run(value=a)], [ab.Run(value=b)]
        return case

    cases = [count("b.C.track_run_instructions", 1e6, 1.02e6),  # 2%: beyond the default 1%
             count("b.D.track_compile_instructions", 1e6, 1.02e6)]  # within its 3%
    units = {c.name: "CPU instructions" for c in cases}
    thresholds = {r"b\.D\.track_compile_instructions(@|$)": 0.03}
    marks = [v.mark for v in ab.judge(cases, units, 1.10, None, thresholds)]
    assert marks == ["+", " "]
    assert results.count_factor("b.D.track_compile_instructions", thresholds) == 1.03
    assert results.count_factor("b.E.track_trace_instructions", thresholds) == 1.01


def test_a_value_that_varies_between_processes_gets_paired_rounds_a_steady_one_does_not(
        monkeypatch):
    """A resident peak read 1.04 MB in one process and 741 kB in the next of the same commit;
    judged on one process a side it was flagged 0.71x in an A/A."""

    sequences = {"b.M.track_host_step_peak_bytes": iter([1.04e6, 0.74e6] * 20),
                 "b.V.track_jax_version": iter([0.0412] * 40),
                 "b.C.track_run_cpu_instructions": iter([2e6, 2.5e6]),
                 # each fork server steady, the two servers apart; new interpreters agree
                 "b.S.track_host_step_peak_bytes": {"A": iter([1.04e6] * 2),
                                                    "B": iter([0.745e6] * 2),
                                                    "fresh": iter([0.9e6, 0.95e6] * 20)}}

    def run_once(side, case, fresh=False, round_index=0):
        found = sequences[case.name]
        if isinstance(found, dict):
            found = found["fresh" if fresh else side.label]
        return ab.Run(value=next(found))

    monkeypatch.setattr(ab, "run_once", run_once)
    sides = [ab.Side.__new__(ab.Side) for _ in "AB"]
    for side, label in zip(sides, "AB"):
        side.label = label
    cases = {}
    for name in sequences:
        unit = "CPU instructions" if "instructions" in name else "bytes"
        cases[name] = ab.measure(ab.Case({"name": name, "type": "track", "params": [],
                                          "unit": unit}, 0, ""), sides,
                                 enough=lambda e: paired.decided(e, 1.10), max_rounds=16,
                                 min_rounds=paired.fewest_rounds())
    rounds = {name: len(case.runs["A"]) for name, case in cases.items()}
    assert rounds["b.V.track_jax_version"] == 2  # the same twice on each side: deterministic
    assert rounds["b.C.track_run_cpu_instructions"] == 1  # a count: once, minutes a process
    assert rounds["b.M.track_host_step_peak_bytes"] >= paired.fewest_rounds()
    units = {name: c.benchmark["unit"] for name, c in cases.items()}
    marks = {v.case.name: v.mark for v in ab.judge(list(cases.values()), units, 1.10, None)}
    assert marks["b.M.track_host_step_peak_bytes"] in (" ", "?")  # never a change from noise
    assert marks["b.V.track_jax_version"] == " "
    assert marks["b.C.track_run_cpu_instructions"] == "+"  # 25% more instructions
    assert cases["b.S.track_host_step_peak_bytes"].fresh
    assert rounds["b.S.track_host_step_peak_bytes"] >= paired.fewest_rounds()
    assert marks["b.S.track_host_step_peak_bytes"] in (" ", "?")  # the servers' 0.72x is gone
    assert not cases["b.V.track_jax_version"].fresh  # the same on both sides: no new processes


def _server_mode_sides(modes_a, modes_b, monkeypatch):
    """Two sides whose fork servers each fix a speed for every process forked from them (a
    layout drawn at the server's start), with 1% noise between samples."""
    import asv.runner

    noise = random.Random(7)

    def run_single(benchmark, spawner, param_idx, **kwargs):
        # a callable mode: a speed drawn anew for each process (a new interpreter's layout)
        mode = spawner.mode() if callable(spawner.mode) else spawner.mode
        samples = [mode * 1e-3 * math.exp(noise.gauss(0, 0.01)) for _ in range(5)]
        return SimpleNamespace(errcode=0, samples=[samples], number=[1], result=[None])

    monkeypatch.setattr(asv.runner, "_run_benchmark_single_param", run_single)
    sides = []
    for label, modes in (("A", modes_a), ("B", modes_b)):
        sides.append(ab.Side(label, label, label, env=None, server_cap=len(modes),
                             servers=[SimpleNamespace(mode=m) for m in modes]))
    return sides


def _mark(sides):
    case = ab.measure(ab.Case({"name": "b.S.time_sum", "type": "time", "params": [],
                               "unit": "seconds"}, 0, ""), sides,
                      enough=lambda e: paired.decided(e, 1.10), max_rounds=16,
                      min_rounds=paired.fewest_rounds())
    return ab.judge([case], {"b.S.time_sum": "seconds"}, 1.10, None)[0].mark


def test_a_speed_each_fork_server_draws_varies_between_rounds_and_is_not_flagged(monkeypatch):
    """An A/A flagged SumOverAxis 0.78x, and 1.34x when re-run with new servers: every process
    forked from a server ran at the speed that server drew. One server a side turns one draw
    into a verdict; a server per round leaves it unresolved at worst."""
    one_each = _server_mode_sides([1.0], [1.3], monkeypatch)
    assert _mark(one_each) == "+"
    draws = random.Random(3)
    per_round = _server_mode_sides(*([draws.choice([1.0, 1.3]) for _ in range(16)]
                                     for _ in "AB"), monkeypatch)
    assert _mark(per_round) in (" ", "?")
    # a real change still shows through when the servers draw alike
    alike = _server_mode_sides([1.0] * 16, [1.25] * 16, monkeypatch)
    assert _mark(alike) == "+"


def _first_and_second(sides, fresh_modes):
    """One case measured as ``ab`` does: a first series forked from the servers, then (where
    it flagged) a second in new interpreters, each of which runs at ``fresh_modes``'s speed."""
    for side, mode in zip(sides, fresh_modes):
        side.new_interpreter = SimpleNamespace(mode=mode)
    units = {"b.S.time_sum": "seconds"}
    rounds = {"enough": lambda e: paired.decided(e, 1.10), "max_rounds": 16,
              "min_rounds": paired.fewest_rounds()}
    case = ab.measure(ab.Case({"name": "b.S.time_sum", "type": "time", "params": [],
                               "unit": "seconds"}, 0, ""), sides, **rounds)
    seconded = ab.confirm(ab.judge([case], units, 1.10, None), sides, say=lambda text: None,
                          **rounds)
    return seconded, ab.judge([case], units, 1.10, None)[0]


def test_a_change_is_flagged_only_when_a_second_series_in_new_interpreters_sees_it_too(
        monkeypatch):
    """An A/A flagged ODEIntegration.time_numpy 0.74x (interval 0.64-0.87) after 7 rounds
    forked from the servers; the same case alone right after read 1.001x and 0.994x."""
    slow_a_servers = _server_mode_sides([1.3] * 16, [1.0] * 16, monkeypatch)
    seconded, verdict = _first_and_second(slow_a_servers, (1.0, 1.0))
    case = verdict.case
    assert seconded == [case] and case.fresh
    first, second = case.series()
    assert len(first) >= paired.fewest_rounds() and len(second) >= paired.fewest_rounds()
    assert verdict.mark == "?"  # the first series' 0.77x is not repeated: unresolved
    assert 0.97 < verdict.estimate.ratio < 1.03
    assert verdict.unconfirmed and 0.7 < verdict.first.ratio < 0.8
    line = ab.unconfirmed_line([verdict])
    assert "**Not confirmed (1):**" in line
    assert "first 0.77" in line and "second 1.00" in line

    real = _server_mode_sides([1.0] * 16, [1.25] * 16, monkeypatch)
    seconded, verdict = _first_and_second(real, (1.0, 1.25))
    assert seconded == [verdict.case] and verdict.mark == "+"
    assert 1.2 < verdict.estimate.ratio < 1.3
    assert not verdict.unconfirmed and 1.2 < verdict.first.ratio < 1.3
    assert ab.unconfirmed_line([verdict]) == ""

    # new interpreters that each draw a speed of their own spread wider than forks: 16 rounds
    # of them leave a real 1.15x change's interval wider than the threshold, yet it is the
    # same change, and a change (a 10% dispatch plant read 1.18x undecided after 16 rounds)
    draws = random.Random(11)
    spread = _server_mode_sides([1.0] * 16, [1.15] * 16, monkeypatch)
    seconded, verdict = _first_and_second(spread, (
        lambda: math.exp(draws.gauss(0, 0.15)), lambda: 1.15 * math.exp(draws.gauss(0, 0.15))))
    assert seconded == [verdict.case] and len(verdict.case.series()[1]) == 16
    assert not paired.decided(verdict.estimate, 1.10)
    assert verdict.mark == "+" and 1.10 < verdict.estimate.ratio < 1.25

    # nothing flagged: no second series, whatever new interpreters would say
    alike = _server_mode_sides([1.0] * 16, [1.0] * 16, monkeypatch)
    seconded, verdict = _first_and_second(alike, (1.0, 1.3))
    assert seconded == [] and verdict.case.confirm_from == 0 and verdict.mark == " "
    assert verdict.first is None and not verdict.unconfirmed


def test_a_fork_server_that_cannot_import_the_suite_is_closed_not_kept(monkeypatch):
    """A kept failed server would be handed to the next case of that round without an error."""
    import asv.runner

    closed = []

    class Failing:
        def __init__(self, env, root):
            pass

        def preimport(self):
            return False, "ImportError: no module named jax"

        def close(self):
            closed.append(self)

    monkeypatch.setattr(asv.runner, "ForkServer", Failing)
    side = ab.Side("B", "head", "abc", env=None, benchmark_dir="benchmarks")
    for attempt in (1, 2):
        with pytest.raises(ab.ABError, match="cannot import the benchmark suite"):
            ab.server(side, 3)
        assert side.servers == [] and len(closed) == attempt


def test_the_report_counts_the_rounds_of_the_values_judged_by_rounds():
    """An A/A of the memory values alone, six paired rounds each, was reported as '0-0 rounds
    per case'."""
    def case(name, values):
        made = ab.Case({"name": name, "type": "track", "params": [], "unit": "bytes"}, 0, "")
        for label in "AB":
            made.runs[label] = [ab.Run(value=v) for v in values]
        return made

    cases = [case("b.M.track_host_step_peak_bytes", [3.2e6, 3.9e6] * 3),
             case("b.V.track_jax_version", [0.0412] * 2)]  # steady: compared as it is
    assert [c.paired for c in cases] == [True, False]
    verdicts = ab.judge(cases, {c.name: "bytes" for c in cases}, 1.10, None)
    side = SimpleNamespace(name="main", commit="0" * 40, env=SimpleNamespace(name="env"))
    text = ab.markdown_report(ab.Comparison(side, side, cases, verdicts, None, 60.0),
                              factor=1.10, machine="m")
    assert "6-6 rounds per case (median 6)" in text


def test_the_report_says_what_the_numpy_baselines_did_as_the_hosts_noise():
    """The baselines run no JAX: a flag on one is the host's, and says how far a JAX case's
    flag of the same size can be trusted in that comparison."""
    cases = [_case("b.A.time_numpy", [1.0] * 8, [1.01] * 8),
             _case("b.B.time_numpy", [1.0] * 8, [1.2] * 8),
             _case("b.C.time_numpy", [1.0] * 8, [0.98] * 8),
             _case("b.J.time_run", [1.0] * 8, [1.15] * 8)]
    verdicts = ab.judge(cases, {}, 1.10, None)
    assert [v.mark for v in verdicts] == [" ", "+", " ", "+"]
    side = SimpleNamespace(name="main", commit="0" * 40, env=SimpleNamespace(name="env"))

    def report(kept, numpy_same=True):
        comparison = ab.Comparison(side, side, [cases[i] for i in kept],
                                   [verdicts[i] for i in kept], None, 60.0,
                                   numpy_same=numpy_same)
        return ab.markdown_report(comparison, factor=1.10, machine="m")

    def baselines(text):
        return [x for x in text.splitlines() if x.startswith("**NumPy baselines**")]

    (line,) = baselines(report([0, 1, 2, 3]))
    assert "1 of 3 flagged at 1.1" in line
    assert "paired ratios 0.980–1.200" in line  # the JAX case's 1.15 is not among them
    assert "may be the host's" in line
    (quiet,) = baselines(report([0, 2, 3]))
    assert "0 of 2 flagged" in quiet and "may be the host's" not in quiet
    assert "divided by the drift" not in line
    # with a drift divided out of the JAX cases, the baselines' ratios are still as measured
    drifted = ab.judge(cases, {}, 1.10, 1.05)
    assert drifted[3].estimate.ratio == pytest.approx(1.15 / 1.05)
    (raw,) = baselines(ab.markdown_report(ab.Comparison(side, side, cases, drifted, 1.05, 60.0),
                                          factor=1.10, machine="m"))
    assert "paired ratios 0.980–1.200 as measured, not divided by the drift" in raw
    # different NumPy versions: the baselines measure NumPy too, not the host alone
    assert baselines(report([0, 1, 2, 3], numpy_same=False)) == []
    assert baselines(report([3])) == []
