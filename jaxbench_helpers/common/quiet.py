"""A quiet machine while anything is timed, and a record of how quiet it was.

Every command that times (the main job, calibrate, sensitivity, noisefloor, ab, bisect) runs
inside ``timing_session``:

* one machine-wide lock (``flock`` on a file in /tmp), so two timing runs never overlap; a
  second one waits for the first and says whom it waits for. Commands that a timing command
  starts inherit its lock (an environment variable names the holder), so nesting never waits
  on itself;
* before it starts, a short look at the machine: if other processes use more than
  ``BUSY_LIMIT`` of its CPU time, it refuses to start unless told to (``--allow-busy``),
  naming the busiest processes;
* while it runs, a sampler reads /proc once a second: the CPU time of every process that is
  not this command or one of its descendants, and the hypervisor's steal time. The record
  (busy share overall and the busy spells with their times) is written beside the results, so
  a report can say which figures were taken under load.

System checks in the spirit of ``pyperf system show`` (ASLR, frequency governor, isolated
CPUs, swap, load average) are recorded with it: on a VM most cannot be changed, but a reader
of the figures should know them.
"""

import contextlib
import datetime
import fcntl
import json
import os
import sys
import threading
import time
from dataclasses import asdict, dataclass, field

from . import markdown

LOCK_PATH_ENV = "JAXBENCH_LOCK_PATH"
DEFAULT_LOCK_PATH = "/tmp/jaxbench-timing.lock"
# set for the commands a lock holder starts: the holder's pid
HELD_ENV = "JAXBENCH_TIMING_LOCK_HELD"
# others may use this share of the machine's CPU time before a timing run refuses to start
BUSY_LIMIT = 0.05
# a one-second sample where others used more than this share counts as a busy spell
SPELL_LIMIT = 0.05
# a run stays "quiet" while others' bursts, their CPU time in busy seconds beyond the
# SPELL_LIMIT a steady load may take, are at most this share of the machine's time over the
# run: weighed, not counted, so kernel threads hovering about the limit (kdamond.0 at a tenth
# of a CPU) are no load, and one whole CPU of two for seven seconds in ten minutes is
BURST_SHARE = 0.005
# a spell in which others took at least this share of the machine (half a CPU of two) marks the
# measurements it covers even in a run that reads quiet: a whole CPU taken in a burst slows what
# it covers whatever the rest of the run held, while kernel threads' spells peak under a fifth
# (results/LOAD-RECORDS.md)
RING_PEAK = 0.25
LOOK_SECONDS = 3.0
# the load record's file name beside results
RECORD_NAME = "quiet.jsonl"
TICKS = os.sysconf("SC_CLK_TCK")


class BusyMachine(RuntimeError):
    pass


# ---------------------------------------------------------------- /proc


def _steal_ticks():
    """(the hypervisor's steal ticks since boot, CPUs), from /proc/stat."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    steal = int(fields[8]) if len(fields) > 8 else 0
    return steal, os.cpu_count() or 1


def _processes():
    """{pid: (ppid, ticks of itself and its reaped children, command name)}."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                text = f.read()
        except OSError:  # gone meanwhile
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        rest = text[text.rindex(")") + 2:].split()
        # fields after the name: state ppid ... utime(12) stime(13) cutime(14) cstime(15)
        ppid = int(rest[1])
        ticks = sum(int(v) for v in rest[11:15])
        found[int(entry)] = (ppid, ticks, name)
    return found


def _tree(processes, root):
    children = {}
    for pid, (ppid, _, _) in processes.items():
        children.setdefault(ppid, []).append(pid)
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in tree:
            tree.add(pid)
            todo += children.get(pid, [])
    return tree


@dataclass
class Reading:
    """One look at the machine: every process's cumulative ticks, and which are ours."""

    at: float
    steal: int
    cpus: int
    processes: dict  # {pid: (ppid, ticks, command name)}
    tree: set  # the timed command and its descendants

    @classmethod
    def now(cls, root):
        steal, cpus = _steal_ticks()
        processes = _processes()
        return cls(time.time(), steal, cpus, processes, _tree(processes, root))

    @property
    def ours(self):
        return sum(self.processes[pid][1] for pid in self.tree if pid in self.processes)


def others_ticks(a, b):
    """{pid: ticks} that processes other than ours used between two readings.

    Each other process's own growth, never the machine's busy time less ours: that difference
    turns our own accounting into others' load (a descendant that leaves our tree takes its
    whole life's ticks with it; one that ends while /proc is being read is counted by neither
    reading). A process of another's that ended between the readings is taken off its reaper,
    whose reaped-children ticks now hold its whole life while the earlier readings counted
    all but the last part. Interrupt time, which no process owns, is left out.
    """
    used = {}
    for pid, (_, ticks, _) in b.processes.items():
        if pid not in b.tree:
            before = a.processes.get(pid)
            used[pid] = ticks - (before[1] if before else 0)
    for pid, (ppid, ticks, _) in a.processes.items():
        if (pid not in b.processes and pid not in a.tree
                and ppid not in a.tree and ppid not in b.tree):
            used[ppid] = used.get(ppid, 0) - ticks
    return used


def share(ticks, a, b):
    """``ticks`` as a share of the machine's CPU time between two readings."""
    return min(1.0, max(0, ticks) / max((b.at - a.at) * TICKS * a.cpus, 1e-9))


def busiest(used, names, seconds, top=3):
    """The processes that used the most of ``used`` ({pid: ticks}) over ``seconds``."""
    ranked = sorted(used.items(), key=lambda kv: -kv[1])[:top]
    return [f"{names.get(pid, '?')}[{pid}] {100 * ticks / TICKS / max(seconds, 1e-9):.0f}% "
            "of a CPU" for pid, ticks in ranked if ticks > 0]


def look(seconds=LOOK_SECONDS, root=None):
    """(others' share, steal share, busiest processes) over the next ``seconds``."""
    root = root or os.getpid()
    a = Reading.now(root)
    time.sleep(seconds)
    b = Reading.now(root)
    used = others_ticks(a, b)
    names = {pid: name for pid, (_, _, name) in b.processes.items()}
    return (share(sum(used.values()), a, b), share(b.steal - a.steal, a, b),
            busiest(used, names, b.at - a.at))


# ---------------------------------------------------------------- system checks


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def system_checks():
    """What pyperf's ``system show`` would say about this machine, as short notes."""
    notes = []
    aslr = _read("/proc/sys/kernel/randomize_va_space")
    if aslr not in (None, "0"):
        notes.append(f"ASLR is on (randomize_va_space={aslr}): memory layout differs between "
                     "processes, one source of process-to-process spread")
    governor = _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    if governor is None:
        notes.append("no CPU frequency control visible (a VM): the host sets the clock")
    elif governor != "performance":
        notes.append(f"CPU frequency governor is {governor!r}, not 'performance'")
    if not _read("/sys/devices/system/cpu/isolated"):
        notes.append("no isolated CPUs (isolcpus): the benchmarks share CPUs with the system")
    swap = _read("/proc/swaps")
    if swap and len(swap.splitlines()) > 1:
        notes.append("swap is enabled")
    load1 = os.getloadavg()[0]
    if load1 > 0.5:
        notes.append(f"load average {load1:.2f} at the start")
    return notes


# ---------------------------------------------------------------- the lock


def lock_path():
    return os.environ.get(LOCK_PATH_ENV) or DEFAULT_LOCK_PATH


def _holder(path):
    try:
        with open(path) as f:
            return json.loads(f.read() or "{}")
    except (OSError, ValueError):
        return {}


@contextlib.contextmanager
def machine_lock(command, wait=True, poll=1.0, say=print):
    """Hold the machine-wide timing lock for ``command``; inherited by child processes."""
    if os.environ.get(HELD_ENV):
        yield  # a timing command higher up holds it for us
        return
    path = lock_path()
    handle = open(path, "a+")
    try:
        waited = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = _holder(path)
                text = (f"the timing lock {path} is held by pid {holder.get('pid', '?')} "
                        f"({holder.get('command', 'unknown command')}, since "
                        f"{holder.get('since', '?')})")
                if not wait:
                    raise BusyMachine(
                        f"{text}; wait for it to finish, or run again later") from None
                if not waited:
                    say(f"jaxbench: waiting: {text}")
                    waited = True
                time.sleep(poll)
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "command": command,
                                 "since": _stamp(time.time())}))
        handle.flush()
        os.environ[HELD_ENV] = str(os.getpid())
        try:
            yield
        finally:
            os.environ.pop(HELD_ENV, None)
            handle.seek(0)
            handle.truncate()
            handle.flush()
            fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        handle.close()


# ---------------------------------------------------------------- the load record


def _stamp(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(
        timespec="seconds")


def epoch(stamp):
    """A record's ISO time stamp in seconds since the epoch."""
    return datetime.datetime.fromisoformat(stamp).timestamp()


@dataclass
class LoadRecord:
    """How busy the rest of the machine was while a timing command ran."""

    command: str
    started: str
    ended: str = ""
    seconds: float = 0.0
    others_share: float = 0.0  # of the machine's CPU time, over the whole run
    steal_share: float = 0.0
    busy_seconds: int = 0  # one-second samples with others above SPELL_LIMIT
    # [start, end, peak share] of each busy spell, ISO times
    spells: list = field(default_factory=list)
    # others' CPU time in those samples beyond SPELL_LIMIT, in seconds of the whole machine
    # (None in records written before it was kept: burst_share then bounds it from the spells)
    burst_seconds: float | None = None
    busiest: list = field(default_factory=list)
    checks: list = field(default_factory=list)
    allowed_busy: bool = False

    @property
    def burst_share(self):
        """Others' bursts beyond SPELL_LIMIT, as a share of the machine's time over the run.

        An older record kept only each spell's peak and its whole-second stamps, so its bursts
        are bounded above: the peak's excess over the spell's length plus the second the stamps
        cut off.
        """
        burst = self.burst_seconds
        if burst is None:
            burst = sum((peak - SPELL_LIMIT) * (epoch(end) - epoch(start) + 1)
                        for start, end, peak in self.spells)
        return burst / max(self.seconds, 1.0)

    @property
    def under_others(self):
        """Whether others used more than BUSY_LIMIT of the machine over the whole run."""
        return self.others_share > BUSY_LIMIT

    @property
    def load_reasons(self):
        """Why the run reads under load: [] when it was quiet."""
        reasons = []
        if self.under_others:
            reasons.append("others overall")
        if self.burst_share > BURST_SHARE:
            reasons.append("bursts")
        return reasons

    @property
    def quiet(self):
        return not self.load_reasons

    @property
    def strong_spells(self):
        """The spells whose others reached RING_PEAK: bursts, not a kernel thread's hovering."""
        return [spell for spell in self.spells if spell[2] >= RING_PEAK]

    @property
    def busy_windows(self):
        """[(first, last)] epoch seconds of a run where its load fell: the whole run under a
        steady load; under bursts alone their spells only, since a burst biases the
        measurements it covers and not the rest (results/LOAD-RECORDS.md); in a quiet run its
        strong spells, which bias what they cover the same. [] when there are none."""
        if not self.ended:
            return []
        if self.quiet:
            spells = self.strong_spells
        elif self.under_others or not self.spells:
            return [(epoch(self.started), epoch(self.ended) + 1)]
        else:
            spells = self.spells
        # a spell's stamps are whole seconds: its last sample ends within the second after
        return [(epoch(start), epoch(end) + 1) for start, end, _ in spells]

    def summary(self):
        state = "quiet" if self.quiet else "UNDER LOAD"
        text = (f"{state}: other processes used {100 * self.others_share:.1f}% of the "
                f"machine's CPU time over {self.seconds / 60:.1f} min, steal "
                f"{100 * self.steal_share:.1f}%, {self.busy_seconds} s with others above "
                f"{100 * SPELL_LIMIT:.0f}%, bursts {100 * self.burst_share:.2f}% of its time")
        if self.busiest:
            text += f" (busiest: {', '.join(self.busiest)})"
        if self.quiet and self.strong_spells:
            text += (f"; others reached {100 * RING_PEAK:.0f}% of the machine in "
                     f"{markdown.counted(len(self.strong_spells), 'spell')}, which mark the "
                     "measurements covered")
        return text

    def to_json(self):
        return json.dumps(asdict(self), sort_keys=True)


class LoadMonitor:
    """Samples the others' share once a second in a thread while a timing command runs."""

    def __init__(self, command, interval=1.0, root=None):
        self.root = root or os.getpid()
        self.interval = interval
        self.record = LoadRecord(command, _stamp(time.time()), burst_seconds=0.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._first = self._last = None
        self._spell = None
        self._used = {}  # {pid: ticks} others used over the run
        self._names = {}

    def start(self):
        self._first = self._last = Reading.now(self.root)
        self._thread.start()
        return self

    def _account(self, now):
        """Add the interval since the last reading to the run's totals; its others' share."""
        used = others_ticks(self._last, now)
        for pid, ticks in used.items():
            self._used[pid] = self._used.get(pid, 0) + ticks
            if pid in now.processes:
                self._names[pid] = now.processes[pid][2]
        interval = share(sum(used.values()), self._last, now)
        self._last = now
        return interval

    def _sample(self):
        while not self._stop.wait(self.interval):
            before = self._last
            now = Reading.now(self.root)
            others = self._account(now)
            if others > SPELL_LIMIT:
                self.record.busy_seconds += round(now.at - before.at)
                self.record.burst_seconds += (others - SPELL_LIMIT) * (now.at - before.at)
                if self._spell is None:
                    self._spell = [_stamp(before.at), _stamp(now.at), others]
                else:
                    self._spell[1] = _stamp(now.at)
                    self._spell[2] = max(self._spell[2], others)
            elif self._spell is not None:
                self.record.spells.append(self._spell)
                self._spell = None

    def stop(self):
        self._stop.set()
        self._thread.join()
        end = Reading.now(self.root)
        self._account(end)
        if self._spell is not None:
            self.record.spells.append(self._spell)
        first = self._first
        self.record.others_share = round(share(sum(self._used.values()), first, end), 4)
        self.record.steal_share = round(share(end.steal - first.steal, first, end), 4)
        self.record.seconds = round(end.at - first.at, 1)
        self.record.ended = _stamp(end.at)
        self.record.spells = [[a, b, round(p, 3)] for a, b, p in self.record.spells]
        self.record.burst_seconds = round(self.record.burst_seconds, 3)
        self.record.busiest = busiest(self._used, self._names, end.at - first.at)
        return self.record


def write_record(record, path):
    """Append ``record`` as one JSON line to ``path`` (a .jsonl file: asv reads only .json)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a") as f:
        f.write(record.to_json() + "\n")


def read_records(path):
    try:
        with open(path) as f:
            return [LoadRecord(**json.loads(line)) for line in f if line.strip()]
    except FileNotFoundError:
        return []


@contextlib.contextmanager
def timing_session(command, *, allow_busy=False, record_path=None, wait=True,
                   look_seconds=LOOK_SECONDS, say=print):
    """The lock, a look at the machine before, the sampler during, the record after.

    Yields the ``LoadMonitor``; its ``record`` is complete once the block ends (and written to
    ``record_path`` when given). Nested sessions (a timing command started by another) only
    run their block: the outer session holds the lock and records the load.
    """
    if os.environ.get(HELD_ENV):
        yield None
        return
    with machine_lock(command, wait=wait, say=say):
        share, steal, top = look(look_seconds)
        if share > BUSY_LIMIT and not allow_busy:
            raise BusyMachine(
                f"the machine is busy: other processes used {100 * share:.0f}% of its CPU "
                f"time in the last {look_seconds:.0f} s ({', '.join(top) or 'short-lived'}); "
                "timings now would measure that load. Stop them and run again, or pass "
                "--allow-busy to time anyway (the load is recorded beside the results)")
        monitor = LoadMonitor(command).start()
        monitor.record.checks = system_checks()
        monitor.record.allowed_busy = share > BUSY_LIMIT
        try:
            yield monitor
        finally:
            record = monitor.stop()
            if record_path:
                write_record(record, record_path)
            say(f"jaxbench: machine during '{command}': {record.summary()}")


def add_arguments(parser):
    """The options every timing command takes."""
    parser.add_argument("--allow-busy", action="store_true",
                        help="time even when other processes load the machine (the load is "
                        "recorded beside the results)")


def main_guard(run):
    """Run ``run()`` and turn a refusal into exit code 4 with the reason on standard error."""
    try:
        return run()
    except BusyMachine as err:
        print(f"jaxbench: {err}", file=sys.stderr)
        return 4
