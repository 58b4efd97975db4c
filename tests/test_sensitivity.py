"""The sensitivity self-test: plants in real jax 0.10.2 source, and the command around them.

Each plant is checked where it acts, not by timing: the planted module counts the calls it
slowed, and a script runs one operation per phase (import, trace, lower, compile, dispatch,
wait, device_put, device_get) with the planted jax first on sys.path and the test
environment's jaxlib 0.10.2; only the planted phase's operations may count. The slow tests run
the command itself: the interleaved A/B (the default method) must find the plant and nothing
else, and a bisection must name it; both work in the A/B tests' folder and reuse its builds
(the command's ``--work-dir``), as a user's second sweep would. The other method (``--method
asv``) is checked in its parts, not end to end (that took 7 minutes of the tests): its
judgement on given results (``judge``), and its asv runs (``run_pair``) of the A/B tests'
release and their plant that doubles the dispatch.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from jaxbench_helpers.analysis import paired, results
from jaxbench_helpers.common import quiet
from jaxbench_helpers.common.machine import ensure_described
from jaxbench_helpers.host import ab, history
from jaxbench_helpers.selftest import plants, sensitivity

RELEASE = "0.10.2"

STEPS = r"""
import json, sys, time
import numpy as np
counts = {}
def plant_calls():
    mod = sys.modules.get("jax._src.jaxbench_plant")
    return mod.CALLS if mod else 0
def step(name, fn):
    before = plant_calls()
    out = fn()
    counts[name] = plant_calls() - before
    return out

jax = step("import", lambda: __import__("jax"))
import jax.numpy as jnp
def f(w, x):
    return jnp.tanh(x @ w).sum()
w, x = jnp.ones((16, 16)), jnp.ones((4, 16))
warm = jax.jit(f)
warm(w, x).block_until_ready()
step("trace", lambda: jax.jit(lambda a, b: f(a, b) + 1).trace(w, x))
traced = jax.jit(lambda a, b: f(a, b) + 2).trace(w, x)
step("lower", traced.lower)
lowered = jax.jit(lambda a, b: f(a, b) + 3).lower(w, x)
step("compile", lowered.compile)
out = step("dispatch", lambda: warm(w, x))
step("run", lambda: jax.block_until_ready(out))
host = np.ones((1 << 16,), np.float32)
dev = step("to_device", lambda: jax.device_put(host))
dev.block_until_ready()
step("to_host", lambda: jax.device_get(dev))
print(json.dumps({"counts": counts, "file": sys.modules["jax"].__file__}))
"""

# the steps each plant must fire in (and no others)
EXPECTED = {
    plants.CONTROL: set(),
    "dispatch": {"dispatch"},
    "trace": {"trace"},
    "lower": {"lower"},
    "compile": {"compile"},
    "run": {"run"},
    "transfer": {"to_device", "to_host"},
    "startup": {"import"},
}


@pytest.fixture(scope="module")
def release_source(tmp_path_factory, sdist_cache):
    """A release-history repository holding jax 0.10.2 alone: (path, hash)."""
    repo = str(tmp_path_factory.mktemp("sense") / "jax")
    commits = history.build(repo, first=RELEASE, last=RELEASE, sdist_cache=sdist_cache)
    assert [v for v, _ in commits] == [RELEASE]
    return repo, commits[0][1]


def _copy_of(repo, dest):
    subprocess.run(["git", "clone", "-q", repo, str(dest)], check=True)
    return str(dest)


def _run_steps(checkout):
    env = dict(os.environ, PYTHONPATH=checkout, JAX_PLATFORMS="cpu")
    result = subprocess.run([sys.executable, "-c", STEPS], capture_output=True, text=True,
                            env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_release_alone_has_no_plant(release_source, tmp_path):
    checkout = _copy_of(release_source[0], tmp_path / "jax")
    found = _run_steps(checkout)
    assert found["file"].startswith(checkout)  # the checkout's jax, not the venv's
    assert set(found["counts"].values()) == {0}


@pytest.mark.parametrize("phase", [plants.CONTROL, *plants.PHASES])
def test_each_plant_fires_in_its_phase_only(release_source, tmp_path, phase):
    checkout = _copy_of(release_source[0], tmp_path / "jax")
    changed = plants.apply(checkout, phase, 0.01)
    assert "jax/_src/jaxbench_plant.py" in changed
    found = _run_steps(checkout)
    assert found["file"].startswith(checkout)
    fired = {name for name, count in found["counts"].items() if count}
    assert fired == EXPECTED[phase], found["counts"]


def test_a_source_without_the_anchor_is_a_clear_error_and_nothing_is_written(tmp_path):
    src = tmp_path / "jax" / "jax" / "_src"
    src.mkdir(parents=True)
    (src / "compiler.py").write_text("def backend_compile(x):\n  return x\n")
    with pytest.raises(plants.PlantError, match=r"compiler\.py has 0 occurrences.*0\.10"):
        plants.apply(str(tmp_path / "jax"), "compile", 0.1)
    assert not (src / "jaxbench_plant.py").exists()
    assert (src / "compiler.py").read_text() == "def backend_compile(x):\n  return x\n"
    with pytest.raises(plants.PlantError, match="no jax/_src/pjit.py"):
        plants.apply(str(tmp_path / "jax"), "dispatch", 0.1)
    with pytest.raises(plants.PlantError, match="unknown phase 'link'"):
        plants.apply(str(tmp_path / "jax"), "link", 0.1)
    with pytest.raises(plants.PlantError, match="fraction >= 0"):
        plants.apply(str(tmp_path / "jax"), "compile", -0.1)


def test_plant_commit_sits_on_the_release_and_leaves_main_alone(release_source, tmp_path):
    repo = _copy_of(release_source[0], tmp_path / "jax")
    release = release_source[1]
    commit = sensitivity.plant_commit(repo, release, "lower", 0.1)
    git = ["git", "-C", repo]
    parent = subprocess.run(git + ["rev-parse", f"{commit}^"], capture_output=True,
                            text=True).stdout.strip()
    assert parent == release
    files = subprocess.run(git + ["show", "--name-only", "--format=%s", commit],
                           capture_output=True, text=True).stdout.split()
    assert "jax/_src/jaxbench_plant.py" in files and "jax/_src/pjit.py" in files
    head = subprocess.run(git + ["rev-parse", "main"], capture_output=True,
                          text=True).stdout.strip()
    assert head == release
    assert not os.path.exists(os.path.join(repo, "jax", "_src", "jaxbench_plant.py"))
    # the same plant again is the same commit (a later sweep reuses its results); another
    # amount of work is another
    assert sensitivity.plant_commit(repo, release, "lower", 0.1) == commit
    worked = sensitivity.plant_commit(repo, release, "lower", 0.1, work=100)
    assert worked != commit
    assert "WORK = 100" in subprocess.run(git + ["show", f"{worked}:jax/_src/jaxbench_plant.py"],
                                          capture_output=True, text=True).stdout


def test_a_planted_history_hides_the_plant_among_neutral_commits(release_source, tmp_path):
    repo = _copy_of(release_source[0], tmp_path / "jax")
    release = release_source[1]
    branch, planted, last = sensitivity.planted_history(repo, release, "trace", 0.1, 5, 3)
    git = ["git", "-C", repo]
    log = subprocess.run(git + ["log", "--format=%H %s", f"{release}..{last}"],
                         capture_output=True, text=True).stdout.splitlines()[::-1]
    assert len(log) == 5
    assert [line.split(" ", 1)[1] for line in log] == [
        "neutral commit 1", "neutral commit 2", "plant: trace takes 10% longer",
        "neutral commit 4", "neutral commit 5"]
    assert log[2].split()[0] == planted
    # the plant stays in every later commit; the neutral ones touch no package file
    shown = subprocess.run(git + ["show", f"{last}:jax/_src/jaxbench_plant.py"],
                           capture_output=True, text=True)
    assert shown.returncode == 0 and "FRACTION = 0.1" in shown.stdout
    neutral = subprocess.run(git + ["show", "--name-only", "--format=", log[3].split()[0]],
                             capture_output=True, text=True).stdout.split()
    assert neutral == ["JAXBENCH_NEUTRAL.txt"]
    head = subprocess.run(git + ["rev-parse", "main"], capture_output=True, text=True)
    assert head.stdout.strip() == release


@pytest.mark.parametrize("phase", sorted(sensitivity.COUNT_REFERENCE))
def test_each_work_plant_fires_in_its_phase_only(release_source, tmp_path, phase):
    checkout = _copy_of(release_source[0], tmp_path / "jax")
    plants.apply(checkout, phase, 0.02, work=1000)
    text = open(os.path.join(checkout, plants.MODULE_PATH)).read()
    assert "WORK = 1000" in text
    found = _run_steps(checkout)
    fired = {name for name, count in found["counts"].items() if count}
    assert fired == EXPECTED[phase], found["counts"]


def test_planted_work_is_not_a_number_of_bytes_is_refused(tmp_path):
    with pytest.raises(plants.PlantError, match="number of bytes"):
        plants.apply(str(tmp_path), "trace", 0.02, work=-1)


def test_planted_work_beyond_the_plants_buffer_is_refused(tmp_path):
    with pytest.raises(plants.PlantError, match="more than the plant's buffer"):
        plants.apply(str(tmp_path), "trace", 0.5, work=plants.WORK_BUFFER_BYTES + 1)


def test_every_count_plant_holds_the_same_buffer_whatever_its_work(release_source, tmp_path):
    """Only the scan differs between a count plant and its base (the same plant at work 0):
    a buffer sized by the work would shift the heap of the planted process alone."""
    modules = []
    for work in (0, 1000, 300_000):
        checkout = _copy_of(release_source[0], tmp_path / f"jax-{work}")
        plants.apply(checkout, "trace", 0.02, work=work)
        modules.append(open(os.path.join(checkout, plants.MODULE_PATH)).read())
    for work, text in zip((0, 1000, 300_000), modules):
        assert f"WORK = {work}\n" in text
        assert f"_ZEROS = bytes({plants.WORK_BUFFER_BYTES} if WORK" in text
    assert {m.replace(f"WORK = {w}\n", "") for w, m in zip((0, 1000, 300_000), modules)} \
        == {modules[0].replace("WORK = 0\n", "")}


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_planted_work_costs_the_instructions_per_byte_it_is_sized_by(tmp_path):
    """The count plants size their scan by WORK_INSTRUCTIONS_PER_BYTE: callgrind agrees
    within 10% (two scans' difference, so the interpreter's own start cancels), scanning a
    slice of the one buffer every count plant holds, as the plants do."""
    totals = []
    for size in (1_000, 1_000_000):
        out = tmp_path / f"callgrind.{size}"
        proc = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
             "-c", f"zeros = bytes({plants.WORK_BUFFER_BYTES})\nfor _ in range(20):\n"
                   f"    zeros.count(1, 0, {size})\n"],
            capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        totals.append(int(re.search(r"Collected : (\d+)", proc.stderr).group(1)))
    per_byte = (totals[1] - totals[0]) / (20 * (1_000_000 - 1_000))
    assert per_byte == pytest.approx(plants.WORK_INSTRUCTIONS_PER_BYTE, rel=0.1)


# ---------------------------------------------------------------- judgement


def _m(value):
    return results.Measurement(value)


def _key(benchmark, params="('float32')"):
    return results.SeriesKey(benchmark, params, "env")


def test_judge_sorts_detected_missed_and_unrelated_with_asvs_comparison():
    base = {
        _key("bench_a.W.time_trace"): _m(1.0),
        _key("bench_b.W.time_trace"): _m(1.0),
        _key("bench_a.W.time_run"): _m(2.0),
        _key("bench_a.W.time_numpy"): _m(3.0),
        _key("bench_a.W.time_compile"): _m(4.0),
        _key("bench_a.W.track_flops"): _m(10.0),
        _key("bench_a.W.time_to_host"): _m(1.0),
    }
    planted = {
        _key("bench_a.W.time_trace"): _m(1.2),  # the phase, slower: detected
        _key("bench_b.W.time_trace"): _m(1.01),  # the phase, within the factor: missed
        _key("bench_a.W.time_run"): _m(2.02),  # another phase, quiet
        _key("bench_a.W.time_numpy"): _m(2.5),  # a control got faster: unrelated
        _key("bench_a.W.time_compile"): _m(None),  # failed at the planted commit
        _key("bench_a.W.track_flops"): _m(20.0),  # a fact: never judged
        _key("bench_a.W.time_to_host"): _m(float("nan")),  # skipped at one: not judged
    }
    trial = sensitivity.judge("trace", base, planted, factor=1.05)
    assert [c.name for c in trial.detected] == ["bench_a.W.time_trace('float32')"]
    assert trial.detected[0].ratio == pytest.approx(1.2)
    assert [c.name for c in trial.missed] == ["bench_b.W.time_trace('float32')"]
    assert [c.name for c in trial.unrelated] == ["bench_a.W.time_numpy('float32')"]
    assert trial.failed == ["bench_a.W.time_compile('float32')"]
    assert [c.name for c in trial.quiet] == ["bench_a.W.time_run('float32')"]
    assert not trial.clean
    control = sensitivity.judge(plants.CONTROL, base, planted, factor=1.05)
    assert not control.detected and not control.missed
    assert len(control.unrelated) == 2 and len(control.quiet) == 2


def test_instruction_counts_are_judged_by_their_own_threshold_and_cover_their_phase():
    assert sensitivity.counted_phase("track_trace_cpu_instructions") == "time_trace"
    assert sensitivity.counted_phase("track_dispatch_cpu_instructions_per_call") == (
        "time_dispatch_100_calls")
    assert sensitivity.counted_phase("track_hlo_instructions") is None
    assert sensitivity.covers("m.C.track_run_cpu_instructions") == sensitivity.COVERS["time_run"]
    # lowering traces lowering rules: a trace plant moves a lower count, and that is no flag
    assert "trace" in sensitivity.covers("m.C.track_lower_cpu_instructions")
    base = {_key("m.C.track_trace_cpu_instructions"): _m(1_000_000),
            _key("m.C.track_compile_cpu_instructions"): _m(1_000_000),
            _key("m.C.track_hlo_instructions"): _m(100)}
    planted = {_key("m.C.track_trace_cpu_instructions"): _m(1_015_000),
               _key("m.C.track_compile_cpu_instructions"): _m(1_004_000),
               _key("m.C.track_hlo_instructions"): _m(200)}
    # 1.5% more: beyond the 1% of a count without a threshold, though far inside factor 1.05
    trial = sensitivity.judge("trace", base, planted, factor=1.05)
    assert [c.name for c in trial.detected] == ["m.C.track_trace_cpu_instructions('float32')"]
    assert [c.name for c in trial.quiet] == ["m.C.track_compile_cpu_instructions('float32')"]
    # a calibrated threshold of 2% for trace counts: the same 1.5% is not flagged
    trial = sensitivity.judge("trace", base, planted, factor=1.05,
                              thresholds={"track_trace_cpu_instructions": 0.02})
    assert trial.detected == [] and len(trial.missed) == 1
    # and a compile count moving 0.4% under a 0.3% threshold is an unrelated flag
    trial = sensitivity.judge("trace", base, planted, factor=1.05,
                              thresholds={"track_compile_cpu_instructions": 0.003})
    assert [c.name for c in trial.unrelated] == ["m.C.track_compile_cpu_instructions('float32')"]


def test_every_timing_method_of_the_suite_is_classified():
    import importlib

    from jaxbench_helpers.runtime import workload

    names = set()
    for module in sorted(f[:-3] for f in os.listdir("benchmarks") if f.startswith("bench_")):
        mod = importlib.import_module(f"benchmarks.{module}")
        for cls in vars(mod).values():
            if isinstance(cls, type) and cls.__module__ == mod.__name__:
                names |= {n for n in dir(cls) if n.startswith(("time_", "timeraw_"))}
    assert names, "no timing methods found"
    assert sorted(n for n in names if sensitivity.covers(f"m.C.{n}") is None) == []
    assert workload  # imported for its phase mixins above


def test_markdown_names_the_smallest_clean_fraction_per_phase():
    hit = sensitivity.Trial("compile", 0.5, "a" * 40,
                            detected=[sensitivity.Change("b.C.time_compile", 1.5,
                                                         frozenset({"compile"}))])
    hit_small = sensitivity.Trial("compile", 0.1, "b" * 40, detected=list(hit.detected))
    noisy = sensitivity.Trial("trace", 0.5, "c" * 40, detected=list(hit.detected),
                              unrelated=[sensitivity.Change("b.C.time_numpy", 1.3,
                                                            frozenset())])
    text = sensitivity.markdown([hit, hit_small, noisy], release=RELEASE,
                                phases=["compile", "trace"], fractions=[0.5, 0.1],
                                factor=1.05, profile="regular", machine="m", bench=["x"])
    summary = text.split("## Trials")[0]
    rows = {line.split("|")[1].strip(): line for line in summary.splitlines()
            if line.startswith("| ") and "slowed" not in line}
    assert rows["compile"].rstrip(" |").endswith("10%")
    assert "**not detected**" in rows["trace"]
    assert "`b.C.time_numpy` 1.30×" in text
    assert "each trial one interleaved A/B (`ab`)" in text
    # drift: the median ratio of what the plant cannot touch; none in the compile trials
    rows = [line for line in text.split("## Trials")[1].splitlines() if line.startswith("| ")]
    assert rows[0].split("|")[6].strip() == "not confirmed"
    assert rows[2].split("|")[6].strip() == "0: —"
    assert rows[2].split("|")[7].strip() == "—" and rows[4].split("|")[7].strip() == "1.30×"
    text = sensitivity.markdown([hit], release=RELEASE, phases=["compile"], fractions=[0.5],
                                factor=1.05, profile="regular", machine="m", bench=["x"],
                                rounds=6, method="asv")
    assert "6 rounds per commit (`-a rounds=6`)" in text
    assert "the profile's rounds" in sensitivity.markdown(
        [hit], release=RELEASE, phases=["compile"], fractions=[0.5], factor=1.05,
        profile="regular", machine="m", bench=["x"], method="asv")


def test_an_ab_trial_names_a_flag_its_second_series_did_not_repeat():
    def verdict(name, mark, ratio, first=None):
        case = ab.Case({"name": name, "type": "time"}, 0, "('float32')")
        return ab.Verdict(case, "seconds", 1.0, ratio, paired.Estimate(ratio, ratio - 0.02,
                                                                        ratio + 0.02, 16),
                          mark, None if first is None else paired.Estimate(first, first - 0.02,
                                                                           first + 0.02, 6))

    trial = sensitivity.judge_ab("trace", [
        verdict("bench_a.W.time_trace", "+", 1.11, first=1.12),  # repeated: detected
        verdict("bench_b.W.time_trace", "?", 1.04, first=1.09),  # the plant, not repeated
        verdict("bench_a.W.time_numpy", "?", 1.00, first=0.90),  # noise, turned away
        verdict("bench_a.W.time_run", " ", 1.01),  # never flagged: no second series
    ])
    assert [c.name for c in trial.detected] == ["bench_a.W.time_trace('float32')"]
    assert [c.name for c in trial.missed] == ["bench_b.W.time_trace('float32')"]
    assert trial.unrelated == [] and len(trial.quiet) == 2
    assert [(c.name, c.ratio) for c in trial.unconfirmed] == [
        ("bench_a.W.time_numpy('float32')", 0.90), ("bench_b.W.time_trace('float32')", 1.09)]
    trial.fraction, trial.commit = 0.1, "d" * 40
    text = sensitivity.markdown([trial], release=RELEASE, phases=["trace"], fractions=[0.1],
                                factor=1.05, profile="regular", machine="m", bench=["x"])
    row = next(line for line in text.split("## Trials")[1].splitlines()
               if line.startswith("| trace"))
    assert row.split("|")[6].strip() == (
        "2: `bench_a.W.time_numpy('float32')` 0.90×, `bench_b.W.time_trace('float32')` 1.09×")
    assert "Not confirmed: cases the first series" in text
    asv_text = sensitivity.markdown([trial], release=RELEASE, phases=["trace"], fractions=[0.1],
                                    factor=1.05, profile="regular", machine="m", bench=["x"],
                                    method="asv")
    assert "not confirmed" not in asv_text.lower()


def test_bad_input_is_a_clear_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        sensitivity.main(["--fractions", "ten"])
    assert exit_.value.code == 2
    assert "'ten' is not a comma-separated list" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        sensitivity.main(["--release", "main"])
    assert "not a release number" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        sensitivity.main(["--phase", "link"])
    assert "invalid choice: 'link'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        sensitivity.main(["--rounds", "0"])
    assert "--rounds 0: must be 1 or more" in capsys.readouterr().err


# ---------------------------------------------------------------- the command, end to end


@pytest.mark.slow
@pytest.mark.judges_timings
def test_an_interleaved_ab_trial_finds_the_plant_and_nothing_else(dispatch_plant, tmp_path):
    out = tmp_path / "sensitivity.md"
    rc = sensitivity.main([
        "--phase", "dispatch", "--fractions", "10", "--factor", "1.5", "--profile", "quick",
        "--machine", "sensitivity-test", "--work-dir", str(dispatch_plant[0]),
        "-b", r"bench_dispatch\.JitTrivial\.time_dispatch_100_calls",
        "-b", r"bench_matmul\.SquareMatmul\.time_(numpy|compile)", "-o", str(out),
        "--allow-busy"])
    text = out.read_text()
    assert "interleaved A/B" in text
    trial = [line for line in text.splitlines() if line.startswith("| dispatch | 1000%")]
    assert trial and "1: `bench_dispatch.JitTrivial.time_dispatch_100_calls('float32')`" in (
        trial[0]), text
    assert "| 0: — |" in trial[0], text  # nothing unrelated flagged
    assert rc == 0, text


@pytest.mark.slow
@pytest.mark.judges_timings
def test_bisect_names_the_planted_commit(dispatch_plant, tmp_path, capsys):
    out = tmp_path / "bisect.md"
    rc = sensitivity.main([
        "--bisect", "--phase", "dispatch", "--fractions", "10", "--commits", "6",
        "--profile", "quick", "--machine", "sensitivity-test",
        "--work-dir", str(dispatch_plant[0]), "-o", str(out), "--allow-busy"])
    text = out.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| dispatch |"))
    assert "| yes |" in row, text
    assert rc == 0
    # every step wrote both sides' shared objects afresh: the good side's beside each new bad
    fresh = [line for line in capsys.readouterr().err.splitlines()
             if line.endswith("written afresh")]
    sides = [line.split("jaxbench ab: ")[1][0] for line in fresh]
    assert len(sides) >= 4 and sides.count("A") == sides.count("B"), fresh


@pytest.mark.slow
@pytest.mark.judges_timings
def test_asvs_interleaved_rounds_measure_both_commits_and_the_judgement_finds_the_plant(
        dispatch_plant, tmp_path, capsys):
    work, repo, release, plant = dispatch_plant
    ensure_described("sensitivity-test")  # as the command does: asv would ask for it
    bench = r"bench_dispatch\.JitTrivial\.time_dispatch_100_calls"
    monitor = quiet.LoadMonitor("the pair's asv run").start()
    try:
        base, planted = sensitivity.run_pair(
            repo, release, plant, folder=str(tmp_path / "pair"), machine="sensitivity-test",
            bench=[bench], profile="quick", env_dir=str(work / "env"), rounds=2)
    finally:  # its sampling thread must not outlive a failed run into the next test
        record = monitor.stop()
    load = record.summary()
    log = capsys.readouterr().err
    assert "(round 2/2)" in log, log[-3000:]  # two rounds, not the quick profile's one
    trial = sensitivity.judge("dispatch", base, planted, 1.2, use_stats=False)
    # twice the dispatch: judged at 1.2 so that only the machinery can fail it. A miss shows
    # both sides (alike: one commit measured twice; a wide side: noise) and the load
    sides = "\n".join(
        f"{key.benchmark}{key.params}: release {release[:8]} {base[key].value!r} "
        f"{base[key].stats}; planted {plant[:8]} {planted[key].value!r} "
        f"{planted[key].stats}" for key in sorted(set(base) & set(planted), key=str))
    assert [c.name for c in trial.detected] == [
        "bench_dispatch.JitTrivial.time_dispatch_100_calls('float32')"], (
        f"missed {[(c.name, c.ratio) for c in trial.missed]!r}\n{sides}\n"
        f"machine: {load}\n{log[-2000:]}")
