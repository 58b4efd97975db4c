"""The timing lock and the load record, with real processes.

"Other" load comes from a detached busy loop (its parent exits at once, so it is no
descendant of the test), "our" load from a child of the test: only the first may count.
"""

import dataclasses
import datetime
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from jaxbench_helpers.analysis import results
from jaxbench_helpers.common import quiet

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# busy for {seconds} of its own CPU time, however long a loaded machine makes that take
BUSY = ("import time\nend = time.process_time() + {seconds}\n"
        "while time.process_time() < end: pass\n")


@pytest.fixture(autouse=True)
def own_lock(tmp_path, monkeypatch):
    """A lock file of the test's own, never the machine's real one; no inherited holder."""
    monkeypatch.setenv(quiet.LOCK_PATH_ENV, str(tmp_path / "timing.lock"))
    monkeypatch.delenv(quiet.HELD_ENV, raising=False)


def detached_busy_loop(seconds, done=None):
    """A CPU-bound process that is not a descendant of this one (reparented to init); it
    creates the file ``done`` when its CPU time is spent, if given."""
    code = BUSY.format(seconds=seconds)
    if done is not None:
        code += f"open({str(done)!r}, 'w').close()\n"
    subprocess.run(["sh", "-c", f"{sys.executable} -c \"{code}\" >/dev/null 2>&1 &"],
                   check=True)
    time.sleep(0.3)  # let it start


def own_busy_child(seconds):
    return subprocess.Popen([sys.executable, "-c", BUSY.format(seconds=seconds)])


def test_our_children_count_as_ours_and_detached_processes_as_others(tmp_path):
    before = quiet.Reading.now(os.getpid())
    child = own_busy_child(1.5)
    child.wait()
    done = tmp_path / "detached-done"
    detached_busy_loop(1.5, done)
    deadline = time.time() + 60
    while not done.exists():
        assert time.time() < deadline, "the detached loop never finished its CPU time"
        time.sleep(0.1)
    time.sleep(0.2)  # let it exit
    after = quiet.Reading.now(os.getpid())
    assert after.ours - before.ours >= 1.2 * quiet.TICKS  # the child's CPU time is ours
    theirs = quiet.others_ticks(before, after)
    assert max(theirs.values()) >= 1.0 * quiet.TICKS  # the detached loop is another's
    assert child.pid not in theirs


def wait_for(path, what):
    deadline = time.time() + 60
    while not path.exists():
        assert time.time() < deadline, f"{what} never happened"
        time.sleep(0.05)


def test_a_descendant_that_leaves_our_tree_takes_none_of_its_past_to_the_others(tmp_path):
    """Its parent ends and it is reparented outside our tree: its past CPU time was ours."""
    ready, go = tmp_path / "ready", tmp_path / "go"
    orphan = (BUSY.format(seconds=1.0) + f"import os, time\nopen({str(ready)!r}, 'w')"
              ".write(str(os.getpid()))\ntime.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import os, subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", {orphan!r}])
        while not os.path.exists({str(go)!r}):
            time.sleep(0.05)
        """)])
    wait_for(ready, "the grandchild's CPU time")
    pid = int(ready.read_text())
    try:
        before = quiet.Reading.now(os.getpid())
        assert pid in before.tree and before.processes[pid][1] >= 0.8 * quiet.TICKS
        go.touch()
        parent.wait()
        after = quiet.Reading.now(os.getpid())
        assert pid in after.processes and pid not in after.tree  # reparented, asleep
        assert quiet.others_ticks(before, after).get(pid, 0) <= 0.1 * quiet.TICKS
    finally:
        os.kill(pid, 9)


def test_another_process_that_ends_is_not_counted_again_through_its_reaper(tmp_path):
    """A process of another's ends and its parent reaps it: the parent's reaped-children ticks
    jump by the whole life of it, of which the earlier reading had counted all but the end."""
    ready, go = tmp_path / "ready", tmp_path / "go"
    script = tmp_path / "loop.py"
    script.write_text(BUSY.format(seconds=2.0) + textwrap.dedent(f"""
        import os, time
        open({str(ready)!r}, "w").write(str(os.getpid()))
        while not os.path.exists({str(go)!r}):
            time.sleep(0.02)
        """))
    # its reaper is a shell outside our tree (the outer one exits at once) that lives on
    subprocess.run(["sh", "-c", f"sh -c '{sys.executable} {script}; sleep 30' "
                    ">/dev/null 2>&1 &"], check=True)
    wait_for(ready, "the detached loop's CPU time")
    pid = int(ready.read_text())
    before = quiet.Reading.now(os.getpid())
    lived, reaper = before.processes[pid][1], before.processes[pid][0]
    assert pid not in before.tree and lived >= 1.6 * quiet.TICKS
    go.touch()
    deadline = time.time() + 60
    while os.path.exists(f"/proc/{pid}"):  # ended and reaped
        assert time.time() < deadline, "the detached loop never ended"
        time.sleep(0.02)
    after = quiet.Reading.now(os.getpid())
    os.kill(reaper, 9)
    theirs = sum(quiet.others_ticks(before, after).values())
    seconds = after.at - before.at
    # a short interval: all the machine's CPUs in it are far below the loop's two seconds
    assert theirs < lived / 2, (theirs, lived, seconds)


def test_others_are_seen_by_a_look():
    detached_busy_loop(3)
    theirs, _, top = quiet.look(2)
    # one busy CPU of the machine's CPUs, whatever else runs
    assert theirs > 0.5 / (os.cpu_count() or 1)
    assert any("python" in name for name in top), top


def test_a_busy_machine_is_refused_with_the_busiest_process_named():
    detached_busy_loop(4)
    with pytest.raises(quiet.BusyMachine, match=r"busy: other processes used \d+%.*python"):
        with quiet.timing_session("probe", look_seconds=1.5, say=lambda _: None):
            pytest.fail("the block ran on a busy machine")


def test_allow_busy_runs_and_the_record_says_so(tmp_path):
    path = tmp_path / "results" / "m" / "quiet.jsonl"
    detached_busy_loop(4)
    with quiet.timing_session("probe", allow_busy=True, record_path=str(path),
                              look_seconds=1.5, say=lambda _: None) as monitor:
        time.sleep(2.5)
    record = monitor.record
    assert record.allowed_busy
    assert record.busy_seconds >= 1 and record.spells, record
    assert not record.quiet and "UNDER LOAD" in record.summary()
    (read,) = quiet.read_records(str(path))
    assert read == record
    assert path.suffix == ".jsonl"  # asv reads every .json under results/ as a result file


def test_the_record_reads_quiet_only_without_load():
    start = "2026-12-01T00:00:00+00:00"
    record = quiet.LoadRecord("probe", start, others_share=0.01, seconds=600)
    assert record.quiet and record.summary().startswith("quiet")
    # bursts are weighed, not counted: sixteen seconds of a kernel thread at 6% of the machine
    # in ten minutes are no load, nor six seconds of one whole CPU of two; seven are, as one in
    # a minute is
    for calm in (dict(busy_seconds=16, burst_seconds=0.16), dict(busy_seconds=6,
                                                                  burst_seconds=2.7)):
        assert quiet.LoadRecord("probe", start, **{"seconds": 600, **calm}).quiet
    for busy in (dict(others_share=0.2), dict(busy_seconds=7, burst_seconds=3.15),
                 dict(seconds=60, busy_seconds=1, burst_seconds=0.45)):
        loaded = quiet.LoadRecord("probe", start, **{"seconds": 600, **busy})
        assert not loaded.quiet and loaded.summary().startswith("UNDER LOAD"), loaded.summary()


def test_an_older_record_without_its_bursts_is_judged_by_their_bound():
    def spell(start, seconds, peak):
        return [_stamp(start), _stamp(start + seconds), peak]

    # the peak's excess over the spell's stamped length, plus the second the stamps cut off
    hovering = [spell(1000.0 + 3 * i, 0, 0.06) for i in range(225)]
    record = quiet.LoadRecord("main", _stamp(1000), seconds=744, busy_seconds=225,
                              others_share=0.04, spells=hovering)
    assert record.burst_share == pytest.approx(225 * 0.01 / 744) and record.quiet
    burst = quiet.LoadRecord("main", _stamp(1000), seconds=600, busy_seconds=7,
                             spells=[spell(1200.0, 6, 0.5)])
    assert burst.burst_share == pytest.approx(7 * 0.45 / 600) and not burst.quiet
    # read back from a line written before bursts were kept
    line = json.loads(burst.to_json())
    del line["burst_seconds"]
    assert quiet.LoadRecord(**line) == burst


def test_the_monitor_weighs_the_bursts_it_counts():
    detached_busy_loop(3)
    monitor = quiet.LoadMonitor("probe").start()
    time.sleep(2.5)
    record = monitor.stop()
    # at least one sampled second of one whole CPU, beyond the limit
    whole_cpu = 1 / (os.cpu_count() or 1)
    assert record.busy_seconds >= 1 and record.burst_seconds is not None
    assert record.burst_seconds >= whole_cpu - quiet.SPELL_LIMIT, record
    assert record.burst_share == pytest.approx(record.burst_seconds / record.seconds, abs=1e-3)


def _stamp(seconds):
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).isoformat(
        timespec="seconds")


def _history_without_record(tmp_path):
    """The committed history's results copied into tmp_path without their load record, and
    {(commit, benchmark): (start, end)} in seconds, from the result files' own columns."""
    machine = "cpu-2core-amd-epyc-24gb"
    source = os.path.join(ROOT, "results")
    shutil.copytree(os.path.join(source, machine), tmp_path / machine,
                    ignore=shutil.ignore_patterns(quiet.RECORD_NAME))
    shutil.copy(os.path.join(source, "benchmarks.json"), tmp_path)
    spans = {}
    for path in glob.glob(str(tmp_path / machine / "*.json")):
        data = json.load(open(path))
        if "results" not in data:
            continue
        start, length = (data["result_columns"].index(c) for c in ("started_at", "duration"))
        for name, row in data["results"].items():
            spans[data["commit_hash"], name] = (row[start] / 1000, row[start] / 1000
                                                + (row[length] or 0))
    return machine, spans


# the committed benchmarks' units, read once
UNITS = results.load_units(os.path.join(ROOT, "results"))


def _overlapping(spans, first, last, timed_only=True):
    """The (commit, benchmark) keys whose span overlaps first..last: of timed benchmarks, those
    a busy machine moves, unless timed_only is False."""
    return {key for key, (start, end) in spans.items() if start < last and end > first
            and (results.timed(results.unit_of(key[1], UNITS)) or not timed_only)}


def test_the_benchmarks_a_busy_run_measured_are_found_from_the_record_beside_the_results(
        tmp_path):
    machine, spans = _history_without_record(tmp_path)
    ordered = sorted(spans.items(), key=lambda item: item[1][0])
    # a busy window around a fact (bench_environment) measured in the first half
    fact = next(i for i, (key, _) in enumerate(ordered)
                if i >= 20 and key[1].startswith("bench_environment."))
    quiet_first = len(ordered) - 40
    assert fact + 20 < quiet_first
    busy_from, busy_to = ordered[fact - 10][1][0], ordered[fact + 10][1][0]
    quiet_from, quiet_to = ordered[quiet_first][1][0], ordered[quiet_first + 20][1][0]
    record_path = str(tmp_path / machine / quiet.RECORD_NAME)
    loaded = quiet.LoadRecord("main", _stamp(busy_from), _stamp(busy_to), busy_to - busy_from,
                              others_share=0.3)
    calm = quiet.LoadRecord("main", _stamp(quiet_from), _stamp(quiet_to), quiet_to - quiet_from)
    assert not loaded.quiet and calm.quiet
    quiet.write_record(loaded, record_path)
    quiet.write_record(calm, record_path)

    found = results.measured_under_load(str(tmp_path), machine)
    # the record's times are whole seconds: a span overlaps it if it overlaps those seconds
    expected = _overlapping(spans, quiet.epoch(loaded.started), quiet.epoch(loaded.ended) + 1)
    assert {(r.commit_hash, name) for r, name, _ in found} == expected
    # counts and sizes measured then are left out: load does not move them
    everything = _overlapping(spans, quiet.epoch(loaded.started), quiet.epoch(loaded.ended) + 1,
                              timed_only=False)
    assert any(not name.startswith("bench_environment.") for _, name in everything - expected)
    assert len(expected) >= 20 and all(record == loaded for _, _, record in found)
    assert ordered[fact][0] not in expected

    os.remove(record_path)
    quiet.write_record(calm, record_path)
    assert results.measured_under_load(str(tmp_path), machine) == []


def test_a_run_busy_by_bursts_alone_marks_only_what_its_bursts_covered(tmp_path):
    # a burst biases the measurements it covers, not the rest of the run
    machine, spans = _history_without_record(tmp_path)
    ordered = sorted(spans.values())
    run_from, run_to = ordered[10][0], ordered[90][0]
    burst_from, burst_to = ordered[40][0], ordered[45][0]
    burst = quiet.LoadRecord(
        "main", _stamp(run_from), _stamp(run_to), run_to - run_from, others_share=0.03,
        busy_seconds=round(burst_to - burst_from), burst_seconds=0.45 * (burst_to - burst_from),
        spells=[[_stamp(burst_from), _stamp(burst_to), 0.5]])
    assert burst.load_reasons == ["bursts"]
    record_path = str(tmp_path / machine / quiet.RECORD_NAME)
    quiet.write_record(burst, record_path)
    (spell_from, spell_to, _), = burst.spells
    covered = _overlapping(spans, quiet.epoch(spell_from), quiet.epoch(spell_to) + 1)
    whole_run = _overlapping(spans, quiet.epoch(burst.started), quiet.epoch(burst.ended) + 1)
    assert len(covered) >= 5 and len(whole_run) >= len(covered) + 30
    found = results.measured_under_load(str(tmp_path), machine)
    assert {(r.commit_hash, name) for r, name, _ in found} == covered

    # the same run under a steady load besides: every benchmark it measured
    os.remove(record_path)
    quiet.write_record(dataclasses.replace(burst, others_share=0.2), record_path)
    found = results.measured_under_load(str(tmp_path), machine)
    assert {(r.commit_hash, name) for r, name, _ in found} == whole_run


def test_a_quiet_run_marks_what_its_strong_spells_covered_and_not_a_kernel_threads(tmp_path):
    # a whole CPU taken for seconds biases what it covers even when the run reads quiet overall
    machine, spans = _history_without_record(tmp_path)
    starts = sorted(start for start, _ in spans.values())
    run_from, run_to = starts[0], starts[-1]
    burst_from, kernel_from = starts[len(starts) // 3], starts[2 * len(starts) // 3]
    calm = quiet.LoadRecord(
        "main", _stamp(run_from), _stamp(run_to), run_to - run_from, others_share=0.01,
        busy_seconds=6, burst_seconds=0.45 * 3 + 0.04 * 3,
        spells=[[_stamp(burst_from), _stamp(burst_from + 2), 0.5],
                [_stamp(kernel_from), _stamp(kernel_from + 2), 0.09]])
    assert calm.quiet and len(calm.strong_spells) == 1
    assert "which mark the measurements covered" in calm.summary()
    record_path = str(tmp_path / machine / quiet.RECORD_NAME)
    quiet.write_record(calm, record_path)
    burst = _overlapping(spans, quiet.epoch(calm.spells[0][0]), quiet.epoch(calm.spells[0][1]) + 1)
    kernel = _overlapping(spans, quiet.epoch(calm.spells[1][0]),
                          quiet.epoch(calm.spells[1][1]) + 1)
    assert burst and kernel - burst
    found = results.measured_under_load(str(tmp_path), machine)
    assert {(r.commit_hash, name) for r, name, _ in found} == burst


HOLDER = textwrap.dedent("""
    import sys, time
    from jaxbench_helpers.common import quiet
    with quiet.machine_lock("holder-command"):
        print("held", flush=True)
        time.sleep(float(sys.argv[1]))
""")


def test_a_second_timing_run_waits_for_the_first_and_names_it():
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, "2"], stdout=subprocess.PIPE,
                              text=True, env=dict(os.environ))
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(quiet.BusyMachine, match=rf"held by pid {holder.pid} \(holder-command"):
        with quiet.machine_lock("second", wait=False):
            pass
    said = []
    started = time.monotonic()
    with quiet.machine_lock("second", poll=0.1, say=said.append):
        waited = time.monotonic() - started
    holder.wait()
    assert waited > 0.5 and "waiting" in said[0] and "holder-command" in said[0]


def test_a_command_refused_by_the_lock_exits_4_naming_the_holder(capsys):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, "2"], stdout=subprocess.PIPE,
                              text=True, env=dict(os.environ))
    assert holder.stdout.readline().strip() == "held"

    def command():
        with quiet.machine_lock("second", wait=False):
            return 0

    assert quiet.main_guard(command) == 4
    holder.wait()
    assert re.search(rf"^jaxbench: .*held by pid {holder.pid} \(holder-command",
                     capsys.readouterr().err)
    assert quiet.main_guard(command) == 0


def test_commands_started_by_the_holder_inherit_the_lock():
    code = ("from jaxbench_helpers.common import quiet\n"
            "with quiet.machine_lock('child', wait=False):\n    print('ran')\n")
    with quiet.machine_lock("parent"):
        assert os.environ[quiet.HELD_ENV] == str(os.getpid())
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ran", out.stderr
    assert quiet.HELD_ENV not in os.environ


def test_system_checks_name_what_a_reader_should_know():
    notes = quiet.system_checks()
    aslr = open("/proc/sys/kernel/randomize_va_space").read().strip()
    assert any("ASLR" in n for n in notes) == (aslr != "0")
