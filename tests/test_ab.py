"""The interleaved A/B comparison, for real: jax 0.10.2 against a commit that doubles every
jitted call's dispatch (a plant), two environments, asv's own fork servers; and the same
commit against itself.
"""

import glob
import json
import os
import subprocess
import sys

import pytest

from jaxbench_helpers.common import asvconfig
from jaxbench_helpers.host import ab, asvconf

pytestmark = [pytest.mark.slow, pytest.mark.judges_timings]

MACHINE = "ab-test"
BENCH = ["-b", r"JitTrivial\.time_dispatch", "-b", r"SquareMatmul\.time_(numpy|compile)",
         "-b", r"CenteredGram\.time_numpy", "-b", r"Versions\.track_jax_version"]


@pytest.fixture(scope="module")
def planted(dispatch_plant):
    """(work folder, config, release hash, planted hash)."""
    work, repo, release, plant = dispatch_plant
    conf = asvconf.derive(repo, results_dir=str(work / "results"), html_dir=str(work / "html"),
                          env_dir=str(work / "env"), profile="quick")
    return work, asvconfig.write(conf, str(work / "asv.conf.json")), release, plant


def _ab(work, conf, *args):
    out = work / f"report-{len(os.listdir(work))}.md"
    proc = subprocess.run([sys.executable, "-m", "jaxbench_helpers", "ab", *args, "--config",
                           conf, "--machine", MACHINE, "--work-dir", str(work / "builds"),
                           "--allow-busy", *BENCH, "-o", str(out)],
                          capture_output=True, text=True, timeout=3600)
    return proc.returncode, out.read_text() if out.exists() else "", proc.stderr


@pytest.fixture(scope="module")
def compared(planted):
    work, conf, release, plant = planted
    # the plant doubles the dispatch; a factor of 1.5 keeps the verdicts about the machinery:
    # on a shared CI runner a NumPy control read 1.10 (interval 1.07-1.14) at the default 1.1.
    # What the A/B sees at 10% on a quiet machine is measured, not asserted (results/AA.md)
    return (*_ab(work, conf, release, plant, "--factor", "1.5"), planted)


def test_the_plant_is_flagged_and_the_controls_are_not(compared):
    rc, text, log, (work, conf, release, plant) = compared
    assert rc == 1, log  # slower beyond the factor
    assert "**Performance decreased.**" in text
    rows = [line for line in text.splitlines() if line.startswith("| slower |")]
    assert any("JitTrivial.time_dispatch_100_calls('float32')" in r for r in rows), text
    assert not any("time_numpy" in r or "time_compile" in r for r in rows), text
    # the baselines' own line agrees with the table: none of them flagged
    assert "**NumPy baselines** (`time_numpy`" in text and "): 0 of " in text, text
    # the rounds alternated in ABBA order, a case needing more rounds got them
    assert "interleaved A/B" in text and "95% interval" in text
    assert "rounds, " in log
    # both sides' shared objects were written afresh before any round (jaxlib's among them)
    assert log.count("shared objects (") == 2 and "MiB) written afresh" in log, log
    # the flagged case was measured again, in new interpreters, and held
    assert "measured again in new interpreters" in text, text
    assert "rounds in new interpreters" in log and "Not confirmed" not in text


def test_both_commits_are_asv_results_that_asv_compare_reads(compared):
    _, _, _, (work, conf, release, plant) = compared
    files = [f for f in glob.glob(str(work / "results" / MACHINE / "*.json"))
             if not f.endswith("machine.json")]
    commits = {json.load(open(f))["commit_hash"] for f in files}
    assert commits == {release, plant}
    proc = subprocess.run([sys.executable, "-m", "asv", "--config", conf, "compare",
                           release, plant, "--machine", MACHINE, "--factor", "1.1",
                           "--only-changed"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "JitTrivial.time_dispatch_100_calls" in proc.stdout
    for f in files:
        data = json.load(open(f))
        assert "bench_matmul.SquareMatmul.time_numpy" in data["results"]
        # every sample of every round is kept
        samples = data["results"]["bench_dispatch.JitTrivial.time_dispatch_100_calls"]
        assert samples is not None


def test_the_same_commit_against_itself_flags_nothing(planted):
    work, conf, release, _ = planted
    before = {f: os.stat(f).st_mtime for f in glob.glob(str(work / "results" / "**" / "*"),
                                                         recursive=True)}
    rc, text, log = _ab(work, conf, "--same", release, "--factor", "1.5",
                        "--env", "JAXBENCH_CPU_THREADS=split")
    assert rc == 0, log + text
    assert "No significant slowdown." in text and "No benchmark changed" in text
    assert "both sides with JAXBENCH_CPU_THREADS=split" in text
    # an A/A writes no results: both sides would land on the same commit
    after = {f: os.stat(f).st_mtime for f in glob.glob(str(work / "results" / "**" / "*"),
                                                        recursive=True)}
    assert after == before


def test_bad_input_is_named(planted, capsys):
    work, conf, release, _ = planted
    assert ab.main([release, "no-such-ref", "--config", conf, "--machine", MACHINE,
                    "--work-dir", str(work / "builds"), "--allow-busy"]) == 3
    assert "'no-such-ref' names no commit" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ab.parse([release])
    with pytest.raises(SystemExit):
        ab.parse([release, release, "--factor", "0.9"])
    with pytest.raises(SystemExit):
        ab.parse([release, release, "--env", "JAXBENCH_CPU_THREADS"])
    assert ab.parse([release, release, "--env", "A_B=c=d"]).env == ["A_B=c=d"]
    assert ab.main([release, release, "--config", str(work / "none.json"),
                    "--allow-busy"]) == 3
    assert "none.json does not exist" in capsys.readouterr().err


def test_rounds_alternate_abba():
    assert [ab.order(r) for r in range(6)] == [("A", "B"), ("B", "A"), ("B", "A"),
                                               ("A", "B"), ("A", "B"), ("B", "A")]


def test_samples_per_process_follow_what_a_sample_is():
    def bench(name, **attrs):
        return {"name": f"bench_x.Case.{name}", "type": "time", **attrs}

    assert ab._extra_params(bench("time_run", number=0, warmup_time=0.1)) == {
        "repeat": list(ab.WARM_REPEAT)}
    # a new interpreter per sample: few a process, whatever its class asks
    assert ab._extra_params(bench("timeraw_import_jax", number=1, warmup_time=0.0,
                                  repeat=[10, 25, 10.0])) == {
        "repeat": list(ab.NEW_INTERPRETER_REPEAT)}
    # one fresh object per sample: its own sampling
    assert ab._extra_params(bench("time_compile", number=1, warmup_time=0.0)) == {}
    assert ab._extra_params({"name": "bench_x.Case.track_peak", "type": "track"}) == {}
