"""Noise calibration: two real asv runs of one commit (``--python=same``, quick profile), its
verdicts against ``asv compare`` on those results, asv's flagging rule on built pairs, and the
thresholds written into a copy of asv.conf.json that asv then loads."""

import glob
import itertools
import json
import math
import os
import re
import shutil
import subprocess
import sys
from types import SimpleNamespace

import pytest
from asv_tools import config

from jaxbench_helpers.analysis import results
from jaxbench_helpers.common import asvconfig, quiet
from jaxbench_helpers.host import history
from jaxbench_helpers.runtime import counts
from jaxbench_helpers.selftest import calibrate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MACHINE = "calibrate-test"
SUBSET = ["-b", "Versions", "-b", r"SquareMatmul\.time_run"]
PLANTED = "bench_matmul.SquareMatmul.time_run"
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]


def _two_commit_repo(path):
    """A repository of two empty commits: --python=same builds nothing from it."""
    subprocess.run(["git", "init", "-q", "-b", "main", path], check=True)
    hashes = []
    for message in ("first", "second"):
        subprocess.run(GIT + ["-C", path, "commit", "-q", "--allow-empty", "-m", message],
                       check=True)
        hashes.append(subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], check=True,
                                     capture_output=True, text=True).stdout.strip())
    return hashes


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """(tmp, config, [commit hashes], [run results folders], report text, edited config)."""
    tmp = tmp_path_factory.mktemp("calibrate")
    repo = str(tmp / "jax")
    hashes = _two_commit_repo(repo)
    conf = config(tmp, repo, profile="quick")
    edited = str(tmp / "committed.asv.conf.json")
    shutil.copy(os.path.join(ROOT, "asv.conf.json"), edited)
    rc = calibrate.main(["--config", conf, "--commit", hashes[0], "--python", "same",
                         "--machine", MACHINE, *SUBSET, "--work-dir", str(tmp / "work"),
                         "--allow-busy",
                         "-o", str(tmp / "report.md"), "--write-config", edited])
    assert rc == 0
    folders = [str(tmp / "work" / f"run-{i}" / "results") for i in (1, 2)]
    return tmp, conf, hashes, folders, (tmp / "report.md").read_text(), edited


def _result_file(results_dir):
    found = [f for f in glob.glob(os.path.join(results_dir, MACHINE, "*.json"))
             if not f.endswith("machine.json")]
    assert len(found) == 1, found
    return found[0]


def _raw_columns(results_dir):
    """{asv entry name: (median, q_25, q_75)} read straight from the result file's columns."""
    data = json.load(open(_result_file(results_dir)))
    columns = data["result_columns"]
    found = {}
    for name, row in data["results"].items():
        row = dict(zip(columns, row))
        params = row.get("params") or []
        combos = list(itertools.product(*params)) if params else [()]
        n = len(combos)
        for i, combo in enumerate(combos):
            label = f"({', '.join(combo)})" if combo else ""
            pick = [(row.get(c) or [None] * n)[i] for c in ("result", "stats_q_25",
                                                              "stats_q_75")]
            found[name + label] = tuple(pick)
    return found


def _loaded_cases(folders):
    loaded = [calibrate.load_run(f, MACHINE) for f in folders]
    return calibrate.cases([m for _, m, _ in loaded], loaded[0][2]), {c for c, _, _ in loaded}


def test_each_run_lands_in_its_own_scratch_results(calibrated):
    tmp, _, hashes, folders, _, _ = calibrated
    for folder in folders:
        data = json.load(open(_result_file(folder)))
        assert data["commit_hash"] == hashes[0]
        assert data["env_name"].startswith("existing-")
        assert os.path.exists(os.path.join(folder, "benchmarks.json"))
    # the derived config's own results folder was never written
    assert not os.path.exists(tmp / "results")


def test_each_run_after_the_first_starts_its_counts_from_another_heap_layout(calibrated):
    tmp = calibrated[0]
    recorded = [calibrate.recorded_environment(str(tmp / "work" / f"run-{i}" / "results"))
                for i in (1, 2)]
    assert recorded == [{}, {counts.HEAP_SHIFT_ENV: calibrate.COUNT_LAYOUTS[0]}]
    layouts = [calibrate.run_environment(i)[counts.HEAP_SHIFT_ENV] for i in range(2, 6)]
    assert len(set(layouts)) == 4
    for text in layouts:  # each one a layout the count child accepts
        assert counts.heap_shift({counts.HEAP_SHIFT_ENV: text}) is not None


def test_the_report_names_each_runs_heap_layout_where_it_has_counts():
    key = results.SeriesKey("bench_x.W.track_run_cpu_instructions", "", "e")
    count = calibrate.Case(key, results.COUNT_UNIT, [results.Measurement(1e6)] * 2)
    shifted = [{}, calibrate.run_environment(2)]
    line = calibrate.layouts_line([count], shifted)
    assert "run 1: unshifted" in line
    assert f"run 2: `{counts.HEAP_SHIFT_ENV}={calibrate.COUNT_LAYOUTS[0]}`" in line
    # runs left by a calibrate that did not vary the layout: said, not guessed
    assert "not recorded" in calibrate.layouts_line([count], [{}, None])
    assert calibrate.layouts_line([_case([1.0, 1.0])], shifted) == ""


def test_the_report_says_how_busy_the_machine_was(calibrated):
    tmp, _, _, _, text, _ = calibrated
    (record,) = quiet.read_records(str(tmp / "work" / calibrate.LOAD_RECORD))
    assert record.command == "calibrate" and record.seconds > 0
    assert f"The machine while it ran: {record.summary()}." in text


def test_medians_and_spreads_are_asvs_own_columns(calibrated):
    _, _, hashes, folders, _, _ = calibrated
    found, commits = _loaded_cases(folders)
    assert commits == {hashes[0]}
    raw = [_raw_columns(f) for f in folders]
    names = {c.name for c in found}
    assert names == set(raw[0]) | set(raw[1])
    assert {f"{PLANTED}('float32')", f"{PLANTED}('float64')",
            "bench_environment.Versions.track_jax_version"} <= names
    for case in found:
        assert case.complete, case
        for run, columns in zip(case.runs, raw):
            median, q25, q75 = columns[case.name]
            assert run.value == median
            if q25 is None:  # track_*: one value, no statistics
                assert calibrate.spread(run) is None
            else:
                assert calibrate.spread(run) == pytest.approx((q75 - q25) / median)
        low, high = sorted(v for v in case.values)
        assert case.change == pytest.approx(high / low - 1)
        assert case.ratios == [pytest.approx(case.values[1] / case.values[0])]
    versions = [c for c in found if c.key.benchmark.endswith("_version")]
    # facts of the environment cannot differ between runs of the same interpreter
    assert versions and all(c.change == 0 and not c.flagged_pairs(1.1) for c in versions)


def test_report_and_written_config_hold_the_proposals(calibrated):
    _, _, _, folders, text, edited = calibrated
    found, _ = _loaded_cases(folders)
    expected = calibrate.thresholds(found, margin=2.0)
    assert f"with a value in every run: **{len(found)}**, of 4 benchmarks" in text
    flagged = [c for c in found if c.flagged_pairs(1.1)]
    assert f"`asv compare --factor 1.1` between runs of this one commit: **{len(flagged)}**" \
        in text
    timed = [c for c in found if c.worst_spread is not None]
    quiet = [c for c in timed if c.worst_spread < 0.03]
    assert f"below 3%: **{len(quiet)} of {len(timed)} timed cases" in text
    steady = [c for c in timed if c.change is not None and c.change < 0.03]
    assert f"(change between runs below 3%): **{len(steady)} of {len(timed)} timed cases" in text
    for case in found:
        assert f"`{case.name}`" in text
        if calibrate.advice(case, 1.1, 0.05):
            assert text.split("## Too noisy")[1].split("## Proposed")[0].count(case.name) == 1
    for regex, threshold in expected.items():
        assert f"{json.dumps(regex)}: {threshold}" in text
    from asv.config import Config

    # the measured cases' entries are re-decided; the committed config's others stay
    replaced = {calibrate.threshold_regex(c.name) for c in found if c.complete}
    kept = {k: v for k, v in Config.load(os.path.join(ROOT, "asv.conf.json"))
            .regressions_thresholds.items() if k not in replaced}
    assert Config.load(edited).regressions_thresholds == {**kept, **expected}


def _rehome(path, folder, commit, rows=None):
    """A copy of a result file in ``folder``, moved onto ``commit``, with benchmark rows
    replaced by ``rows`` ({benchmark: {column: value}})."""
    data = json.load(open(path))
    data["commit_hash"] = commit
    columns = data["result_columns"]
    for name, row in (rows or {}).items():
        data["results"][name] = [row.get(c) for c in columns]
    with open(os.path.join(folder, commit[:8] + os.path.basename(path)[8:]), "w") as f:
        json.dump(data, f)


def _planted_rows(path):
    """Run 1's time_run row changed: float32 slower by far, with a tight interval (clearly
    different); float64 exactly as it was (identical)."""
    data = json.load(open(path))
    row = dict(zip(data["result_columns"], data["results"][PLANTED]))
    value = row["result"][0]
    # far enough that even a wide 99% interval of run 1 ends below the planted one
    scaled = max(3.0, 2 * row["stats_ci_99_b"][0] / value) * value
    for column, new in (("result", scaled), ("stats_ci_99_a", 0.99 * scaled),
                        ("stats_ci_99_b", 1.01 * scaled), ("stats_q_25", 0.995 * scaled),
                        ("stats_q_75", 1.005 * scaled)):
        row[column] = [new, row[column][1]]
    row.pop("samples", None)
    return {PLANTED: row}


def _asv_compare_marks(conf, base, head, factor):
    """asv compare's own verdict: asv entry name -> mark (+ worse, - better, ' ' same)."""
    proc = subprocess.run([sys.executable, "-m", "asv", "--config", conf, "compare", "--factor",
                           str(factor), "--machine", MACHINE, base, head],
                          capture_output=True, text=True, check=True)
    marks = {}
    for line in proc.stdout.splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if len(cells) == 5 and cells[4].startswith("bench_"):
            marks[cells[4]] = cells[0]
    assert marks, proc.stdout + proc.stderr
    return marks


def test_from_runs_reports_on_earlier_runs_without_running_asv(calibrated, tmp_path):
    tmp, conf, hashes, _, text, _ = calibrated
    out = tmp_path / "again.md"
    before = sorted(os.listdir(tmp / "work"))
    rc = calibrate.main(["--config", conf, "--commit", hashes[0], "--machine", MACHINE,
                         "--from-runs", str(tmp / "work"), "-o", str(out)])
    assert rc == 0
    again = out.read_text()
    assert sorted(os.listdir(tmp / "work")) == before  # no new run folder
    assert again.splitlines()[0] == text.splitlines()[0]  # "... measured 2 times"
    table = [line for line in text.splitlines() if line.startswith("| `bench_")]
    assert table and [line for line in again.splitlines() if line.startswith("| `bench_")] == (
        table)
    assert calibrate.main(["--config", conf, "--from-runs", str(tmp_path)]) == 1


@pytest.mark.parametrize("planted", [False, True])
def test_flags_agree_with_asv_compare(calibrated, tmp_path, planted):
    """Run 2 moved onto the second commit (as measured, or with run 1's time_run planted in
    it: float32 far slower, float64 identical): asv compare between the two commits marks
    exactly the cases the calibration flags."""
    _, conf, hashes, folders, _, _ = calibrated
    combined = tmp_path / "results"
    shutil.copytree(folders[0], combined)
    rows = _planted_rows(_result_file(folders[0])) if planted else None
    _rehome(_result_file(folders[1]), combined / MACHINE, hashes[1], rows)
    compare_conf = tmp_path / "asv.conf.json"
    compare_conf.write_text(json.dumps(dict(json.load(open(conf)),
                                            results_dir=str(combined))))
    marks = _asv_compare_marks(str(compare_conf), hashes[0], hashes[1], 1.1)
    measured = results.load_measurements(str(combined), MACHINE)
    found = calibrate.cases([measured[hashes[0]], measured[hashes[1]]])
    assert len(marks) == len(found)
    ours = {c.name for c in found if c.flagged_pairs(1.1)}
    theirs = {name for name, mark in marks.items() if mark in ("+", "-")}
    assert ours == theirs
    if planted:
        assert f"{PLANTED}('float32')" in ours
        assert f"{PLANTED}('float64')" not in ours
        assert not any(name.startswith("bench_environment") for name in ours)


# ---------------------------------------------------------------- asv's rule on built pairs


def _m(value, half_width, repeat=5, samples=None):
    """A measurement with a 99% interval of value ± half_width from ``repeat`` samples."""
    stats = {"ci_99_a": value - half_width, "ci_99_b": value + half_width,
             "q_25": value - half_width / 2, "q_75": value + half_width / 2, "number": 1,
             "repeat": repeat}
    return results.Measurement(value, stats, samples)


@pytest.mark.parametrize("a, b, expected", [
    (_m(1.0, 0.01), _m(1.0, 0.01), False),  # identical
    (_m(1.0, 0.01), _m(2.0, 0.01), True),  # twice as slow, intervals apart
    (_m(2.0, 0.01), _m(1.0, 0.01), True),  # twice as fast: flagged too
    (_m(1.0, 0.01), _m(1.08, 0.01), False),  # significant, but within the factor
    (_m(1.0, 0.4), _m(1.5, 0.4), False),  # beyond the factor, intervals overlap
    (_m(1.0, 0.4, repeat=1), _m(1.5, 0.4, repeat=1), True),  # one sample: the ratio decides
    (results.Measurement(1.0), results.Measurement(1.2), True),  # no statistics (track_*)
    (results.Measurement(1.0), results.Measurement(1.05), False),
    # recorded samples, wholly apart: Mann-Whitney U decides though the intervals overlap
    (_m(1.0, 0.4, samples=[1.0 + i / 100 for i in range(10)]),
     _m(1.5, 0.4, samples=[1.5 + i / 100 for i in range(10)]), True),
    (results.Measurement(None), _m(1.0, 0.01), False),  # failed: not a noise verdict
    (results.Measurement(math.nan), _m(1.0, 0.01), False),  # skipped
])
def test_flagging_rule_is_asvs(a, b, expected):
    assert calibrate.flagged(a, b, 1.1) is expected


def _case(values, half_width=0.01, name="bench_x.W.time_run", params="", env="e"):
    return calibrate.Case(results.SeriesKey(name, params, env), "seconds",
                          [_m(v, half_width * v) for v in values])


def test_case_statistics_over_three_runs():
    case = _case([1.0, 1.25, 1.0])
    assert case.spreads == [pytest.approx(0.01)] * 3
    assert case.worst_spread == pytest.approx(0.01)
    assert case.spread_quiet and not _case([1.0, 1.0, 1.0], half_width=0.2).spread_quiet
    assert case.change == pytest.approx(0.25)
    assert case.ratios == [pytest.approx(1.25), pytest.approx(1.0)]
    assert case.flagged_pairs(1.1) == [(1, 2), (2, 3)]
    assert case.flagged_pairs(1.3) == []
    assert "--factor 1.25" in calibrate.advice(case, 1.1, 0.05)
    failed = calibrate.Case(case.key, "seconds", [_m(1.0, 0.01), results.Measurement(None)])
    assert failed.failed and not failed.complete and failed.change is None
    unspread = calibrate.Case(case.key, "seconds", [results.Measurement(1.0)] * 3)
    assert unspread.worst_spread is None and not unspread.spread_quiet


def test_a_case_wide_within_runs_but_steady_between_them_is_judged_by_its_medians():
    """Slow spells of the host widen a run's quartiles while the run medians agree: the
    report lists such a case apart, without the advice for noise, and a case whose medians
    also moved stays among those not to trust."""
    wide = _case([1.0, 1.01, 1.0], half_width=0.2, name="bench_x.Wide.time_run")
    moved = _case([1.0, 1.04, 1.0], half_width=0.2, name="bench_x.Moved.time_run")
    narrow = _case([1.0, 1.01, 1.0], half_width=0.02, name="bench_x.Narrow.time_run")
    assert wide.medians_agree and narrow.medians_agree and not moved.medians_agree
    assert calibrate.wide_but_steady(wide, 1.1, 0.05)
    assert calibrate.advice(wide, 1.1, 0.05) == ""
    assert not calibrate.wide_but_steady(moved, 1.1, 0.05)
    assert "within a run" in calibrate.advice(moved, 1.1, 0.05)
    assert not calibrate.wide_but_steady(narrow, 1.1, 0.05)
    assert calibrate.advice(narrow, 1.1, 0.05) == ""

    found = [wide, moved, narrow]
    text = calibrate.markdown(found, commit="c" * 40, commit_name="c", runs=3, machine=MACHINE,
                              factor=1.1, margin=2.0, spread_limit=0.05, profile="quick",
                              proposed=calibrate.thresholds(found, margin=2.0), loads=[])
    noisy = text.split("## Too noisy to trust (1)")[1].split("## Wide")[0]
    apart = text.split("## Wide within a run, steady between runs (1)")[1] \
        .split("## Proposed")[0]
    assert "`bench_x.Moved.time_run`" in noisy and "Wide" not in noisy
    assert "| `bench_x.Wide.time_run` | 20.0% | 1.0% |" in apart
    assert calibrate.WIDE_BUT_STEADY_ADVICE in apart
    assert "calibrate again at another hour" in apart
    assert "* Run medians within 3% of each other (change between runs below 3%): " \
        "**2 of 3 timed cases (67%)**" in text
    assert "Moved" not in apart and "Narrow" not in apart


def test_the_summary_reads_the_numpy_baselines_apart_as_the_hosts_own_noise():
    """The NumPy baselines run no JAX: their count says what the host did in these runs,
    beside the suite's; a calibration of baselines alone needs no second line."""
    jax_case = _case([1.0, 1.0, 1.0], half_width=0.02, name="bench_x.W.time_run")
    wide = _case([1.0, 1.01, 1.0], half_width=0.2, name="bench_x.W.time_numpy", params="(a)")
    moved = _case([1.0, 1.2, 1.0], half_width=0.02, name="bench_x.W.time_numpy", params="(b)")
    steady = _case([1.0, 1.0, 1.0], half_width=0.02, name="bench_x.V.time_numpy")

    def summary(found):
        text = calibrate.markdown(found, commit="c" * 40, commit_name="c", runs=3,
                                  machine=MACHINE, factor=1.1, margin=2.0, spread_limit=0.05,
                                  profile="quick", proposed=calibrate.thresholds(found, 2.0),
                                  loads=[])
        return text.split("## ")[0]

    both = summary([jax_case, wide, moved, steady])
    assert ("* The NumPy baselines (`time_numpy`, no JAX in them: what the host did to plain "
            "compute in these runs): spread within a run below 3% for 2 of 3, run medians "
            "within 3% for 2 of 3\n") in both
    assert "the worse run) below 3%: **3 of 4 timed cases (75%)**" in both
    assert "(change between runs below 3%): **3 of 4 timed cases (75%)**" in both
    assert "NumPy baselines" not in summary([wide, moved, steady])


@pytest.mark.parametrize("change, expected", [
    (0.0, 0.05), (0.01, 0.05), (0.025, 0.05), (0.026, 0.1), (0.04, 0.1), (0.1, 0.2),
    (0.3, 0.6)])
def test_threshold_is_margin_times_change_rounded_up(change, expected):
    assert calibrate.proposed_threshold(_case([1.0, 1.0 + change]), margin=2) == \
        pytest.approx(expected)


@pytest.mark.parametrize("change, expected", [
    (0.0, 0.005), (0.001, 0.005), (0.0026, 0.01), (0.008, 0.02)])
def test_a_count_gets_a_threshold_ten_times_finer_even_below_asvs_default(change, expected):
    key = results.SeriesKey("bench_x.W.track_run_instructions", "", "e")
    count = calibrate.Case(key, "CPU instructions", [results.Measurement(v)
                                                for v in (1e6, 1e6 * (1 + change))])
    assert calibrate.proposed_threshold(count, margin=2) == pytest.approx(expected)
    timing = _case([1.0, 1.0 + change])
    found = calibrate.thresholds([count, timing], margin=2)
    # the timing stays at asv's default (no entry); the count gets its own, however small
    assert found == {calibrate.threshold_regex(key.benchmark): pytest.approx(expected)}


def test_the_report_gives_the_median_threshold_of_the_cases_other_than_counts():
    """The median counts the cases left at asv's default too (they get no entry)."""
    timings = [_case([1.0, 1.0 + c], name=f"bench_x.T{i}.time_run")
               for i, c in enumerate((0.0, 0.01, 0.04, 0.04, 0.2))]
    key = results.SeriesKey("bench_x.W.track_run_instructions", "", "e")
    count = calibrate.Case(key, "CPU instructions", [results.Measurement(1e6)] * 2)
    assert "over the 5 cases other than instruction counts: **0.10**" in \
        calibrate._median_of([*timings, count], margin=2)
    assert calibrate._median_of([count], margin=2) == ""


def test_asv_publish_picks_the_threshold_for_exactly_that_case():
    """asv's own lookup (the regressions page's data filter), with and without the branch
    suffix asv adds to each name."""
    from asv.plugins.regressions import _GraphDataFilter

    found = [_case([1.0, 1.2], params="('float32')"), _case([1.0, 1.01], params="('float64')"),
             _case([1.0, 1.2], params="('float32')", env="other")]
    proposed = calibrate.thresholds(found, margin=2)
    assert proposed == {r"bench_x\.W\.time_run\('float32'\)(@|$)": 0.4}
    lookup = _GraphDataFilter(SimpleNamespace(regressions_thresholds=proposed), None, {})
    for branch in ({"branch": "main"}, {}):
        graph = SimpleNamespace(params=branch)

        def threshold(entry, graph=graph):
            return lookup._get_threshold(graph, None, entry)

        assert threshold("bench_x.W.time_run('float32')") == 0.4
        assert threshold("bench_x.W.time_run('float64')") == 0.05
        assert threshold("bench_x.W.time_run_other('float32')") == 0.05
        assert threshold("bench_x.W.time_run") == 0.05


# ---------------------------------------------------------------- the config file


def _comment_lines(text):
    return [line for line in text.splitlines() if line.strip().startswith("//")]


def test_thresholds_go_into_a_copy_of_the_committed_config(tmp_path):
    from asv import util
    from asv.config import Config

    path = str(tmp_path / "asv.conf.json")
    shutil.copy(os.path.join(ROOT, "asv.conf.json"), path)
    original = open(path).read()
    committed = Config.load(path).regressions_thresholds  # the calibrated ones stay
    first = {r"a\.b(@|$)": 0.1, r"c\.d\('x'\)(@|$)": 0.25}
    assert calibrate.write_thresholds(path, first) == dict(sorted({**committed,
                                                                    **first}.items()))
    text = open(path).read()
    assert text.splitlines()[:4] == original.splitlines()[:4]
    assert _comment_lines(text) == _comment_lines(original)
    assert text.index('"regressions_thresholds"') < text.index('"benchmark_dir"')
    assert Config.load(path).regressions_thresholds == {**committed, **first}
    before, after = util.load_json(os.path.join(ROOT, "asv.conf.json"), js_comments=True), \
        util.load_json(path, js_comments=True)
    before.pop("regressions_thresholds", None)
    assert after.pop("regressions_thresholds") == {**committed, **first} and after == before

    # again: the calibrated entries are re-decided, a hand-written one stays, one key only
    with open(path) as f:
        text = f.read().replace('"a\\\\.b(@|$)": 0.1', '"a\\\\.b(@|$)": 0.1,\n        '
                                '"hand.*": 0.5')
    with open(path, "w") as f:
        f.write(text)
    assert Config.load(path).regressions_thresholds["hand.*"] == 0.5
    merged = calibrate.write_thresholds(path, {r"e(@|$)": 0.15},
                                        replaced=[r"a\.b(@|$)", r"c\.d\('x'\)(@|$)"])
    assert merged == {**committed, "hand.*": 0.5, r"e(@|$)": 0.15}
    text = open(path).read()
    assert text.count('"regressions_thresholds"') == 1
    assert Config.load(path).regressions_thresholds == merged
    assert _comment_lines(text) == _comment_lines(original)
    subprocess.run([sys.executable, "-c", "from asv.config import Config; import sys; "
                    "Config.load(sys.argv[1])", path], check=True)


def test_thresholds_in_a_config_without_benchmark_dir(tmp_path):
    from asv.config import Config

    path = tmp_path / "asv.conf.json"
    path.write_text('// a comment\n{\n    // the repo\n    "version": 1,\n    "repo": "."\n}\n')
    calibrate.write_thresholds(str(path), {"x": 0.2})
    assert path.read_text().startswith("// a comment\n{\n")
    assert Config.load(str(path)).regressions_thresholds == {"x": 0.2}


def test_a_config_asv_cannot_read_is_left_alone(tmp_path):
    path = tmp_path / "asv.conf.json"
    path.write_text('{"version": 1, "repo": ".", "regressions_thresholds": [1]}\n')
    with pytest.raises(calibrate.CalibrationError, match="not a dict"):
        calibrate.write_thresholds(str(path), {"x": 0.2})
    assert "[1]" in path.read_text()


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("argv, message", [
    (["--runs", "1"], "--runs 1: comparing needs 2 runs"),
    (["--factor", "0.9"], "--factor 0.9: must be above 1"),
    (["--profile", "huge"], "--profile 'huge': use one of quick, regular, large"),
    (["--write-config", "/nonexistent/asv.conf.json"], "does not exist"),
    (["--installs", "1"], "--installs 1: comparing needs 2 installs"),
    (["--installs", "3", "--runs", "3"], "--runs and --installs: pass one"),
    (["--installs", "2", "--python", "same"], "an existing environment installs nothing"),
    (["--from-runs", "w", "--installs", "2"], "--from-runs reports on the runs already"),
    (["--widen-only"], "--widen-only applies to --write-config"),
])
def test_bad_options_are_named(argv, message, capsys):
    with pytest.raises(SystemExit) as exit:
        calibrate.main(argv)
    assert exit.value.code == 2
    assert message in capsys.readouterr().err


def test_a_missing_config_or_a_scratch_folder_in_results_is_refused(tmp_path, capsys):
    assert calibrate.main(["--config", str(tmp_path / "none.json")]) == 1
    assert "--config" in capsys.readouterr().err
    repo = str(tmp_path / "jax")
    _two_commit_repo(repo)
    conf = config(tmp_path, repo, profile="quick")
    rc = calibrate.main(["--config", conf, "--python", "same", "--machine", MACHINE,
                         "--work-dir", str(tmp_path / "results" / "calib"), *SUBSET,
                         "--allow-busy"])
    assert rc == 1
    assert re.search(r"--work-dir .* inside the config's results folder",
                     capsys.readouterr().err)


# ---------------------------------------------------------------- installs of the same code


def _git_out(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_installs_are_the_commit_and_neutral_commits_on_top_in_a_scratch_clone(tmp_path):
    repo = str(tmp_path / "jax")
    hashes = _two_commit_repo(repo)
    refs_before = _git_out(repo, "show-ref")
    conf = asvconfig.load(config(tmp_path, repo))
    work = str(tmp_path / "work")
    cloned, commits = calibrate.neutral_installs(conf, hashes[0], 3, work)

    assert len(commits) == 3 and commits[0] == hashes[0]
    clone = cloned["repo"]
    assert clone != repo and cloned["results_dir"] == conf["results_dir"]
    for parent, child in zip(commits, commits[1:]):
        assert _git_out(clone, "rev-parse", f"{child}^") == parent
        # each one touches a text file outside the package, nothing else
        assert _git_out(clone, "show", "--name-only", "--format=", child) == (
            history.NEUTRAL_FILE)
    assert calibrate.recorded_installs(work) == commits
    assert _git_out(repo, "show-ref") == refs_before  # the source repository is only read

    # a second calibration into the same folder, and a commit the repository lacks, are refused
    with pytest.raises(calibrate.CalibrationError, match="exists already"):
        calibrate.neutral_installs(conf, hashes[0], 2, work)
    with pytest.raises(calibrate.CalibrationError, match="no commit 'nonesuch'"):
        calibrate.neutral_installs(conf, "nonesuch", 2, str(tmp_path / "other"))
    assert calibrate.recorded_installs(str(tmp_path / "other")) is None


def test_widen_only_raises_entries_and_never_lowers_or_removes_one(tmp_path):
    from asv.config import Config

    path = str(tmp_path / "asv.conf.json")
    shutil.copy(os.path.join(ROOT, "asv.conf.json"), path)
    calibrate.write_thresholds(path, {"a(@|$)": 0.01, "b(@|$)": 0.02, "c(@|$)": 0.05})
    merged = calibrate.write_thresholds(path, {"a(@|$)": 0.02, "b(@|$)": 0.01,
                                               "d(@|$)": 0.005},
                                        replaced=["c(@|$)"], widen_only=True)
    mine = {k: v for k, v in merged.items() if len(k) == 6}
    assert mine == {"a(@|$)": 0.02, "b(@|$)": 0.02, "c(@|$)": 0.05, "d(@|$)": 0.005}
    assert Config.load(path).regressions_thresholds == merged


def test_a_report_on_installs_names_them_and_their_runs_must_match(tmp_path):
    """Two real asv runs of two installs' commits (``--python=same`` stands in for the
    installing, which the slow test below does for real), reported with --from-runs."""
    repo = str(tmp_path / "jax")
    hashes = _two_commit_repo(repo)
    conf = asvconfig.load(config(tmp_path, repo, profile="quick"))
    work = str(tmp_path / "work")
    cloned, commits = calibrate.neutral_installs(conf, hashes[1], 2, work)
    calibrate.measure(cloned, commits=commits, machine=MACHINE, bench=SUBSET[1::2],
                      profile="quick", work_dir=work, same_python=True, echo=False)
    out = tmp_path / "report.md"
    edited = str(tmp_path / "edited.asv.conf.json")
    shutil.copy(os.path.join(ROOT, "asv.conf.json"), edited)
    rc = calibrate.main(["--config", config(tmp_path, repo, profile="quick"), "--commit",
                         hashes[1], "--machine", MACHINE, "--from-runs", work, "-o", str(out),
                         "--write-config", edited, "--widen-only"])
    assert rc == 0
    text = out.read_text()
    assert text.splitlines()[0] == f"# Noise calibration: {hashes[1]} installed 2 times"
    assert (f"commit `{hashes[1][:8]}` and the neutral commits on top of it (`{commits[1][:8]}`:"
            f" each adds a line to `{history.NEUTRAL_FILE}`") in text
    assert re.search(r"Written into `.*edited.asv.conf.json` where wider than its entry: "
                     r"\d+ of \d+ raised", text)

    # a record that names other commits than the runs measured is refused, not reported
    with open(os.path.join(work, calibrate.INSTALLS_RECORD), "w") as f:
        json.dump({"repo": cloned["repo"], "commits": [commits[1], commits[0]]}, f)
    assert calibrate.main(["--config", config(tmp_path, repo), "--machine", MACHINE,
                           "--from-runs", work]) == 1


@pytest.mark.slow
def test_installs_build_and_install_each_commit_anew(tmp_path, sdist_cache, capsys):
    """``--installs 2`` on a release-history repository of jax 0.10.2: asv builds an
    environment and installs the release, then the neutral commit, and each run's results
    belong to its own commit."""
    repo = str(tmp_path / "jax")
    (release, release_hash), = history.build(repo, first="0.10.2", last="0.10.2",
                                             sdist_cache=sdist_cache)
    conf = config(tmp_path, repo, profile="quick")
    work = tmp_path / "work"
    rc = calibrate.main(["--config", conf, "--commit", f"jax-v{release}", "--installs", "2",
                         "--machine", MACHINE, "-b", r"Versions\.track_jax_version",
                         "--work-dir", str(work), "--allow-busy", "-o", str(tmp_path / "r.md")])
    assert rc == 0
    commits = calibrate.recorded_installs(str(work))
    assert commits[0] == release_hash and len(commits) == 2
    log = capsys.readouterr().err
    for commit in commits:
        assert f"Installing {commit[:8]}" in log, log[-3000:]
    # the environment run 1 built is laid out afresh before run 2, as a new install is
    assert re.search(r"run 2 of 2 .*\n.*: [1-9]\d* shared objects \(\d+ MiB\) written afresh",
                     log), log[-3000:]
    for i, commit in enumerate(commits, 1):
        data = json.load(open(_result_file(str(work / f"run-{i}" / "results"))))
        assert data["commit_hash"] == commit
        assert data["env_name"].startswith("virtualenv-")  # built, not this interpreter
    text = (tmp_path / "r.md").read_text()
    assert "installed 2 times" in text.splitlines()[0]
