"""The machine results go under: its name, its description in asv's machine file, and the check
that a name already in a results folder is not reused for other hardware.

Machines of one kind are not all the same hardware (a fresh VM of the kind that made
results/cpu-2core-shared-vm, an Intel Xeon, can be an AMD EPYC), and asv would plot their
figures as one series. So the default name is made from the hardware, and before results are
added under a name, that name's ``machine.json`` must describe this host.

The model name is not enough: two VMs of one kind both say "AMD EPYC" and are different
processors (family 25 model 17 with AVX-512 ran the suite 1.5-2x slower than the one that made
the committed history). XLA compiles for the host's instruction set, so even the instruction
counts differ between them. The processor's identity (vendor, family, model, stepping, cache,
vector instruction set) is kept beside the results in ``hardware.txt`` and must match too.
"""

import contextlib
import json
import os
import re
import sys

from . import paths
from .asvconfig import ConfigError

# the memory a VM reports moves by a few MiB between boots of the same kind
RAM_TOLERANCE = 0.03

# beside machine.json, which asv rewrites from its machine file on every run (and every key of
# which becomes a parameter of each result, splitting the dashboard's series); not .json, which
# asv would try to read as a result
HARDWARE_FILE = "hardware.txt"

# /proc/cpuinfo's fields that tell processors apart when the model name does not: x86, then Arm
IDENTITY_FIELDS = {
    "vendor_id": "vendor", "cpu family": "family", "model": "model", "stepping": "stepping",
    "cache size": "cache",
    "CPU implementer": "implementer", "CPU architecture": "architecture",
    "CPU variant": "variant", "CPU part": "part", "CPU revision": "revision",
}
# the extensions that change the code XLA generates and the BLAS kernels picked; other flags
# (mitigations, virtualisation) vary with the hypervisor, not the processor
ISA_PREFIXES = ("sse", "ssse3", "avx", "amx", "fma", "f16c", "bmi", "vaes", "vpclmulqdq",
                "gfni", "asimd", "sve", "sme")


class MachineMismatch(ConfigError):
    """A machine name whose recorded hardware is not this host's."""


def facts():
    """This host as asv describes it: cpu, num_cpu, ram (bytes), arch, os, machine."""
    from asv.machine import Machine

    return Machine.get_defaults()


def identity(cpuinfo="/proc/cpuinfo"):
    """The processor beyond its model name, from the first processor in ``cpuinfo``: vendor,
    family, model, stepping, cache and ``isa`` (its vector extensions); {} where there is no
    /proc/cpuinfo (macOS), so nothing is compared there."""
    try:
        with open(cpuinfo) as f:
            first = f.read().strip().split("\n\n")[0]
    except OSError:
        return {}
    fields = {}
    for line in first.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    found = {name: fields[key] for key, name in IDENTITY_FIELDS.items() if fields.get(key)}
    flags = (fields.get("flags") or fields.get("Features") or "").split()
    found["isa"] = " ".join(sorted(f for f in flags if f.startswith(ISA_PREFIXES)))
    return found


def read_hardware(folder):
    """The identity kept in ``folder``/hardware.txt, or None where there is none."""
    try:
        with open(os.path.join(folder, HARDWARE_FILE)) as f:
            lines = f.read().splitlines()
    except (FileNotFoundError, NotADirectoryError):
        return None
    kept = {}
    for line in lines:
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition(":")
            kept[key.strip()] = value.strip()
    return kept


def write_hardware(folder, hardware):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, HARDWARE_FILE), "w") as f:
        f.write("# The processor that made the results in this folder; jaxbench adds results "
                "here only from\n# the same one (python3 -m jaxbench_helpers machine).\n")
        f.writelines(f"{key}: {value}\n" for key, value in hardware.items())


def describe_hardware(hardware):
    shown = ", ".join(f"{key} {value}" for key, value in hardware.items() if key != "isa")
    isa = hardware.get("isa", "")
    widest = [f for f in isa.split() if f in ("avx512f", "avx2", "amx_tile", "sve", "asimd")]
    return shown + (f", {' '.join(widest) or 'no AVX2'}" if isa else "")


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


def distinct_name(found=None, hardware=None, platform="cpu"):
    """The default name with the processor's family and model in it ('cpu-2core-amd-epyc-f25m17
    -24gb'): the name to suggest where the default one is taken by other hardware."""
    found = found or facts()
    hardware = identity() if hardware is None else hardware
    name = default_name(found, platform)
    if "family" in hardware and "model" in hardware:
        head, _, memory = name.rpartition("-")
        return f"{head}-f{hardware['family']}m{hardware['model']}-{memory}"
    return name + "-2"


def machine_name(given=None):
    """``given`` (--machine), else JAXBENCH_MACHINE, else the name made from the hardware."""
    return given or os.environ.get("JAXBENCH_MACHINE") or default_name()


def report_name(given=None, results_dir=None):
    """The name a report that adds no results gives this host: ``machine_name``'s, except that
    the default name, where results_dir holds another processor's figures under it, gives way
    to the name ``check`` would suggest (so a report never names another machine's hardware)."""
    name = machine_name(given)
    if given or os.environ.get("JAXBENCH_MACHINE"):
        return name
    results_dir = results_dir or paths.RESULTS
    found, hardware = facts(), identity()
    if _refusal(name, results_dir, found, hardware) is None:
        return name
    return _suggestion(name, results_dir, found, hardware)


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


def _suggestion(name, results_dir, found, hardware):
    """A name this host may add results to: the default one, else one with the processor's
    family and model in it, else that with '-2'."""
    distinct = distinct_name(found, hardware)
    for candidate in (default_name(found), distinct, distinct + "-2"):
        if candidate != name and _refusal(candidate, results_dir, found, hardware) is None:
            return candidate
    return distinct + "-3"


def _refusal(name, results_dir, found, hardware):
    """Why this host (``found``, ``hardware``) may not add results under ``name``: (kind,
    message) with kind 'unreadable', 'other hardware', 'not kept' or 'other processor'; None
    where it may."""
    folder = os.path.join(results_dir, name)
    path = os.path.join(folder, "machine.json")
    try:
        with open(path) as f:
            recorded = json.load(f)
    except FileNotFoundError:
        recorded = None
    except (OSError, ValueError) as err:
        return "unreadable", (f"cannot read {path} ({err}); repair it or pick another "
                              "--machine name")
    kept = read_hardware(folder)
    if recorded is not None:
        mismatch = differences(recorded, found)
        if mismatch:
            return "other hardware", (
                f"{path} describes another machine: {describe(recorded)}; this host is "
                f"{describe(found)} ({'; '.join(mismatch)}). Figures of different hardware must "
                "not share a name, or asv plots them as one series")
    if not hardware or (recorded is None and kept is None):
        return None  # no /proc/cpuinfo: the model name, cores and memory are all there is
    if kept is None:
        return "not kept", (
            f"{folder} holds results made before jaxbench kept the processor's identity "
            f"({HARDWARE_FILE}), and processors that differ report the same model name "
            f"{found['cpu']!r}. This host: {describe_hardware(hardware)}. If this host made "
            f"those results, say so once: python3 -m jaxbench_helpers machine --adopt {name}"
            f"{_results_dir_option(results_dir)}")
    changed = [f"{key} {kept.get(key, '-')!r}, here {hardware.get(key, '-')!r}"
               for key in sorted(set(kept) | set(hardware)) if kept.get(key) != hardware.get(key)]
    if changed:
        return "other processor", (
            f"{os.path.join(folder, HARDWARE_FILE)} names another processor than this host's "
            f"({'; '.join(changed)}). Figures of different processors must not share a name")
    return None


def check(name, results_dir, found=None, hardware=None):
    """Refuse (MachineMismatch) to add results under ``name`` in ``results_dir`` when its
    machine.json describes other hardware than this host (or ``found``), when its hardware.txt
    names another processor than this one (or ``hardware``, as ``identity()``), or when it has
    results but no hardware.txt (made before jaxbench kept one: ``adopt`` it once)."""
    found = found or facts()
    hardware = identity() if hardware is None else hardware
    refused = _refusal(name, results_dir, found, hardware)
    if refused is None:
        return
    kind, message = refused
    if kind == "unreadable":
        raise MachineMismatch(message)
    suggestion = _suggestion(name, results_dir, found, hardware)
    raise MachineMismatch(
        f"{message}{'; otherwise' if kind == 'not kept' else ':'} pass --machine {suggestion}"
        + (" (made from this host's hardware) or another new name" if kind == "other hardware"
           else " or another new name" if kind == "other processor" else ""))


def _results_dir_option(results_dir):
    same = os.path.abspath(results_dir) == os.path.abspath(paths.RESULTS)
    return "" if same else f" --results-dir {results_dir}"


def keep_hardware(name, results_dir, hardware=None):
    """Keep this host's processor beside ``name``'s results unless it is kept already; call after
    ``check`` passed, before results are added."""
    folder = os.path.join(results_dir, name)
    hardware = identity() if hardware is None else hardware
    if hardware and read_hardware(folder) is None:
        write_hardware(folder, hardware)


def adopt(name, results_dir, found=None, hardware=None):
    """Keep this host's processor beside results made before jaxbench kept one, on the word of
    whoever runs it that this host made them. The model name, cores and memory must still match;
    a name whose processor is kept already is checked, never overwritten."""
    folder = os.path.join(results_dir, name)
    if not os.path.exists(os.path.join(folder, "machine.json")):
        raise MachineMismatch(f"{folder} holds no results (no machine.json): nothing to adopt; "
                              "a new name keeps its processor on its first run")
    found = found or facts()
    hardware = identity() if hardware is None else hardware
    if not hardware:
        raise MachineMismatch("this host has no /proc/cpuinfo: there is no processor identity "
                              "to keep")
    refused = _refusal(name, results_dir, found, hardware)
    if refused is None:
        return
    kind, message = refused
    if kind == "not kept":
        write_hardware(folder, hardware)
    elif kind == "other hardware":
        raise MachineMismatch(f"{folder} was made on other hardware, so it cannot be this "
                              f"host's: {message}")
    else:
        check(name, results_dir, found, hardware)  # refused, with the name to use instead


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
