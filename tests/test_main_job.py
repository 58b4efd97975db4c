"""The README's first command, for real: the release history, the newest release on the Python
chosen for it, published, and the command it ends with shows the dashboard."""

import json
import os
import re
import shlex
import subprocess
import sys
import urllib.request

import pytest

from jaxbench_helpers.common import machine, paths, quiet
from jaxbench_helpers.host import dashboard, history

pytestmark = pytest.mark.slow


def test_main_job_benchmarks_the_newest_release_and_publishes(tmp_path):
    results, html = tmp_path / "results", tmp_path / "html"
    proc = subprocess.run(
        [sys.executable, "-m", "jaxbench_helpers", "main", "--profile", "quick",
         "--releases", "1", "-b", "Versions", "--machine", "ci-main", "--allow-busy",
         "--results-dir", str(results), "--html-dir", str(html)],
        cwd=paths.ROOT, capture_output=True, text=True, timeout=3600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    newest_version, newest = history.release_commits(paths.HISTORY_REPO)[-1]
    python = dict(history.python_plan())[newest_version][-1]
    assert f"jaxbench: releases {newest_version} (Python {python}: 1)" in out
    assert "main job finished in" in out
    files = [f for f in os.listdir(results / "ci-main")
             if f.endswith(".json") and f != "machine.json"]
    # how busy the machine was, beside the results, in a file asv does not read as one
    (record,) = quiet.read_records(str(results / "ci-main" / quiet.RECORD_NAME))
    assert record.command == "main" and record.allowed_busy in (True, False)
    assert "jaxbench: machine during 'main':" in out
    # the processor that made them, kept beside them (again, not where asv reads results)
    assert machine.read_hardware(str(results / "ci-main")) == machine.identity()
    runs = [json.load(open(results / "ci-main" / f)) for f in files]
    assert [r["commit_hash"] for r in runs] == [newest]
    assert [r["python"] for r in runs] == [python]
    index = json.load(open(html / "index.json"))
    assert newest in index["revision_to_hash"].values()
    assert dashboard.external_addresses((html / "index.html").read_text()) == []

    # the last line names a command that shows the dashboard: run it (on a free port)
    command = re.search(r"to see the dashboard: (.+)$", out, re.M).group(1)
    argv = shlex.split(command)
    assert argv[:4] == ["python3", "-m", "jaxbench_helpers", "serve"]
    server = subprocess.Popen([sys.executable, *argv[1:], "--port", "0"], cwd=paths.ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        url = re.search(r"at (http://\S+/)", line).group(1)
        assert json.loads(urllib.request.urlopen(url + "index.json", timeout=30).read()) == index
        page = urllib.request.urlopen(url, timeout=30).read().decode()
        assert "jaxbench.js" in page and "vendor/jquery@3.3.1/dist/jquery.min.js" in page
    finally:
        server.terminate()
        server.wait(timeout=30)
