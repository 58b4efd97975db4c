"""The machine results go under: its name, and its description in asv's machine file."""

import contextlib
import json
import os
import sys


def machine_name(given=None):
    """``given`` (--machine), else JAXBENCH_MACHINE, else the host name."""
    import platform as host

    return given or os.environ.get("JAXBENCH_MACHINE") or host.node()


def record(name, note="", path="~/.asv-machine.json"):
    """Describe this host under ``name`` in asv's machine file.

    ``asv machine --yes --machine NAME`` keeps only the fields that differ from the detected
    defaults, which leaves results/NAME/machine.json without CPU, cores or memory.
    """
    from asv.machine import Machine

    path = os.path.expanduser(path)
    facts = dict(Machine.get_defaults(), machine=name)
    if note:
        facts["cpu"] = f"{facts['cpu']} ({note})"
    try:
        with open(path) as f:
            machines = json.load(f)
    except FileNotFoundError:
        machines = {"version": 1}
    machines[name] = facts
    with open(path, "w") as f:
        json.dump(machines, f, indent=4)
    print(f"jaxbench: machine {name}: {facts['cpu']}, {facts['num_cpu']} cores, "
          f"{int(facts['ram']) / 2**30:.0f} GiB", flush=True)


def ensure_described(name):
    """Describe ``name`` in asv's machine file unless it is there already (asv would ask)."""
    from asv.machine import MachineCollection

    path = MachineCollection.get_machine_file_path()
    try:
        with open(path) as f:
            known = json.load(f)
    except (OSError, ValueError):
        known = {}
    if name not in known:
        with contextlib.redirect_stdout(sys.stderr):  # standard output carries the report
            record(name, path=path)
