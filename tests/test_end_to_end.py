"""End to end: real JAX releases in asv-managed virtualenvs, run, compared, bisected, published.

Builds the release-history repository for jax 0.10.0-0.10.2 plus one commit whose jaxlib the
index cannot provide, then drives asv exactly as the README shows. Results and html go to a
temporary folder, never to the committed results/ and html/.
"""

import glob
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from asv_tools import asv, config

from jaxbench_helpers.host import history

pytestmark = pytest.mark.slow

RELEASES = ("0.10.0", "0.10.1", "0.10.2")
SUBSET = ["-b", r"SquareMatmul\.time_run", "-b", "Versions"]


def _commit_unpairable_jax(repo):
    """A commit claiming a jax version no jaxlib on the index can serve."""
    version_py = os.path.join(repo, "jax", "version.py")
    text = open(version_py).read()
    text = text.replace('_version = "0.10.2"', '_version = "99.0.0"')
    text = text.replace("_minimum_jaxlib_version = '0.10.1'", "_minimum_jaxlib_version = '99.0.0'")
    open(version_py, "w").write(text)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["commit", "-qam", "jax 99.0.0 (no jaxlib exists)"], check=True)
    return subprocess.run(git + ["rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture(scope="module")
def suite(tmp_path_factory, sdist_cache):
    """(tmp folder, asv config, [(version, hash)], unpairable hash) after one `asv run`."""
    tmp = tmp_path_factory.mktemp("e2e")
    repo = tmp / "jax-releases"
    releases = history.build(str(repo), first=RELEASES[0], last=RELEASES[-1],
                             sdist_cache=sdist_cache)
    bad = _commit_unpairable_jax(repo)
    conf = config(tmp, repo, profile="quick")
    rc, out = asv(conf, "machine", "--yes", "--machine", "e2e")
    assert rc == 0, out
    # saved, not --dry-run: publish needs results, and these land in the temporary folder;
    # a range (0.10.1, 0.10.2 and the unpairable commit), then a single commit (0.10.0)
    out = ""
    for spec in ("jax-v0.10.0..main", "jax-v0.10.0^!"):
        rc, log = asv(conf, "run", spec, "--quick", "--show-stderr", "--machine", "e2e", *SUBSET)
        out += log
    (tmp / "run.log").write_text(out)
    return tmp, conf, releases, bad, out


def _results(tmp):
    files = glob.glob(os.path.join(tmp, "results", "e2e", "*.json"))
    return {d["commit_hash"]: d for d in map(json.load, map(open, files)) if "commit_hash" in d}


def test_each_release_ran_with_its_own_jaxlib(suite):
    tmp, _, releases, _, out = suite
    results = _results(tmp)
    for version, commit in releases:
        columns = results[commit]["result_columns"]
        row = dict(zip(columns, results[commit]["results"][
            "bench_environment.Versions.track_jaxlib_version"]))
        major, minor, micro = (int(p) for p in version.split("."))
        assert row["result"] == [major * 10000 + minor * 100 + micro], out
        timing = dict(zip(columns, results[commit]["results"][
            "bench_matmul.SquareMatmul.time_run"]))
        assert all(t > 0 for t in timing["result"]), out


def test_commit_without_jaxlib_is_skipped_and_the_run_goes_on(suite):
    tmp, _, releases, bad, out = suite
    assert "no jaxlib on the package index fits jax 99.0.0" in out
    results = _results(tmp)
    # asv records the failed build: every benchmark of that commit without a value
    assert all(row[0] is None for row in results[bad]["results"].values())
    for _, commit in releases:
        assert all(row[0] is not None for row in results[commit]["results"].values())


def test_published_dashboard_holds_every_release(suite):
    tmp, conf, releases, _, _ = suite
    rc, out = asv(conf, "publish")
    assert rc == 0, out
    index = json.load(open(tmp / "html" / "index.json"))
    published = set(index["revision_to_hash"].values())
    assert {c for _, c in releases} <= published
    assert index["tags"]["jax-v0.10.2"] is not None
    graphs = glob.glob(str(tmp / "html" / "graphs" / "**" /
                           "bench_matmul.SquareMatmul.time_run.json"), recursive=True)
    assert graphs
    points = json.load(open(graphs[0]))
    assert len(points) == len(releases)


def test_preview_serves_the_dashboard(suite):
    tmp, conf, _, _, _ = suite
    if not (tmp / "html" / "index.html").exists():
        asv(conf, "publish")
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "asv", "--config", conf, "preview",
                               "--port", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read()
                break
            except OSError:
                assert time.monotonic() < deadline, "asv preview never answered"
                time.sleep(0.5)
        assert b"airspeed velocity" in page.lower() or b"asv" in page.lower()
    finally:
        server.terminate()
        server.wait(timeout=30)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_continuous_compares_two_releases(suite):
    _, conf, releases, _, _ = suite
    (_, base), (_, head) = releases[-2:]
    rc, out = asv(conf, "continuous", "jax-v0.10.1", "jax-v0.10.2", "--quick",
                  "--machine", "e2e", *SUBSET)
    assert rc in (0, 1), out  # 1 only if a benchmark got slower
    assert base[:8] in out and head[:8] in out
    assert "SquareMatmul.time_run" in out or "BENCHMARKS NOT SIGNIFICANTLY CHANGED" in out


def test_find_bisects_a_range(suite):
    _, conf, releases, _, _ = suite
    rc, out = asv(conf, "find", "--skip-save", "--machine", "e2e", "jax-v0.10.0..jax-v0.10.2",
                  "bench_matmul.SquareMatmul.time_run")
    assert rc == 0, out
    assert "Greatest regression found:" in out
