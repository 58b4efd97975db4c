"""One machine name, one machine: a name whose machine.json describes other hardware is refused
before any result is added under it, and the default name comes from the hardware.

The machine.json files here are written by asv itself (``asv machine`` and asv's Machine.save),
one describing this host and one another machine; the committed machine's is read as it is.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from jaxbench_helpers.common import machine, paths

COMMITTED = os.path.join(paths.RESULTS, "cpu-2core-shared-vm", "machine.json")


def asv_machine_json(tmp_path, name, **described):
    """results/NAME/machine.json as asv writes it from its machine file: this host as the main
    job describes it (``machine.record``), or ``asv machine --yes`` with ``described`` (cpu,
    num_cpu, ram) for another machine; then asv's Machine.save."""
    from asv.machine import Machine

    home = tmp_path / f"home-{name}"
    home.mkdir()
    if described:
        args = [a for key, value in described.items() for a in (f"--{key}", str(value))]
        subprocess.run([sys.executable, "-m", "asv", "machine", "--yes", "--machine", name,
                        *args], check=True, capture_output=True,
                       env=dict(os.environ, HOME=str(home)))
    else:
        machine.record(name, path=str(home / ".asv-machine.json"))
    results = tmp_path / "results"
    found = Machine.load(machine_name=name, _path=str(home / ".asv-machine.json"),
                         use_defaults=True)
    found.save(str(results))
    return results, json.load(open(results / name / "machine.json"))


def test_a_machine_json_of_this_host_is_accepted(tmp_path):
    results, recorded = asv_machine_json(tmp_path, "this-host")
    assert recorded["cpu"] == machine.facts()["cpu"]
    machine.check("this-host", str(results))
    # a note appended to the CPU model (--machine-note) still names the same hardware
    recorded["cpu"] += " (shared VM)"
    (results / "this-host" / "machine.json").write_text(json.dumps(recorded))
    machine.check("this-host", str(results))


def test_a_machine_json_of_other_hardware_is_refused_with_a_name_to_use(tmp_path):
    results, _ = asv_machine_json(tmp_path, "other-box", cpu="Some Other CPU 9000",
                                  num_cpu=64, ram=2**40)
    before = (results / "other-box" / "machine.json").read_bytes()
    with pytest.raises(machine.MachineMismatch) as refused:
        machine.check("other-box", str(results))
    message = str(refused.value)
    assert "Some Other CPU 9000, 64 cores, 1024.0 GiB" in message
    assert machine.facts()["cpu"] in message
    assert f"--machine {machine.default_name()}" in message
    assert (results / "other-box" / "machine.json").read_bytes() == before


def test_memory_within_the_tolerance_is_the_same_machine(tmp_path):
    results, recorded = asv_machine_json(tmp_path, "this-host")
    path = results / "this-host" / "machine.json"
    ram = int(recorded["ram"])
    path.write_text(json.dumps(dict(recorded, ram=str(int(ram * 1.01)))))
    machine.check("this-host", str(results))
    path.write_text(json.dumps(dict(recorded, ram=str(int(ram * 1.10)))))
    with pytest.raises(machine.MachineMismatch, match="GiB of memory"):
        machine.check("this-host", str(results))


def test_a_name_without_recorded_hardware_is_refused(tmp_path):
    folder = tmp_path / "results" / "bare"
    folder.mkdir(parents=True)
    (folder / "machine.json").write_text(json.dumps({"machine": "bare", "version": 1}))
    with pytest.raises(machine.MachineMismatch, match="records no CPU model"):
        machine.check("bare", str(tmp_path / "results"))
    (folder / "machine.json").write_text("{not json")
    with pytest.raises(machine.MachineMismatch, match="cannot read .*machine.json"):
        machine.check("bare", str(tmp_path / "results"))


def test_the_committed_machine_is_judged_by_its_hardware():
    recorded = json.load(open(COMMITTED))
    found = machine.facts()
    same = not machine.differences(recorded, found)
    assert same == (recorded["cpu"].startswith(found["cpu"])
                    and recorded["num_cpu"] == found["num_cpu"]
                    and abs(int(recorded["ram"]) - int(found["ram"])) <= 0.03 * int(found["ram"]))
    if same:
        machine.check("cpu-2core-shared-vm", paths.RESULTS)
    else:
        with pytest.raises(machine.MachineMismatch, match="Intel"):
            machine.check("cpu-2core-shared-vm", paths.RESULTS)


@pytest.mark.parametrize("cpu, words", [
    ("AMD EPYC", "amd-epyc"),
    ("Intel(R) Xeon(R) Processor", "intel-xeon"),
    ("Intel(R) Xeon(R) CPU E5-2686 v4 @ 2.30GHz", "intel-xeon-e5-2686-v4"),
    ("AMD EPYC 7B13 64-Core Processor", "amd-epyc-7b13-64-core"),
    ("", "unknown-cpu"),
])
def test_default_name_is_made_from_the_hardware(cpu, words):
    found = {"cpu": cpu, "num_cpu": "2", "ram": str(25276059648)}
    assert machine.default_name(found) == f"cpu-2core-{words}-24gb"


def test_default_name_of_this_host(monkeypatch):
    monkeypatch.delenv("JAXBENCH_MACHINE", raising=False)
    found = machine.facts()
    name = machine.machine_name()
    assert name == machine.default_name(found)
    assert re.fullmatch(rf"cpu-{found['num_cpu']}core-[a-z0-9-]+-\d+gb", name)
    monkeypatch.setenv("JAXBENCH_MACHINE", "named-box")
    assert machine.machine_name() == "named-box" and machine.machine_name("given") == "given"


def test_main_job_refuses_another_machines_name_before_running_anything(tmp_path):
    results, _ = asv_machine_json(tmp_path, "other-box", cpu="Some Other CPU 9000",
                                  num_cpu=64, ram=2**40)
    before = sorted(os.listdir(results / "other-box"))
    proc = subprocess.run(
        [sys.executable, "-m", "jaxbench_helpers", "main", "--machine", "other-box",
         "--results-dir", str(results), "--html-dir", str(tmp_path / "html"), "-b", "Versions"],
        cwd=paths.ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "jaxbench main: " in proc.stderr and "describes another machine" in proc.stderr
    assert f"--machine {machine.default_name()}" in proc.stderr
    assert "asv" not in proc.stdout  # nothing ran
    assert sorted(os.listdir(results / "other-box")) == before
    assert not (tmp_path / "html").exists()


def test_describing_a_name_refuses_another_machines_name(tmp_path):
    """calibrate and sensitivity describe their machine through ensure_described, and their
    reports carry its name: a name whose machine.json describes other hardware is refused."""
    results, _ = asv_machine_json(tmp_path, "other-box", cpu="Some Other CPU 9000",
                                  num_cpu=64, ram=2**40)
    with pytest.raises(machine.MachineMismatch, match="describes another machine"):
        machine.ensure_described("other-box", str(results))
