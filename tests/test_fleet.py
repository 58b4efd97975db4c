"""Many machines, one dashboard: the committed results of one machine plus a real run on a
second machine name, merged in one results folder and published together.

The second machine is this host under another name (``cpu-box-b``, its own machine.json with
this host's real facts): it runs one release it shares with the committed machine, as a box
of the fleet runs the releases listed in a hash file, and only the Versions benchmark, at the
regular profile (the committed history is quick).
"""

import json
import os
import re
import shutil

import dashboard_tools as dt
import pytest
from asv_tools import asv, config

from jaxbench_helpers.common import machine
from jaxbench_helpers.host import history, mainjob, publish

pytestmark = pytest.mark.slow

SECOND_MACHINE = "cpu-box-b"
BENCHMARK = "bench_environment.Versions.track_jax_version"


def _machines(results_dir):
    return sorted(e.name for e in os.scandir(results_dir) if e.is_dir())


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """(tmp folder, the committed machine names, the release both machines ran)."""
    tmp = tmp_path_factory.mktemp("fleet")
    repo = tmp / "jax-releases"
    releases = history.build(str(repo), first=mainjob.FIRST_RELEASE,
                             sdist_cache=history.default_cache())
    shutil.copytree(os.path.join(dt.ROOT, "results"), tmp / "results")
    first_machines = _machines(tmp / "results")
    assert first_machines and SECOND_MACHINE not in first_machines
    # the newest release the committed results measured: the two machines share a point
    measured = {json.load(open(os.path.join(tmp / "results", m, f)))["commit_hash"]
                for m in first_machines for f in os.listdir(tmp / "results" / m)
                if f.endswith(".json") and f != "machine.json"}  # not the .jsonl records
    version, commit = [(v, c) for v, c in releases if c in measured][-1]

    conf = config(tmp, repo, profile="regular")
    machine.record(SECOND_MACHINE)
    hashfile = tmp / "to-run.txt"
    hashfile.write_text(commit + "\n")
    rc, out = asv(conf, "run", f"HASHFILE:{hashfile}", "--machine", SECOND_MACHINE,
                  "--bench", "Versions", "--show-stderr")
    (tmp / "run.log").write_text(out)
    assert rc == 0, out
    assert publish.publish(conf) == 0
    return tmp, first_machines, version, commit


def test_each_machine_keeps_its_own_results_folder_and_description(fleet):
    tmp, first_machines, _, commit = fleet
    assert _machines(tmp / "results") == sorted([*first_machines, SECOND_MACHINE])
    described = json.load(open(tmp / "results" / SECOND_MACHINE / "machine.json"))
    assert described["machine"] == SECOND_MACHINE
    assert described["num_cpu"] and described["cpu"] and described["ram"]
    runs = [json.load(open(tmp / "results" / SECOND_MACHINE / f))
            for f in os.listdir(tmp / "results" / SECOND_MACHINE) if f != "machine.json"]
    assert [r["commit_hash"] for r in runs] == [commit]


def test_published_index_offers_every_machine(fleet):
    tmp, first_machines, _, _ = fleet
    index = dt.load_index(tmp / "html")
    expected = sorted([*first_machines, SECOND_MACHINE])
    assert sorted(index["params"]["machine"]) == expected
    assert sorted(index["machines"]) == expected
    for name in expected:
        described = json.load(open(tmp / "results" / name / "machine.json"))
        assert index["machines"][name]["cpu"] == described["cpu"]


def test_second_machine_graph_holds_the_version_it_ran(fleet):
    tmp, _, version, commit = fleet
    index = dt.load_index(tmp / "html")
    revision = {h: int(r) for r, h in index["revision_to_hash"].items()}[commit]
    files = [f for f in dt.graph_files(tmp / "html", BENCHMARK)
             if f"machine-{SECOND_MACHINE}" + os.sep in f]
    assert len(files) == 1
    points = dict((r, v) for r, v in json.load(open(files[0])))
    major, minor, micro = (int(p) for p in version.split(".")[:3])
    assert points[revision] == major * 10000 + minor * 100 + micro


def _profile_of(graph_file):
    return re.search(r"env-JAXBENCH_PROFILE-(\w+)", graph_file).group(1)


def test_dashboard_filters_and_plots_both_machines(fleet):
    """The committed history is quick, the second machine ran regular: a graph opens on one
    profile (regular), and asked for both it plots every machine's line."""
    tmp, first_machines, _, _ = fleet
    html_dir = tmp / "html"
    files = dt.graph_files(html_dir, BENCHMARK)
    machines = sorted([*first_machines, SECOND_MACHINE])
    assert sorted({m for f in files for m in machines if f"machine-{m}" + os.sep in f}) == machines
    assert sorted(dt.load_index(html_dir)["params"]["env-JAXBENCH_PROFILE"]) == [
        "quick", "regular"]
    expected = [s for f in files for s in dt.measured_series(f)]
    regular = [s for f in files if _profile_of(f) == "regular" for s in dt.measured_series(f)]
    assert regular and len(regular) < len(expected)
    with dt.chromium() as browser, dt.dashboard(browser, html_dir) as dashboard:
        # from the summary grid, as a reader comes
        page = dashboard.open()
        page.click(f"a.benchmark-container[href='#{BENCHMARK}']")
        page.wait_for_function("() => location.hash.includes('JAXBENCH_PROFILE')")
        assert page.evaluate("() => location.hash") == (
            f"#{BENCHMARK}?env-JAXBENCH_PROFILE=regular")
        plotted = dt.plotted_series(page, len(regular))
        dashboard.screenshot("fleet-one-profile.png")
        assert sorted(plotted) == sorted(regular)
        assert dt.selector_values(page, "env-JAXBENCH_PROFILE") == ["quick", "regular"]
        # a link straight to the graph, the first page a reader opens
        page = dashboard.open(BENCHMARK)
        assert page.evaluate("() => location.hash") == (
            f"#{BENCHMARK}?env-JAXBENCH_PROFILE=regular")
        assert sorted(dt.plotted_series(page, len(regular))) == sorted(regular)

        page = dashboard.open(f"{BENCHMARK}?env-JAXBENCH_PROFILE=quick"
                              "&env-JAXBENCH_PROFILE=regular")
        plotted = dt.plotted_series(page, len(expected))
        dashboard.screenshot("fleet-machines.png")
        assert sorted(dt.selector_values(page, "machine")) == machines
        # every machine's line (one per machine and environment), with its releases
        assert sorted(plotted) == sorted(expected)
        assert dashboard.errors == [] and dashboard.outside == []
