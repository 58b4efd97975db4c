"""The machine results go under: its name, its description in asv's machine file, and the check
that a name already in a results folder is not reused for other hardware.

Machines of one kind are not all the same hardware (a fresh VM of the kind that made
results/cpu-2core-shared-vm, an Intel Xeon, can be an AMD EPYC), and asv would plot their
figures as one series. So the default name is made from the hardware, and before results are
added under a name, that name's ``machine.json`` must describe this host.
"""

import contextlib
import json
import os
import re
import sys

from .asvconfig import ConfigError

# the memory a VM reports moves by a few MiB between boots of the same kind
RAM_TOLERANCE = 0.03


class MachineMismatch(ConfigError):
    """A machine name whose recorded hardware is not this host's."""


def facts():
    """This host as asv describes it: cpu, num_cpu, ram (bytes), arch, os, machine."""
    from asv.machine import Machine

    return Machine.get_defaults()


def _cpu_words(cpu):
    text = re.sub(r"\((?:R|TM|C)\)", " ", cpu, flags=re.I)
    text = re.sub(r"@.*$", " ", text)  # the clock, which a VM may report differently
    text = re.sub(r"\b(?:processor|cpu)\b", " ", text, flags=re.I)
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown-cpu"


def default_name(found=None, platform="cpu"):
    """A name made from the hardware: 'cpu-2core-amd-epyc-24gb'."""
    found = found or facts()
    gib = round(int(found["ram"]) / 2**30)
    return f"{platform}-{found['num_cpu']}core-{_cpu_words(found['cpu'])}-{gib}gb"


def machine_name(given=None):
    """``given`` (--machine), else JAXBENCH_MACHINE, else the name made from the hardware."""
    return given or os.environ.get("JAXBENCH_MACHINE") or default_name()


def describe(found):
    ram = found.get("ram")
    memory = f"{int(ram) / 2**30:.1f} GiB" if str(ram or "").isdigit() else "memory unknown"
    return f"{found.get('cpu') or 'CPU unknown'}, {found.get('num_cpu') or '?'} cores, {memory}"


def differences(recorded, found):
    """How the machine ``recorded`` (a machine.json) differs from ``found`` (``facts()``) in CPU
    model, cores and memory; [] for the same hardware. A recorded CPU may carry a note
    ('Intel(R) Xeon(R) Processor (shared VM)', from ``record``)."""
    found_differences = []
    cpu, model = recorded.get("cpu"), found["cpu"]
    if not cpu:
        found_differences.append("it records no CPU model")
    elif cpu != model and not cpu.startswith(model + " ("):
        found_differences.append(f"CPU {cpu!r}, here {model!r}")
    if str(recorded.get("num_cpu")) != str(found["num_cpu"]):
        found_differences.append(f"{recorded.get('num_cpu')} cores, here {found['num_cpu']}")
    ram = str(recorded.get("ram") or "")
    if not ram.isdigit():
        found_differences.append("it records no memory size")
    elif abs(int(ram) - int(found["ram"])) > RAM_TOLERANCE * max(int(ram), int(found["ram"])):
        found_differences.append(f"{int(ram) / 2**30:.1f} GiB of memory, here "
                                 f"{int(found['ram']) / 2**30:.1f} GiB")
    return found_differences


def check(name, results_dir, found=None):
    """Refuse (MachineMismatch) to add results under ``name`` in ``results_dir`` when its
    machine.json describes other hardware than this host (or ``found``)."""
    path = os.path.join(results_dir, name, "machine.json")
    try:
        with open(path) as f:
            recorded = json.load(f)
    except FileNotFoundError:
        return
    except (OSError, ValueError) as err:
        raise MachineMismatch(f"cannot read {path} ({err}); repair it or pick another "
                              "--machine name") from None
    found = found or facts()
    mismatch = differences(recorded, found)
    if not mismatch:
        return
    suggestion = default_name(found)
    if suggestion == name:
        suggestion += "-2"
    raise MachineMismatch(
        f"{path} describes another machine: {describe(recorded)}; this host is "
        f"{describe(found)} ({'; '.join(mismatch)}). Figures of different hardware must not "
        f"share a name, or asv plots them as one series: pass --machine {suggestion} (made "
        "from this host's hardware) or another new name")


def record(name, note="", path="~/.asv-machine.json"):
    """Describe this host under ``name`` in asv's machine file.

    ``asv machine --yes --machine NAME`` keeps only the fields that differ from the detected
    defaults, which leaves results/NAME/machine.json without CPU, cores or memory.
    """
    path = os.path.expanduser(path)
    described = dict(facts(), machine=name)
    if note:
        described["cpu"] = f"{described['cpu']} ({note})"
    try:
        with open(path) as f:
            machines = json.load(f)
    except FileNotFoundError:
        machines = {"version": 1}
    machines[name] = described
    with open(path, "w") as f:
        json.dump(machines, f, indent=4)
    print(f"jaxbench: machine {name}: {describe(described)}", flush=True)


def ensure_described(name, results_dir=None):
    """Describe ``name`` in asv's machine file unless it is there already (asv would ask);
    first refuse a name whose machine.json in ``results_dir`` (default: the project's
    results/) describes other hardware, since what runs here is reported under that name."""
    from asv.machine import MachineCollection

    from . import paths

    check(name, results_dir or paths.RESULTS)
    path = MachineCollection.get_machine_file_path()
    try:
        with open(path) as f:
            known = json.load(f)
    except (OSError, ValueError):
        known = {}
    if name not in known:
        with contextlib.redirect_stdout(sys.stderr):  # standard output carries the report
            record(name, path=path)


def add_argument(parser):
    """The --machine option of the commands that time or write results."""
    parser.add_argument("--machine", help="machine name for the results (default: "
                        "JAXBENCH_MACHINE, else one made from the hardware, e.g. "
                        f"{default_name()})")
