"""The burst probe: a real sampling process and a real burning one, and the bucket arithmetic."""

import re

import pytest

from jaxbench_helpers.selftest import burstprobe


@pytest.mark.judges_timings
def test_command_times_the_workloads_around_real_bursts(tmp_path, capsys):
    out = tmp_path / "bursts.md"
    code = burstprobe.main(["--seconds", "14", "--start", "2", "--period", "7", "--burst", "1",
                            "--side", "64", "--machine", "test-box", "-o", str(out),
                            "--allow-busy"])
    assert code == 0
    text = out.read_text()
    assert text.startswith("# Does a burst's effect outlast it? `test-box`")
    assert "(2 bursts)" in text
    assert re.search(r"The machine while it ran: (quiet|UNDER LOAD): other processes used", text)
    rows = {line.split("|")[1].strip(): line for line in text.splitlines()
            if line.startswith("| ") and not line.startswith("| place")}
    # the burns overlap samples, and the samples after them reach the settled reference
    for place in ("median 5 s or more after (seconds)", burstprobe.DURING, "0–0.5 s after",
                  "5–10 s after", burstprobe.BEFORE):
        assert place in rows, place
    cells = [c.strip() for c in rows["5–10 s after"].split("|")[2:6]]
    assert int(cells[0]) > 0 and cells[1:] == ["1.000"] * 3
    assert "wrote" in capsys.readouterr().err


def test_a_failing_sampler_is_a_clear_error():
    with pytest.raises(burstprobe.BurstProbeError, match="exited 1 before it started"):
        burstprobe.probe(seconds=1, start=0, period=7, burst=1, side="not-a-side",
                         cpu_setting="1")


def test_burst_starts_end_within_the_run():
    assert burstprobe.burst_starts(10, 20, 2, 200) == [10 + 20 * k for k in range(10)]
    assert burstprobe.burst_starts(10, 20, 2, 51) == [10, 30]
    assert burstprobe.burst_starts(10, 20, 2, 11) == []


BURSTS = [(10.0, 12.0), (30.0, 32.0)]


@pytest.mark.parametrize("begun, ended, bucket", [
    (5.0, 5.1, burstprobe.BEFORE),
    (9.95, 10.05, burstprobe.DURING),   # a sample the burst's start runs into
    (11.0, 11.1, burstprobe.DURING),
    (11.99, 12.1, burstprobe.DURING),   # one that starts before the burst ends
    (12.2, 12.3, "0–0.5 s after"),
    (12.5, 12.6, "0.5–2 s after"),
    (15.0, 15.1, "2–5 s after"),
    (17.0, 17.1, "5–10 s after"),
    (29.0, 29.1, "over 10 s after"),
    (40.0, 40.1, "5–10 s after"),       # measured from the last burst, not the first
])
def test_each_sample_goes_by_where_it_lies(begun, ended, bucket):
    assert burstprobe.bucket_of(begun, ended, BURSTS) == bucket


def _samples(pace):
    """A sample every 0.1 s from 0 to 40 s; ``pace(t)`` scales the three workloads' times."""
    return [[t / 10, t / 10 + 0.05, *(pace(t / 10) * base for base in (1e-3, 8e-3, 2e-2))]
            for t in range(400)]


def test_ratios_are_bucket_medians_over_the_settled_pace():
    def pace(t):
        if any(a <= t + 0.05 and t <= b for a, b in BURSTS):
            return 1.5
        return 1.1 if any(0 <= t - b < 0.5 for _, b in BURSTS) else 1.0

    found = burstprobe.buckets(_samples(pace), BURSTS)
    table = burstprobe.ratios(found, burstprobe.reference(found))
    assert table[burstprobe.DURING][1] == pytest.approx([1.5] * 3)
    assert table["0–0.5 s after"][1] == pytest.approx([1.1] * 3)
    for place in ("0.5–2 s after", "2–5 s after", "5–10 s after", "over 10 s after",
                  burstprobe.BEFORE):
        assert table[place][1] == pytest.approx([1.0] * 3)
    assert burstprobe.reference(found) == pytest.approx([1e-3, 8e-3, 2e-2])


def test_without_settled_samples_the_reference_is_refused():
    close = [(s, s + 0.05, 1.0, 1.0, 1.0) for s in (12.5, 14.0, 16.0)]
    with pytest.raises(burstprobe.BurstProbeError, match="lengthen --period"):
        burstprobe.reference(burstprobe.buckets(close, BURSTS))


def test_the_reading_follows_the_figures():
    def pace(t):
        return 1.5 if any(a <= t + 0.05 and t <= b for a, b in BURSTS) else (
            1.2 if any(2 <= t - b < 5 for _, b in BURSTS) else 1.0)

    facts = {"cpus": [0, 1], "jax": "0.10.2", "numpy": "2.4.6"}
    text = burstprobe.markdown(_samples(pace), BURSTS, facts, seconds=40, start=10, period=20,
                               burst=2, side=64, cpu_setting="all", machine="m")
    assert "(2 bursts)" in text
    assert "| during a burst | " in text and "| 1.500 | 1.500 | 1.500 |" in text
    assert ("jit 64×64 matmul: 1.500× during a burst; within 5 s after one, at most 20.0% from "
            "its settled pace (2–5 s after).") in text


@pytest.mark.parametrize("argv, message", [
    (["--period", "7"], "--period 7: at least --burst"),
    (["--seconds", "31"], "--seconds 31: too short for two bursts"),
    (["--burst", "0"], "--burst 0 must be above 0"),
])
def test_bad_options_are_named(argv, message, capsys):
    with pytest.raises(SystemExit):
        burstprobe.parse(argv)
    assert message in capsys.readouterr().err
