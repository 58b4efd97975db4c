"""The regression report: the history mode on the committed results of real releases and on a
results folder built to pin down the step rule, and the compare mode against asv compare."""

import datetime
import glob
import itertools
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys

import pytest
from asv_tools import config

from jaxbench_helpers.analysis import report, results
from jaxbench_helpers.common import markdown, quiet
from jaxbench_helpers.host import history

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MACHINE = "cpu-2core-shared-vm"
# upstream commits that jax sdists record (the rest show as unknown here)
UPSTREAM = {"0.10.0": "a33ed614c58ee8a10d0b7536c50c2609c38500c1",
            "0.10.1": "619764c15117fbefc4ba13ab941871cb514c23f6",
            "0.10.2": "990e6a0b84138346e6a38785412f36356e0e5dc3"}
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]


def _commit(repo, message, tag=None):
    subprocess.run(GIT + ["-C", repo, "commit", "-q", "--allow-empty", "-m", message],
                   check=True)
    if tag:
        subprocess.run(GIT + ["-C", repo, "tag", tag], check=True)
    return subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()


def _init(repo):
    os.makedirs(repo)
    subprocess.run(["git", "init", "-q", "-b", "main", repo], check=True)


def _rehome(path, commit):
    """Move an asv result file onto ``commit``: its hash field and its file-name prefix."""
    data = json.load(open(path))
    data["commit_hash"] = commit
    os.remove(path)
    name = commit[:8] + os.path.basename(path)[8:]
    with open(os.path.join(os.path.dirname(path), name), "w") as f:
        json.dump(data, f)
    return data


def _jax_version(data):
    code = data["results"]["bench_environment.Versions.track_jax_version"][0][0]
    return f"{code // 10000}.{code // 100 % 100}.{code % 100}"


def _version_key(version):
    return tuple(int(p) for p in version.split("."))


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """The committed results of the two newest releases measured on MACHINE, on a two-release
    repository.

    The numbers are the committed ones; only the commits change, from the full release history
    (which takes every release since 0.4.20 to rebuild) to two commits made here with the same
    tags and upstream commits. Returns (tmp, repo, {version: (commit, result data)}).
    """
    tmp = tmp_path_factory.mktemp("report")
    results = tmp / "results"
    (results / MACHINE).mkdir(parents=True)
    committed = os.path.join(ROOT, "results", MACHINE)
    shutil.copy(os.path.join(committed, "machine.json"), results / MACHINE)
    shutil.copy(os.path.join(ROOT, "results", "benchmarks.json"), results / "benchmarks.json")
    files = {}
    for path in glob.glob(os.path.join(committed, "*-*.json")):
        data = json.load(open(path))
        if "bench_environment.Versions.track_jax_version" in data["results"]:
            files[_jax_version(data)] = path
    newest = sorted(files, key=_version_key)[-2:]
    assert len(newest) == 2, f"{committed} should hold results of two releases or more"
    repo = str(tmp / "jax-releases")
    _init(repo)
    releases = {}
    for version in newest:
        copy = shutil.copy(files[version], results / MACHINE)
        info = history.Sdist(version, 0, "", UPSTREAM.get(version, "unknown"))
        commit = _commit(repo, history.commit_message(info), tag=f"jax-v{version}")
        releases[version] = (commit, _rehome(copy, commit))
    return tmp, repo, releases


def _table(markdown, heading):
    """The data rows of the table under the section whose heading starts with ``heading``."""
    section = markdown.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if re.match(r"\| \d+ \|", line)]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows]


def _committed_pairs(releases):
    """(benchmark, params) -> (value, value, stats, stats, samples, samples) of the older and the
    newer release, read from the JSON, for every pair that a ratio can compare."""
    old, new = (releases[v][1] for v in sorted(releases, key=_version_key))
    pairs = {}
    for name, row in old["results"].items():
        if name.startswith("bench_environment.") or name not in new["results"]:
            continue
        a = dict(zip(old["result_columns"], row))
        b = dict(zip(new["result_columns"], new["results"][name]))
        if a["version"] != b["version"]:
            continue
        combos = list(itertools.product(*a["params"])) if a["params"] else [()]
        for i, combo in enumerate(combos):
            va, vb = a["result"][i], b["result"][i]
            if any(v is None or v != v or v <= 0 for v in (va, vb)):
                continue
            stats = [{k[6:]: d[k][i] for k in d if k.startswith("stats_") and d[k]}
                     for d in (a, b)]
            samples = [d["samples"][i] if d.get("samples") else None for d in (a, b)]
            label = f"({', '.join(combo)})" if combo else ""
            pairs[(name, label)] = (va, vb, *stats, *samples)
    return pairs


def _asv_different(stats_a, stats_b, samples_a, samples_b):
    """asv's rule in asv compare: Mann-Whitney U on samples where recorded, else 99% intervals
    that do not overlap; no verdict (different) with a single repeat or no statistics."""
    if not stats_a or not stats_b or 1 in (stats_a.get("repeat"), stats_b.get("repeat")):
        return True
    if samples_a is not None and samples_b is not None:
        from asv import _stats

        return _stats.is_different(samples_a, samples_b, stats_a, stats_b)
    return stats_a["ci_99_b"] < stats_b["ci_99_a"] or stats_b["ci_99_b"] < stats_a["ci_99_a"]


# the change word -> (the value went up, a regression)
WORDS = {"slower": (True, True), "faster": (False, False), "larger": (True, True),
         "smaller": (False, False), "lower": (False, True), "higher": (True, False)}


def test_history_report_on_the_committed_results(released, capsys):
    tmp, repo, releases = released
    old, new = sorted(releases, key=_version_key)
    out = tmp / "REPORT.md"
    rc = report.main(["--results-dir", str(tmp / "results"), "--repo", repo, "--top", "1000",
                      "--factor", "1.1", "-o", str(out)])
    assert rc == 0, capsys.readouterr().err
    text = out.read_text()
    pairs = _committed_pairs(releases)
    assert pairs
    # with two releases every window holds one value, so rule (2) always holds: a step is a
    # ratio beyond the factor that asv's test finds different
    expected = {key: b / a for key, (a, b, *rest) in pairs.items()
                if (b / a > 1.1 or a / b > 1.1) and _asv_different(*rest)}
    baselines = {key: b / a for key, (a, b, *_) in pairs.items()
                 if results.is_baseline(key[0])}
    assert baselines, "the committed results should hold the NumPy baselines"
    found = {}
    for heading, worse in (("Regressions", True), ("Improvements", False)):
        rows = _table(text, heading)
        sizes = [abs(math.log(float(row[7]))) for row in rows]
        assert sizes == sorted(sizes, reverse=True), heading
        for row in rows:
            _, workload, params, phase, releases_cell, _, _, ratio, change, upstream, host = row
            name = f"{workload.strip('`')}.{phase.strip('`')}"
            key = (name, params.replace("\\", "").replace("—", ""))
            found[key] = float(ratio)
            # both releases ran one NumPy: a timing's cell is the other baselines' ratios
            others = [r for k, r in baselines.items() if k != key]
            if not name.split(".")[-1].startswith("track_"):
                assert host.startswith(f"{statistics.median(others):.2f} ({min(others):.2f}–"
                                       f"{max(others):.2f}, {len(others)})"), row
            else:
                assert host == "—", row
            assert WORDS[change.split()[-1]] == (float(ratio) > 1, worse), row
            # the newest release has no release after it to confirm the step
            assert releases_cell == f"jax-v{old} → jax-v{new} †"
            if old in UPSTREAM and new in UPSTREAM:
                assert f"compare/{UPSTREAM[old]}...{UPSTREAM[new]}" in upstream
    assert set(found) == set(expected)
    for key, ratio in found.items():
        assert ratio == pytest.approx(expected[key], abs=0.006)
    assert "`bench_environment.Versions" not in text
    # the per-phase summary counts every phase of the committed results
    phases = {name.rsplit(".", 1)[1] for name, _ in pairs}
    summary = text.split("## By phase", 1)[1].split("\n## ", 1)[0]
    assert {p for p in phases if f"| `{p}` |" in summary} == phases


def _asv_compare_marks(conf, base, head, factor):
    """asv compare's own verdict: benchmark name -> mark (+ worse, - better, ! broke)."""
    proc = subprocess.run([sys.executable, "-m", "asv", "--config", conf, "compare",
                           "--factor", str(factor), "--machine", MACHINE, base, head],
                          capture_output=True, text=True, check=True)
    marks = {}
    for line in proc.stdout.splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if len(cells) == 5 and cells[4].startswith("bench_"):
            marks[cells[4]] = cells[0]
    assert marks, proc.stdout + proc.stderr
    return marks


@pytest.mark.parametrize("factor", [1.1, 1.5])
def test_compare_agrees_with_asv_compare(released, tmp_path, factor):
    tmp, repo, releases = released
    conf = config(tmp_path, repo)
    with open(conf) as f:
        derived = json.load(f)
    derived["results_dir"] = str(tmp / "results")
    with open(conf, "w") as f:
        json.dump(derived, f)
    old, new = (f"jax-v{v}" for v in sorted(releases, key=_version_key))
    marks = _asv_compare_marks(conf, old, new, factor)
    out = tmp_path / "comment.md"
    rc = report.main(["compare", old, new, "--config", conf, "--factor", str(factor),
                      "-o", str(out)])
    text = out.read_text()
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in text.splitlines()
            if line.startswith("| ") and "`bench_" in line]
    ours = {row[1].strip("`"): row[0] for row in rows}
    # versions change by design and the report leaves them out
    asv_changed = {name: mark for name, mark in marks.items() if mark in ("+", "-", "!", "*")
                   and not name.startswith("bench_environment.")}
    assert set(ours) == set(asv_changed)
    for name, word in ours.items():
        # asv marks a rise '+' whatever the unit; the report words it by the unit
        mark = {"failed": "!", "fixed": "*"}.get(word) or "+-"[not WORDS[word][0]]
        assert mark == asv_changed[name], (name, word)
    # regressions first, then improvements, then failures; each by size
    kinds = [WORDS[w][1] for w in (row[0] for row in rows) if w in WORDS]
    assert kinds == sorted(kinds, reverse=True)
    slower = [float(row[4]) for row in rows if row[0] == "slower"]
    assert slower == sorted(slower, reverse=True)
    newest = releases[sorted(releases, key=_version_key)[-1]][1]
    failed = any(value is None for name, row in newest["results"].items()
                 if not name.startswith("bench_environment.")
                 for value in (row[0] if row[0] is not None else [None]))
    regressed = any(WORDS.get(w, (0, False))[1] for w in ours.values())
    assert rc == (2 if failed else 1 if regressed else 0)
    assert all(commit[:8] in text for commit, _ in releases.values())
    assert ("**Failed at HEAD:** none." in text) == (not failed)


def test_compare_names_what_is_missing(released, tmp_path, capsys):
    tmp, repo, _ = released
    rc = report.main(["compare", "HEAD", "no-such-ref", "--results-dir",
                      str(tmp / "results"), "--repo", repo])
    assert rc == 3
    assert "'no-such-ref' names no commit" in capsys.readouterr().err
    # a commit on no branch, so the shared repository's main stays as it is
    other = subprocess.run(GIT + ["-C", repo, "commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m",
                                  "unmeasured"], check=True, capture_output=True,
                           text=True).stdout.strip()
    rc = report.main(["compare", "HEAD", other, "--results-dir", str(tmp / "results"),
                      "--repo", repo])
    assert rc == 3
    err = capsys.readouterr().err
    assert f"no results for HEAD {other[:12]}" in err and "asv continuous" in err


def test_history_report_says_which_option_is_wrong(released, tmp_path, capsys):
    tmp, repo, _ = released
    assert report.main(["--results-dir", str(tmp_path / "none")]) == 1
    assert "--results-dir" in capsys.readouterr().err
    assert report.main(["--results-dir", str(tmp / "results"), "--repo", repo,
                        "--machine", "nope"]) == 1
    assert f"it has {MACHINE}" in capsys.readouterr().err
    unrelated = str(tmp_path / "unrelated")
    _init(unrelated)
    _commit(unrelated, "something else")
    assert report.main(["--results-dir", str(tmp / "results"), "--repo", unrelated]) == 1
    assert "none of the 2 commits with results" in capsys.readouterr().err


# ---------------------------------------------------------------- the step rule, pinned down

ENV = "virtualenv-py3.11-JAXBENCH_PLATFORMcpu-JAXBENCH_PROFILEquick"
COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a",
           "stats_ci_99_b", "stats_q_25", "stats_q_75", "stats_number", "stats_repeat"]
NAN = float("nan")
# per benchmark: unit, params, then per commit one value per parameter (None failed, NaN
# skipped); a relative 99% interval half-width; code versions per commit
SERIES = {
    # a threefold slowdown from commit 3 on, in both dtypes; float64 failed at 2, skipped at 5
    "bench_x.W.time_run": ("seconds", [["'float32'", "'float64'"]],
                           [[1e-3, 1e-3], [1.02e-3, 1e-3], [0.98e-3, None], [3e-3, 3e-3],
                            [3.1e-3, 3e-3], [2.9e-3, NAN], [3.05e-3, 3e-3]], 0.01, None),
    # a one-commit spike: never a step
    "bench_x.W.time_compile": ("seconds", [], [[1.0], [1.0], [5.0], [1.0], [1.0], [1.0], [1.0]],
                               0.01, None),
    # twice as fast from commit 4 on
    "bench_x.W.time_dispatch_100_calls": ("seconds", [], [[4e-6]] * 4 + [[2e-6]] * 3, 0.01,
                                          None),
    # +50% but the intervals overlap (asv's test says not different): not reported
    "bench_x.W.time_to_host": ("seconds", [], [[1e-3]] * 3 + [[1.5e-3]] * 4, 0.6, None),
    # threefold, but the benchmark's code changed at the same commit: not comparable
    "bench_x.W.time_trace": ("seconds", [], [[1.0]] * 3 + [[3.0]] * 4, 0.01,
                             ["1"] * 3 + ["2"] * 4),
    # doubled at the newest commit only: reported, marked not yet confirmed
    "bench_x.W.time_lower": ("seconds", [], [[1.0]] * 6 + [[2.5]], 0.01, None),
    # a rate that halved: worse, since more is better
    "bench_x.W.track_bandwidth": ("bytes/s", [], [[1e9]] * 3 + [[5e8]] * 4, 0.01, None),
    # fails at the newest commit
    "bench_x.W.time_to_device": ("seconds", [], [[1e-3]] * 6 + [[None]], 0.01, None),
    # versions change by design: never a step
    "bench_environment.Versions.track_jax_version": ("version", [],
                                                     [[100 + i] for i in range(7)], 0, None),
}


def _result_file(commit, index, series=SERIES):
    results = {}
    for name, (_, params, values, width, versions) in series.items():
        row = values[index]
        ok = [v if v is not None and v == v else None for v in row]
        lo = [v * (1 - width) if v is not None else None for v in ok]
        hi = [v * (1 + width) if v is not None else None for v in ok]
        version = versions[index] if versions else "1"
        results[name] = [row, params, version, 0, 1.0, lo, hi, lo, hi, [1] * len(row),
                         [10] * len(row)]
    return {"commit_hash": commit, "env_name": ENV, "date": 1000 * index,
            "params": {"machine": "synthetic", "python": "3.11"}, "python": "3.11",
            "requirements": {}, "env_vars": {}, "result_columns": COLUMNS,
            "results": results, "durations": {}, "version": 2}


def _releases(repo, n=7):
    _init(repo)
    return [_commit(repo, f"jax 0.1.{i}\n\nUpstream commit: {i:040x}", tag=f"jax-v0.1.{i}")
            for i in range(n)]


def _write_results(tmp, commits, series):
    folder = tmp / "results" / "synthetic"
    folder.mkdir(parents=True)
    (folder / "machine.json").write_text(json.dumps({"machine": "synthetic", "version": 1}))
    for i, commit in enumerate(commits):
        data = _result_file(commit, min(i, 6), series)
        (folder / f"{commit[:8]}-{ENV}.json").write_text(json.dumps(data))
    units = {name: {"unit": unit, "name": name} for name, (unit, *_) in series.items()}
    (tmp / "results" / "benchmarks.json").write_text(json.dumps(units))


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """Seven releases on main and one commit on a side branch, each with a results file."""
    tmp = tmp_path_factory.mktemp("steps")
    repo = str(tmp / "repo")
    commits = _releases(repo)
    subprocess.run(["git", "-C", repo, "checkout", "-q", "-b", "side", commits[2]], check=True)
    side = _commit(repo, "an experiment off main")
    subprocess.run(["git", "-C", repo, "checkout", "-q", "main"], check=True)
    _write_results(tmp, commits + [side], SERIES)
    return tmp, repo, commits


def test_step_rule_on_built_results(synthetic):
    tmp, repo, commits = synthetic
    found = report.history(str(tmp / "results"), "synthetic", repo, window=2, factor=1.1)
    steps = {(s.key.benchmark, s.key.params): s for s in found.steps}
    assert set(steps) == {
        ("bench_x.W.time_run", "('float32')"), ("bench_x.W.time_run", "('float64')"),
        ("bench_x.W.time_dispatch_100_calls", ""), ("bench_x.W.time_lower", ""),
        ("bench_x.W.track_bandwidth", ""),
    }
    run32, run64 = steps[("bench_x.W.time_run", "('float32')")], steps[("bench_x.W.time_run",
                                                                        "('float64')")]
    assert (run32.before.label, run32.after.label) == ("jax-v0.1.2", "jax-v0.1.3")
    assert run32.median_before == pytest.approx(1e-3)  # median of 1.02 and 0.98 ms
    assert run32.median_after == pytest.approx(3.05e-3)  # median of 3.0 and 3.1 ms
    assert run32.worse and (run32.n_before, run32.n_after) == (2, 2)
    # float64 failed at 0.1.2: its step runs from the last release with a value
    assert (run64.before.label, run64.after.label) == ("jax-v0.1.1", "jax-v0.1.3")
    assert run64.ratio == pytest.approx(3.0)
    faster = steps[("bench_x.W.time_dispatch_100_calls", "")]
    assert not faster.worse and faster.ratio == pytest.approx(0.5)
    assert faster.after.label == "jax-v0.1.4"
    newest = steps[("bench_x.W.time_lower", "")]
    assert newest.n_after == 1 and newest.after.label == "jax-v0.1.6"
    bandwidth = steps[("bench_x.W.track_bandwidth", "")]
    assert bandwidth.worse and bandwidth.direction.worse == "lower"
    assert found.counts == {"failed": 2, "skipped": 1, "off_branch": 1}
    assert [k.benchmark for k in found.failed_newest] == ["bench_x.W.time_to_device"]
    assert all(c.upstream == f"{i:040x}" for i, c in enumerate(found.commits))


def test_step_report_markdown_on_built_results(synthetic):
    tmp, repo, _ = synthetic
    found = report.history(str(tmp / "results"), "synthetic", repo, window=2, factor=1.1)

    def markdown(top):
        return report.history_markdown(found, results_dir=str(tmp / "results"),
                                       machine="synthetic", repo=repo, branch="main", top=top,
                                       window=2, factor=1.1)

    text = markdown(top=10)
    worse = _table(text, "Regressions")
    assert [(r[1], r[2], r[3]) for r in worse] == [
        ("`bench_x.W`", "('float64')", "`time_run`"),
        ("`bench_x.W`", "('float32')", "`time_run`"),
        ("`bench_x.W`", "—", "`time_lower`"),
        ("`bench_x.W`", "—", "`track_bandwidth`"),
    ]  # largest first, by the nearest values: float32's 1.02 ms before makes its step 2.94x
    assert worse[0][4:9] == ["jax-v0.1.1 → jax-v0.1.3", "1.00ms", "3.00ms", "3.00",
                             "≥3.00× slower"]
    assert worse[1][7:9] == ["3.05", "≥2.94× slower"]
    assert f"compare/{2:040x}...{3:040x}" in worse[1][9]
    assert worse[2][4] == "jax-v0.1.5 → jax-v0.1.6 †"
    assert worse[3][5:9] == ["1e+09 bytes/s", "5e+08 bytes/s", "0.50", "≥2.00× lower"]
    better = _table(text, "Improvements")
    assert [r[4:9] for r in better] == [["jax-v0.1.3 → jax-v0.1.4", "4.00μs", "2.00μs", "0.50",
                                         "≥2.00× faster"]]
    assert "* `bench_x.W.time_to_device`" in text
    assert "1 measured commits not on the branch ignored" in text
    # no NumPy baselines measured: no column for them
    assert "NumPy baselines there" not in text and len(worse[0]) == 10
    summary = text.split("## By phase", 1)[1]
    assert summary.index("`time_run`") < summary.index("`time_dispatch_100_calls`")
    short = markdown(top=1)
    assert "## Regressions (4 found, top 1)" in short
    assert len(_table(short, "Regressions")) == 1


# the NumPy baselines step 1.2x at commit 3 (two of three); NumPy's version changes at commit 5
BASELINE_SERIES = {
    "bench_x.W.time_numpy": ("seconds", [], [[1e-3]] * 3 + [[1.2e-3]] * 4, 0.01, None),
    "bench_z.U.time_numpy": ("seconds", [], [[3e-3]] * 3 + [[3.6e-3]] * 4, 0.01, None),
    "bench_y.V.time_numpy": ("seconds", [], [[2e-3]] * 7, 0.01, None),
    "bench_environment.Versions.track_numpy_version": ("version", [],
                                                       [[12604]] * 5 + [[20505]] * 2, 0, None),
    # threefold at commit 3: beyond what the baselines did
    "bench_x.W.time_run": ("seconds", [], [[1e-3]] * 3 + [[3e-3]] * 4, 0.01, None),
    # 1.15x at commit 3: no further than the baselines' median went the same way
    "bench_x.W.time_compile": ("seconds", [], [[1.0]] * 3 + [[1.15]] * 4, 0.01, None),
    # doubled at commit 5, where NumPy changed
    "bench_x.W.time_dispatch_100_calls": ("seconds", [], [[1e-6]] * 5 + [[2e-6]] * 2, 0.01,
                                          None),
    # not a timing: the machine's compute speed says nothing of it
    "bench_x.W.track_bandwidth": ("bytes/s", [], [[1e9]] * 3 + [[5e8]] * 4, 0.01, None),
}


def test_history_says_what_the_numpy_baselines_did_at_each_step(tmp_path):
    repo = str(tmp_path / "repo")
    _write_results(tmp_path, _releases(repo), BASELINE_SERIES)
    found = report.history(str(tmp_path / "results"), "synthetic", repo, window=2, factor=1.1)
    text = report.history_markdown(found, results_dir=str(tmp_path / "results"),
                                   machine="synthetic", repo=repo, branch="main", top=10,
                                   window=2, factor=1.1)
    assert "**NumPy baselines there.**" in text
    cells = {(row[1], row[3]): row[10] for heading in ("Regressions", "Improvements")
             for row in _table(text, heading)}
    assert cells == {
        ("`bench_x.W`", "`time_run`"): "1.20 (1.00–1.20, 3)",
        ("`bench_x.W`", "`time_compile`"): "1.20 (1.00–1.20, 3) **as far**",
        # a baseline's own step is judged by the other baselines only
        ("`bench_x.W`", "`time_numpy`"): "1.10 (1.00–1.20, 2)",
        ("`bench_z.U`", "`time_numpy`"): "1.10 (1.00–1.20, 2)",
        ("`bench_x.W`", "`time_dispatch_100_calls`"): "NumPy changed",
        ("`bench_x.W`", "`track_bandwidth`"): "—",
    }


def test_history_marks_a_step_whose_windows_hold_a_value_measured_under_load(tmp_path):
    repo = str(tmp_path / "repo")
    commits = _releases(repo)
    _write_results(tmp_path, commits, SERIES)
    # time_run at jax-v0.1.3 was measured at 2026-12-01 10:00:00 for 30 s, in a busy main run;
    # every other value at the epoch, long before it
    folder = tmp_path / "results" / "synthetic"
    path = folder / f"{commits[3][:8]}-{ENV}.json"
    data = json.loads(path.read_text())
    at = datetime.datetime(2026, 12, 1, 10, tzinfo=datetime.timezone.utc)
    data["results"]["bench_x.W.time_run"][3:5] = [at.timestamp() * 1000, 30.0]
    path.write_text(json.dumps(data))
    busy = quiet.LoadRecord("main", (at - datetime.timedelta(minutes=5)).isoformat(),
                            (at + datetime.timedelta(minutes=5)).isoformat(), 600.0,
                            others_share=0.25)
    quiet.write_record(busy, str(folder / quiet.RECORD_NAME))

    found = report.history(str(tmp_path / "results"), "synthetic", repo, window=2, factor=1.1)
    marked = {(s.key.benchmark, s.key.params): s.under_load for s in found.steps}
    assert marked == {
        # both dtypes' windows (0.1.1 or 0.1.2 before, 0.1.3 and 0.1.4 after) hold it
        ("bench_x.W.time_run", "('float32')"): ["jax-v0.1.3"],
        ("bench_x.W.time_run", "('float64')"): ["jax-v0.1.3"],
        # 0.1.3 is in this step's window too, but its dispatch value was measured apart
        ("bench_x.W.time_dispatch_100_calls", ""): [],
        ("bench_x.W.time_lower", ""): [],
        ("bench_x.W.track_bandwidth", ""): [],
    }
    text = report.history_markdown(found, results_dir=str(tmp_path / "results"),
                                   machine="synthetic", repo=repo, branch="main", top=10,
                                   window=2, factor=1.1)
    assert "**busy at** a release" in text
    releases = {(row[2], row[3]): row[4] for row in _table(text, "Regressions")}
    assert releases[("('float32')", "`time_run`")] == ("jax-v0.1.2 → jax-v0.1.3 · busy at "
                                                        "jax-v0.1.3")
    assert releases[("—", "`time_lower`")] == "jax-v0.1.5 → jax-v0.1.6 †"

    # a quiet record of the same run marks nothing
    os.remove(folder / quiet.RECORD_NAME)
    quiet.write_record(quiet.LoadRecord(busy.command, busy.started, busy.ended, busy.seconds),
                       str(folder / quiet.RECORD_NAME))
    found = report.history(str(tmp_path / "results"), "synthetic", repo, window=2, factor=1.1)
    assert not any(s.under_load for s in found.steps)
    assert "busy at" not in report.history_markdown(
        found, results_dir=str(tmp_path / "results"), machine="synthetic", repo=repo,
        branch="main", top=10, window=2, factor=1.1)


def test_compare_on_built_results_fails_on_a_broken_benchmark(synthetic, tmp_path):
    tmp, repo, _ = synthetic
    out = tmp_path / "comment.md"
    rc = report.main(["compare", "jax-v0.1.5", "jax-v0.1.6", "--results-dir",
                      str(tmp / "results"), "--repo", repo, "--factor", "1.5", "-o", str(out)])
    text = out.read_text()
    assert rc == 2, text
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in text.splitlines()
            if line.startswith("| ") and "`bench_" in line]
    assert rows == [["slower", "`bench_x.W.time_lower`", "1.00s", "2.50s", "2.50"],
                    ["failed", "`bench_x.W.time_to_device`", "1.00ms", "failed", "n/a"]]
    assert "**Failed at HEAD (1):** `bench_x.W.time_to_device`" in text
    assert "**A benchmark failed at HEAD.**" in text


def test_compare_reads_a_lower_rate_as_worse(synthetic, tmp_path):
    tmp, repo, _ = synthetic
    out = tmp_path / "comment.md"
    rc = report.main(["compare", "jax-v0.1.2", "jax-v0.1.3", "--results-dir",
                      str(tmp / "results"), "--repo", repo, "--factor", "1.5", "-o", str(out)])
    text = out.read_text()
    assert rc == 1, text
    rows = [line.split("|")[1:3] for line in text.splitlines()
            if line.startswith("| ") and "`bench_" in line]
    # worse by size, then better, then fixed; the changed code version (time_trace) and the
    # overlapping intervals (time_to_host) are not changes
    assert [(a.strip(), b.strip()) for a, b in rows] == [
        ("slower", "`bench_x.W.time_run('float32')`"),
        ("lower", "`bench_x.W.track_bandwidth`"),
        ("faster", "`bench_x.W.time_compile`"),
        ("fixed", "`bench_x.W.time_run('float64')`"),
    ]


def test_a_missing_asv_statistics_module_is_an_error_not_a_silent_fallback(monkeypatch):
    """Without asv._stats the steps and comparisons would quietly lose rule (3), asv's test."""
    stats = {"ci_99_a": 1.0, "ci_99_b": 1.2, "q_25": 1.05, "q_75": 1.15, "number": 1,
             "repeat": 10}
    a = results.Measurement(1.1, stats, [1.1] * 10)
    b = results.Measurement(2.2, {k: 2 * v if k.startswith(("ci", "q")) else v
                                  for k, v in stats.items()}, [2.2] * 10)
    assert results.asv_says_different(a, b)
    import asv

    monkeypatch.setitem(sys.modules, "asv._stats", None)
    monkeypatch.delattr(asv, "_stats", raising=False)
    with pytest.raises(results.ResultsError, match=r"asv\._stats.*--no-stats"):
        results.asv_says_different(a, b)
    # measurements without statistics need no test, so nothing is asked of the module
    assert results.asv_says_different(results.Measurement(1.0), results.Measurement(2.0))


def _step(phase, before, after, worse=True, ratio=1.5):
    key = results.SeriesKey(f"bench_models.MLPTrainStep.{phase}", "('float32')", "env")
    commits = [results.Commit(c * 40, f"jax-v{v}", "") for c, v in (("a", before),
                                                                    ("b", after))]
    return report.Step(key, "seconds", *commits, 1.0, ratio, 2, 2, worse,
                       results.direction("seconds"), 1, ratio)


def test_a_step_across_a_change_of_timing_method_is_marked_as_such():
    assert "make_jaxpr" in report.method_change(_step("time_trace", "0.4.28", "0.4.29"))
    assert report.method_change(_step("time_trace", "0.4.29", "0.4.30")) is None
    assert report.method_change(_step("time_run", "0.4.28", "0.4.29")) is None


def test_verifications_are_recorded_beside_the_results_and_shown(tmp_path):
    (tmp_path / "m").mkdir()
    confirmed, noise = _step("time_run", "0.5.0", "0.5.1"), _step("time_compile", "0.6.0",
                                                                  "0.6.1")
    path = report.write_verified(str(tmp_path), "m", {
        report.step_id(confirmed): {"verdict": "confirmed", "ratio": 1.48, "low": 1.4,
                                    "high": 1.55, "rounds": 8},
        report.step_id(noise): {"verdict": "noise", "ratio": 1.01, "low": 0.98, "high": 1.04,
                                "rounds": 6}})
    assert path.endswith(".jsonl")  # asv would read a .json file there as a result
    verified = report.load_verified(str(tmp_path), "m")
    rows = report._steps_table([confirmed, noise, _step("time_trace", "0.4.28", "0.4.29"),
                                _step("time_lower", "0.7.0", "0.7.1")], 2, False, verified)
    cells = [row.rstrip(" |").rsplit("| ", 1)[-1] for row in rows[2:]]
    assert cells == ["confirmed: A/B 1.48× (1.40–1.55)", "noise: A/B 1.01× (0.98–1.04)",
                     "method changed", "—"]
    # without a record the table keeps its ten columns
    assert report._steps_table([confirmed], 2, False)[0].count("|") == 11


def test_a_window_holding_a_zero_gives_no_step_and_no_error():
    def series(*values):
        return [(f"c{i}", results.Measurement(v, version="1")) for i, v in enumerate(values)]

    key = results.SeriesKey("bench_x.W.track_retraces", "", "env")
    # a count that reads 0 at one release: the old rule divided by the window's least value
    assert report.series_steps(key, series(4.0, 0.0, 4.0, 9.0, 9.0), "unit", 2, 1.1,
                               use_stats=False) == []
    steps = report.series_steps(key, series(4.0, 4.0, 9.0, 9.0), "unit", 2, 1.1, use_stats=False)
    assert [(s.before, s.after) for s in steps] == [("c1", "c2")]


def test_a_verified_value_without_an_interval_says_it_was_steady(tmp_path):
    (tmp_path / "m").mkdir()
    step = _step("track_flops", "0.4.31", "0.4.35")
    report.write_verified(str(tmp_path), "m", {report.step_id(step): {
        "verdict": "confirmed", "ratio": 70.0, "values": [1e7, 7e8], "history_ratio": 70.0}})
    rows = report._steps_table([step], 2, False, report.load_verified(str(tmp_path), "m"))
    assert rows[2].rstrip(" |").rsplit("| ", 1)[-1] == "confirmed: A/B 70.00× (steady values)"


def _two_results(tmp_path, numpy_versions):
    """Two commits' results: a NumPy baseline 1.3× slower at HEAD, another unchanged, one
    whose code changed (its benchmark version), a JAX case unchanged, and each commit's
    recorded NumPy version (None: not recorded)."""
    repo = str(tmp_path / "repo")
    _init(repo)
    commits = [_commit(repo, "base"), _commit(repo, "head")]
    folder = tmp_path / "results" / "synthetic"
    folder.mkdir(parents=True)
    (folder / "machine.json").write_text(json.dumps({"machine": "synthetic", "version": 1}))
    units = {"bench_x.W.time_numpy": "seconds", "bench_x.W.time_run": "seconds",
             "bench_y.V.time_numpy": "seconds", "bench_z.U.time_numpy": "seconds",
             "bench_environment.Versions.track_numpy_version": "version"}
    for commit, numpy_version, slow, version in zip(commits, numpy_versions, (1.0, 1.3),
                                                     ("1", "2")):
        values = {"bench_x.W.time_numpy": slow, "bench_x.W.time_run": 2.0,
                  "bench_y.V.time_numpy": 3.0, "bench_z.U.time_numpy": 2 * slow}
        if numpy_version is not None:
            values["bench_environment.Versions.track_numpy_version"] = numpy_version
        rows = {name: [[v], [], version if name.startswith("bench_z") else "1", 0, 1.0,
                       [v * 0.99], [v * 1.01], [v * 0.995], [v * 1.005], [1], [10]]
                for name, v in values.items()}
        data = {"commit_hash": commit, "env_name": ENV, "date": 1000,
                "params": {"machine": "synthetic", "python": "3.11"}, "python": "3.11",
                "requirements": {}, "env_vars": {}, "result_columns": COLUMNS,
                "results": rows, "durations": {}, "version": 2}
        (folder / f"{commit[:8]}-{ENV}.json").write_text(json.dumps(data))
    (tmp_path / "results" / "benchmarks.json").write_text(json.dumps(
        {name: {"unit": unit, "name": name} for name, unit in units.items()}))
    return repo, commits


@pytest.mark.parametrize("numpy_versions, said", [((20406.0, 20406.0), True),
                                                  ((20406.0, 20500.0), False),
                                                  ((None, None), False)])
def test_compare_says_what_the_numpy_baselines_did_when_both_ran_one_numpy(
        tmp_path, numpy_versions, said):
    """A baseline runs no JAX: flagged between two commits of one NumPy, it is the host's
    noise, and the comment says so; with another NumPy (or none recorded) it may be NumPy's."""
    repo, commits = _two_results(tmp_path, numpy_versions)
    out = tmp_path / "comment.md"
    rc = report.main(["compare", *commits, "--results-dir", str(tmp_path / "results"),
                      "--repo", repo, "--factor", "1.1", "-o", str(out)])
    text = out.read_text()
    assert rc == 1, text  # the baseline's 1.3 is still a change beyond the factor
    found = results.load_measurements(str(tmp_path / "results"), "synthetic", commits)
    assert report.same_numpy(found, *commits) is said
    lines = [x for x in text.splitlines() if x.startswith("**NumPy baselines**")]
    if not said:
        assert lines == [], text
        return
    (line,) = lines
    assert "1 of 2 flagged at 1.1" in line  # bench_z's code changed: not comparable, left out
    assert "ratios of medians (HEAD / BASE) 1.000–1.300." in line
    assert "may be the host's" in line and "divided by the drift" not in line


@pytest.mark.parametrize("busy_case", ["bench_x.W.time_numpy", "bench_x.W.time_run"])
def test_compare_names_the_cases_measured_under_load(tmp_path, busy_case):
    """A case a busy run's load record covers is counted with its side, and a flagged one is
    sent to `ab`; a quiet record of the same run names nothing."""
    repo, commits = _two_results(tmp_path, (20406.0, 20406.0))
    folder = tmp_path / "results" / "synthetic"
    # HEAD's case measured at 10:00 for 30 s, in a busy main run (bench_x's baseline is 1.3x
    # slower at HEAD, time_run unchanged)
    path = folder / f"{commits[1][:8]}-{ENV}.json"
    data = json.loads(path.read_text())
    at = datetime.datetime(2026, 12, 1, 10, tzinfo=datetime.timezone.utc)
    data["results"][busy_case][3:5] = [at.timestamp() * 1000, 30.0]
    path.write_text(json.dumps(data))
    busy = quiet.LoadRecord("main", (at - datetime.timedelta(minutes=5)).isoformat(),
                            (at + datetime.timedelta(minutes=5)).isoformat(), 600.0,
                            others_share=0.25)
    quiet.write_record(busy, str(folder / quiet.RECORD_NAME))
    out = tmp_path / "comment.md"

    def load_lines():
        report.main(["compare", *commits, "--results-dir", str(tmp_path / "results"),
                     "--repo", repo, "--factor", "1.1", "-o", str(out)])
        return [x for x in out.read_text().splitlines() if x.startswith("**Measured under")]

    (line,) = load_lines()
    assert f"HEAD (`{commits[1][:8]}`) 1 of 4 cases ran while" in line
    assert "BASE" not in line
    assert "UNDER LOAD: other processes used 25.0%" in line
    if busy_case == "bench_x.W.time_numpy":
        assert "Flagged among them (1): `bench_x.W.time_numpy` (1.30)" in line
        assert "measure them again with `ab`" in line
    else:
        assert line.endswith("None of them is flagged here.")

    os.remove(folder / quiet.RECORD_NAME)
    quiet.write_record(quiet.LoadRecord(busy.command, busy.started, busy.ended, busy.seconds),
                       str(folder / quiet.RECORD_NAME))
    assert load_lines() == []


def test_the_load_report_gives_each_run_its_verdict_and_reason(tmp_path, capsys):
    def stamp(seconds):
        return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).isoformat(
            timespec="seconds")

    folder = tmp_path / "results" / "m"
    folder.mkdir(parents=True)
    (folder / "machine.json").write_text(json.dumps({"machine": "m", "version": 1}))
    path = str(folder / quiet.RECORD_NAME)
    runs = [  # a kernel thread about the limit; a test run's minute; an older record's bound;
        # one short whole-CPU burst in a quiet run
        quiet.LoadRecord("main", stamp(0), stamp(600), 600.0, others_share=0.02,
                         busy_seconds=16, burst_seconds=0.16,
                         busiest=["kdamond.0[107] 5% of a CPU"]),
        quiet.LoadRecord("ab", stamp(1000), stamp(1600), 600.0, others_share=0.06,
                         busy_seconds=60, burst_seconds=27.0),
        quiet.LoadRecord("main", stamp(2000), stamp(2600), 600.0, busy_seconds=10,
                         spells=[[stamp(2100), stamp(2109), 0.5]]),
        quiet.LoadRecord("main", stamp(3000), stamp(3600), 600.0, others_share=0.01,
                         busy_seconds=4, burst_seconds=1.4,
                         spells=[[stamp(3100), stamp(3102), 0.5],
                                 [stamp(3300), stamp(3300), 0.09]]),
    ]
    for run in runs:
        quiet.write_record(run, path)
    assert report.main(["load", "--results-dir", str(tmp_path / "results")]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| `")]
    assert len(rows) == 4
    assert rows[0].endswith("| 0.03% | quiet | kdamond.0[107] 5% of a CPU |"), rows[0]
    assert "| 4.50% | UNDER LOAD: others overall, bursts |" in rows[1], rows[1]
    assert "| ≤ 0.75% | UNDER LOAD: bursts |" in rows[2], rows[2]
    assert "| 0.23% | quiet, 1 strong spell |" in rows[3], rows[3]

    # the committed history's record reads whole, one row a run
    committed = os.path.join(ROOT, "results", "cpu-2core-amd-epyc-24gb", quiet.RECORD_NAME)
    assert report.main(["load", "--record", committed]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| `")]
    assert len(rows) == len(quiet.read_records(committed)) > 0

    # two strong spells read in the plural, in the record's own summary too
    twice = quiet.LoadRecord("main", stamp(4000), stamp(4600), 600.0, others_share=0.01,
                             busy_seconds=4, burst_seconds=1.4,
                             spells=[[stamp(4100), stamp(4100), 0.5],
                                     [stamp(4300), stamp(4300), 0.5]])
    assert twice.quiet and "in 2 spells, which mark" in twice.summary(), twice.summary()
    quiet.write_record(twice, path)
    assert report.main(["load", "--results-dir", str(tmp_path / "results")]) == 0
    assert "| quiet, 2 strong spells |" in capsys.readouterr().out
    assert [markdown.counted(n, "spell") for n in (0, 1, 2)] == ["0 spells", "1 spell", "2 spells"]

    missing = str(tmp_path / "nowhere" / quiet.RECORD_NAME)
    assert report.main(["load", "--record", missing]) == 1
    assert f"no load record at {missing}" in capsys.readouterr().err
    for bad in ('{"command": "main", "spells": 3}', '{"command": "main", "started": "'
                + stamp(0) + '", "seconds": 60, "spells": 3}', "[1, 2]", "not json"):
        (folder / "bad.jsonl").write_text(bad + "\n")
        assert report.main(["load", "--record", str(folder / "bad.jsonl")]) == 1, bad
        assert "is not a load record" in capsys.readouterr().err, bad
