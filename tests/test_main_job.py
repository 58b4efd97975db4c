"""The README's first command, for real: the release history, one release, published."""

import json
import os
import subprocess
import sys

import pytest

from jaxbench_helpers.common import paths
from jaxbench_helpers.host import history

pytestmark = pytest.mark.slow


def test_main_job_benchmarks_the_newest_release_and_publishes(tmp_path):
    results, html = tmp_path / "results", tmp_path / "html"
    proc = subprocess.run(
        [sys.executable, "-m", "jaxbench_helpers", "main", "--profile", "quick",
         "--releases", "1", "-b", "Versions", "--machine", "ci-main",
         "--results-dir", str(results), "--html-dir", str(html)],
        cwd=paths.ROOT, capture_output=True, text=True, timeout=3600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    newest_version, newest = history.release_commits(paths.HISTORY_REPO)[-1]
    assert f"jaxbench: releases {newest_version}" in out
    assert "main job finished in" in out
    files = [f for f in os.listdir(results / "ci-main") if f != "machine.json"]
    assert [json.load(open(results / "ci-main" / f))["commit_hash"] for f in files] == [newest]
    index = json.load(open(html / "index.json"))
    assert newest in index["revision_to_hash"].values()
