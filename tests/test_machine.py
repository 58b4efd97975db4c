"""One machine name, one machine: a name whose machine.json describes other hardware, or whose
hardware.txt names another processor, is refused before any result is added under it, and the
default name comes from the hardware.

The machine.json files here are written by asv itself (``asv machine`` and asv's Machine.save),
one describing this host and one another machine; the committed machine's is read as it is.
This host's processor is read from its own /proc/cpuinfo; other processors' from cpuinfo text
as those processors' kernels write it.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from jaxbench_helpers.common import machine, paths

COMMITTED = os.path.join(paths.RESULTS, "cpu-2core-shared-vm", "machine.json")


def asv_machine_json(tmp_path, name, keep=True, **described):
    """results/NAME/machine.json as asv writes it from its machine file: this host as the main
    job describes it (``machine.record``, and its processor in hardware.txt unless not
    ``keep``), or ``asv machine --yes`` with ``described`` (cpu, num_cpu, ram) for another
    machine; then asv's Machine.save."""
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
    if not described and keep:
        machine.keep_hardware(name, str(results))  # as the main job does before its first run
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
    """Its results predate hardware.txt: other hardware is refused by machine.json, a host of
    the same description is asked to adopt it, since another processor can say the same."""
    recorded = json.load(open(COMMITTED))
    found = machine.facts()
    same = not machine.differences(recorded, found)
    assert same == (recorded["cpu"].startswith(found["cpu"])
                    and recorded["num_cpu"] == found["num_cpu"]
                    and abs(int(recorded["ram"]) - int(found["ram"])) <= 0.03 * int(found["ram"]))
    assert machine.read_hardware(os.path.dirname(COMMITTED)) is None
    with pytest.raises(machine.MachineMismatch,
                       match="made before jaxbench kept" if same else "Intel"):
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


def test_a_report_names_this_host_not_the_machine_under_its_default_name(tmp_path, monkeypatch):
    """noisefloor and burstprobe add no results, but their heading names the host: where the
    default name's folder holds another machine's figures, the name the refusal suggests."""
    monkeypatch.delenv("JAXBENCH_MACHINE", raising=False)
    default = machine.default_name()
    assert machine.report_name(results_dir=str(tmp_path)) == default
    results, _ = asv_machine_json(tmp_path, default, cpu="Some Other CPU 9000", num_cpu=64,
                                  ram=2**40)
    named = machine.report_name(results_dir=str(results))
    assert named != default
    with pytest.raises(machine.MachineMismatch, match=f"pass --machine {re.escape(named)} "):
        machine.check(default, str(results))
    assert machine.report_name("given", str(results)) == "given"
    monkeypatch.setenv("JAXBENCH_MACHINE", "named-box")
    assert machine.report_name(results_dir=str(results)) == "named-box"


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


# the first processor of /proc/cpuinfo as other processors' kernels write it (fields cut short)
XEON_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 85
model name\t: Intel(R) Xeon(R) Processor
stepping\t: 7
cache size\t: 16384 KB
flags\t\t: fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi1 bmi2 avx512f avx512bw \
hypervisor md_clear

processor\t: 1
vendor_id\t: GenuineIntel
"""
GRAVITON_CPUINFO = """processor\t: 0
BogoMIPS\t: 243.75
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid sve
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x1
CPU part\t: 0xd40
CPU revision\t: 1
"""


def test_identity_of_other_processors_from_their_cpuinfo(tmp_path):
    xeon, graviton = tmp_path / "xeon", tmp_path / "graviton"
    xeon.write_text(XEON_CPUINFO)
    graviton.write_text(GRAVITON_CPUINFO)
    assert machine.identity(str(xeon)) == {
        "vendor": "GenuineIntel", "family": "6", "model": "85", "stepping": "7",
        "cache": "16384 KB",
        "isa": "avx avx2 avx512bw avx512f bmi1 bmi2 f16c fma sse sse2 sse4_1 sse4_2 ssse3"}
    assert machine.identity(str(graviton)) == {
        "implementer": "0x41", "architecture": "8", "variant": "0x1", "part": "0xd40",
        "revision": "1", "isa": "asimd asimdhp sve"}
    assert machine.identity(str(tmp_path / "absent")) == {}


def test_identity_of_this_host_agrees_with_lscpu():
    here = machine.identity()
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    fields = dict(line.split(":", 1) for line in lscpu.splitlines() if ":" in line)
    fields = {key.strip(): value.strip() for key, value in fields.items()}
    if "vendor" in here:  # x86
        assert here["vendor"] == fields["Vendor ID"]
        assert here["family"] == fields["CPU family"] and here["model"] == fields["Model"]
        assert here["stepping"] == fields["Stepping"]
    assert set(here["isa"].split()) <= set(fields["Flags"].split())
    assert here["isa"] and "hypervisor" not in here["isa"]


def test_a_processor_other_than_the_kept_one_is_refused_under_the_same_model_name(tmp_path):
    results, _ = asv_machine_json(tmp_path, "this-host")
    here = machine.identity()
    assert machine.read_hardware(str(results / "this-host")) == here
    machine.check("this-host", str(results))
    # a family this host does not have (a family-23 host read the same family back)
    family = "25" if here["family"] == "23" else "23"
    other = dict(here, family=family, model="49", isa="avx avx2 fma")
    with pytest.raises(machine.MachineMismatch) as refused:
        machine.check("this-host", str(results), hardware=other)
    message = str(refused.value)
    assert "names another processor" in message
    assert f"family {here['family']!r}, here {family!r}" in message
    assert f"--machine {machine.default_name()}" in message
    # where the model name gives the default name already, the suggestion carries the family
    with pytest.raises(machine.MachineMismatch) as refused:
        machine.check(machine.default_name(), str(_copy_as(results, "this-host",
                                                           machine.default_name())),
                      hardware=other)
    assert "--machine " + machine.distinct_name(hardware=other) in str(refused.value)
    assert f"-f{family}m49-" in machine.distinct_name(hardware=other)


def _copy_as(results, name, new):
    import shutil

    shutil.copytree(results / name, results / new)
    recorded = json.loads((results / new / "machine.json").read_text())
    (results / new / "machine.json").write_text(json.dumps(dict(recorded, machine=new)))
    return results


def test_results_made_before_the_processor_was_kept_are_refused_until_adopted(tmp_path):
    results, _ = asv_machine_json(tmp_path, "old-box", keep=False)
    with pytest.raises(machine.MachineMismatch) as refused:
        machine.check("old-box", str(results))
    message = str(refused.value)
    assert "made before jaxbench kept the processor's identity" in message
    command = f"python3 -m jaxbench_helpers machine --adopt old-box --results-dir {results}"
    assert command in message
    before = (results / "old-box" / "machine.json").read_bytes()
    proc = subprocess.run([sys.executable, *command.split()[1:]], cwd=paths.ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "is this host's" in proc.stdout
    assert machine.read_hardware(str(results / "old-box")) == machine.identity()
    assert (results / "old-box" / "machine.json").read_bytes() == before
    machine.check("old-box", str(results))
    # the listing says which names this host may add to
    proc = subprocess.run([sys.executable, "-m", "jaxbench_helpers", "machine",
                           "--results-dir", str(results)], cwd=paths.ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "old-box: this host" in proc.stdout, proc.stderr
    # and on the project's own results/, whose folder holds reports beside the machines' folders
    proc = subprocess.run([sys.executable, "-m", "jaxbench_helpers", "machine"], cwd=paths.ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    # its machines predate hardware.txt: none is this host's until adopted
    assert "cpu-2core-shared-vm: not from this host" in proc.stdout
    assert f"default name: {machine.machine_name()}" in proc.stdout


def test_adopting_is_refused_for_other_hardware_and_never_overwrites(tmp_path):
    results, _ = asv_machine_json(tmp_path, "other-box", cpu="Some Other CPU 9000",
                                  num_cpu=64, ram=2**40)
    with pytest.raises(machine.MachineMismatch, match="made on other hardware"):
        machine.adopt("other-box", str(results))
    assert machine.read_hardware(str(results / "other-box")) is None
    with pytest.raises(machine.MachineMismatch, match="nothing to adopt"):
        machine.adopt("no-such-box", str(results))
    (tmp_path / "kept").mkdir()
    results, _ = asv_machine_json(tmp_path / "kept", "this-host")
    kept = dict(machine.identity(), stepping="99")
    machine.write_hardware(str(results / "this-host"), kept)
    with pytest.raises(machine.MachineMismatch, match="names another processor"):
        machine.adopt("this-host", str(results))
    assert machine.read_hardware(str(results / "this-host")) == kept


def test_verify_refuses_to_record_verdicts_under_another_machines_name(tmp_path, capsys):
    from jaxbench_helpers.selftest import verify

    results, _ = asv_machine_json(tmp_path, "other-box", cpu="Some Other CPU 9000",
                                  num_cpu=64, ram=2**40)
    before = sorted(os.listdir(results / "other-box"))
    rc = verify.main(["--results-dir", str(results), "--machine", "other-box",
                      "--work-dir", str(tmp_path / "work")])
    assert rc == 1
    assert "describes another machine" in capsys.readouterr().err
    assert sorted(os.listdir(results / "other-box")) == before


def test_the_name_suggested_is_one_this_host_may_use(tmp_path):
    """Refused under another machine's name, this host is not sent to its default name where
    that name is itself refused (results made before hardware.txt, say)."""
    results, _ = asv_machine_json(tmp_path, machine.default_name(), keep=False)
    (tmp_path / "other").mkdir()
    other, _ = asv_machine_json(tmp_path / "other", "other-box", cpu="Some Other CPU 9000",
                                num_cpu=64, ram=2**40)
    os.rename(other / "other-box", results / "other-box")
    with pytest.raises(machine.MachineMismatch) as refused:
        machine.check("other-box", str(results))
    suggested = re.search(r"--machine (\S+)", str(refused.value)).group(1)
    assert suggested == machine.distinct_name()
    assert suggested != machine.default_name()
    machine.check(suggested, str(results))  # a new name: nothing there to refuse it
