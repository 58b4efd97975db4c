"""The timing lock and the load record, with real processes.

"Other" load comes from a detached busy loop (its parent exits at once, so it is no
descendant of the test), "our" load from a child of the test: only the first may count.
"""

import os
import subprocess
import sys
import textwrap
import time

import pytest

from jaxbench_helpers.common import quiet

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
    theirs = {name: ticks - before.others_by_name.get(name, 0)
              for name, ticks in after.others_by_name.items()}
    assert max(theirs.values()) >= 1.0 * quiet.TICKS  # the detached loop is another's
    assert f"python[{child.pid}]" not in after.others_by_name


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
    # one second of a kernel thread in ten minutes is no load; seven seconds in ten minutes is
    assert quiet.LoadRecord("probe", start, seconds=600, busy_seconds=1).quiet
    for busy in (dict(others_share=0.2), dict(busy_seconds=7), dict(seconds=60, busy_seconds=1)):
        loaded = quiet.LoadRecord("probe", start, **{"seconds": 600, **busy})
        assert not loaded.quiet and loaded.summary().startswith("UNDER LOAD")


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
