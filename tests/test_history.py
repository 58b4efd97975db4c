"""The release-history repository, built from real PyPI sdists with real git (about a minute;
the whole history from 0.4.20, in a slow test, a few more)."""

import glob
import json
import os
import subprocess
import sys
import tarfile

import pytest

from jaxbench_helpers.common import paths
from jaxbench_helpers.host import history
from jaxbench_helpers.runtime import versions

FIRST, LAST = "0.10.1", "0.10.2"
UPSTREAM_0_10_2 = "990e6a0b84138346e6a38785412f36356e0e5dc3"
# sdists on PyPI never change, so neither may these: a change here breaks every existing
# history repository's incremental builds (and asv results keyed by commit)
EXPECTED = [
    ("0.10.1", "cc9fbf98ab4fecc63a86d18075da58b8ac243f48"),
    ("0.10.2", "58862b97894d732861fc76790c9a0ac5132b2de8"),
]


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture(scope="session")
def built(tmp_path_factory, sdist_cache):
    """A from-scratch build of FIRST..LAST: (repo, [(version, hash)])."""
    repo = tmp_path_factory.mktemp("history") / "jax"
    return repo, history.build(repo, first=FIRST, last=LAST, sdist_cache=sdist_cache)


def hostile_git_config(home):
    """A user config that would change commit hashes (or fail commits) if it leaked in."""
    home.mkdir()
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Someone Else\n\temail = else@example.com\n"
        "[commit]\n\tgpgsign = true\n[core]\n\tautocrlf = true\n\tfileMode = false\n"
        "[init]\n\tdefaultBranch = trunk\n"
    )
    return home


def test_tags_and_commits(built):
    repo, commits = built
    assert commits == EXPECTED
    assert history.release_commits(repo) == commits
    for version, commit in commits:
        assert git(repo, "rev-parse", f"jax-v{version}^{{commit}}") == commit
    assert git(repo, "rev-parse", "main") == commits[-1][1]
    assert git(repo, "rev-list", "--first-parent", "main").split() == [c for _, c in commits][::-1]
    assert git(repo, "status", "--porcelain") == ""


def test_commit_metadata(built, sdist_cache):
    repo, commits = built
    version, commit = commits[-1]
    message = git(repo, "log", "-1", "--format=%B", commit)
    assert message == (f"jax {version}\n\nRelease {version}, rebuilt from its PyPI sdist.\n"
                       f"Upstream commit: {UPSTREAM_0_10_2}")
    with tarfile.open(os.path.join(sdist_cache, f"jax-{version}.tar.gz")) as tar:
        mtime = int(tar.getmember(f"jax-{version}/PKG-INFO").mtime)
    fields = git(repo, "log", "-1", "--format=%an|%ae|%at|%ai|%cn|%ce|%ct|%ci", commit).split("|")
    assert fields[0:2] == fields[4:6] == ["jaxbench", "jaxbench@localhost"]
    assert fields[2] == fields[6] == str(mtime)
    assert fields[3].endswith("+0000") and fields[7].endswith("+0000")


def test_tree_is_the_sdist(built, sdist_cache):
    repo, commits = built
    version, commit = commits[-1]
    files = set(git(repo, "ls-tree", "-r", "--name-only", commit).splitlines())
    assert {"setup.py", "jax/version.py", "PKG-INFO"} <= files
    with tarfile.open(os.path.join(sdist_cache, f"jax-{version}.tar.gz")) as tar:
        in_sdist = {m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile()}
    assert files == in_sdist


def test_same_hashes_in_another_place_and_config(built, sdist_cache, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(hostile_git_config(tmp_path / "home")))
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Someone Else")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "@0 +0100")
    monkeypatch.chdir(tmp_path)
    again = history.build(tmp_path / "elsewhere" / "jax", first=FIRST, last=LAST,
                          sdist_cache=sdist_cache)
    assert again == built[1]


def test_incremental_build_matches_from_scratch(built, sdist_cache, tmp_path):
    repo = tmp_path / "jax"
    partial = history.build(repo, first=FIRST, last=FIRST, sdist_cache=sdist_cache)
    assert partial == built[1][:1]
    assert history.build(repo, first=FIRST, last=LAST, sdist_cache=sdist_cache) == built[1]
    # a rerun changes nothing, and asking for less leaves the newer release in place
    assert history.build(repo, first=FIRST, last=LAST, sdist_cache=sdist_cache) == built[1]
    assert history.build(repo, first=FIRST, last=FIRST, sdist_cache=sdist_cache) == built[1][:1]
    assert history.release_commits(repo) == built[1]


def test_divergent_first_fails_clearly(built, sdist_cache, capsys):
    repo, commits = built
    with pytest.raises(history.HistoryError, match=rf"{repo} starts at jax {FIRST}.*delete it"):
        history.build(repo, first=LAST, last=LAST, sdist_cache=sdist_cache)
    rc = history.main(["--dest", str(repo), "--first", LAST, "--last", LAST,
                       "--sdist-cache", sdist_cache])
    assert rc == 1
    assert f"--first {FIRST}" in capsys.readouterr().err
    assert history.release_commits(repo) == commits


def test_refuses_a_folder_it_did_not_make(tmp_path):
    (tmp_path / "notes.txt").write_text("mine\n")
    with pytest.raises(history.HistoryError, match="not a git repository"):
        history.build(tmp_path, first=FIRST, last=LAST)
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


def test_unknown_release_fails_clearly(tmp_path, sdist_cache):
    with pytest.raises(history.HistoryError, match="--last 0.4.32.*not a final, unyanked release"):
        history.build(tmp_path / "jax", first=FIRST, last="0.4.32", sdist_cache=sdist_cache)


def test_tip_builds_a_wheel(built, tmp_path):
    repo, _ = built
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                    str(tmp_path / "wheels"), str(clone)], check=True)
    assert glob.glob(str(tmp_path / "wheels" / f"jax-{LAST}-*.whl"))


@pytest.mark.parametrize("spec, python, ok", [
    (">=3.11", "3.11", True), (">=3.12", "3.11", False), (">=3.9,<3.13", "3.13", False),
    ("!=3.10.*", "3.10", False), ("~=3.10", "3.12", True), ("", "3.11", True),
])
def test_requires_python(spec, python, ok, monkeypatch):
    assert versions.admits(spec, python) is ok
    monkeypatch.setitem(sys.modules, "packaging.specifiers", None)  # the fallback agrees
    assert versions.admits(spec, python) is ok


def test_version_order_without_packaging(monkeypatch):
    monkeypatch.setitem(sys.modules, "packaging.version", None)
    found = ["0.10.0", "0.9.0.1", "0.4.20", "0.9.0", "0.4.9"]
    assert sorted(found, key=versions.version_key) == [
        "0.4.9", "0.4.20", "0.9.0", "0.9.0.1", "0.10.0"]
    assert versions.is_final("0.9.0.1") and not versions.is_final("0.5.0rc1")


def test_upstream_hash_forms():
    assert history._git_hash("_git_hash: str = 'abc123'\n", "0.10.2") == "abc123"
    assert history._git_hash('_git_hash = "def456"\n', "0.10.2") == "def456"
    # old sdists record no commit: the upstream tag table supplies it
    assert history._git_hash("_version = '0.4.20'\n", "0.4.20") == (
        "e22b8bbc0ae3dffd538d2751a8dd0bbb6a00f240")
    assert history._git_hash("_version = '9.9.9'\n", "9.9.9") == "unknown"


def test_upstream_table_agrees_with_sdists_that_record_their_commit():
    assert history.upstream_commit("0.10.2") == UPSTREAM_0_10_2


def test_the_history_grows_past_what_python_3_11_admits(built, sdist_cache, tmp_path):
    """jax 0.11+ needs Python 3.12: the releases are chosen by the Python they are benchmarked
    on, not the one running this, and extending the history keeps the older hashes."""
    repo = tmp_path / "jax"
    assert history.build(repo, first=FIRST, last=LAST, sdist_cache=sdist_cache) == built[1]
    grown = history.build(repo, first=FIRST, last="0.11.0", sdist_cache=sdist_cache)
    assert grown[:2] == EXPECTED
    assert [v for v, _ in grown] == ["0.10.1", "0.10.2", "0.11.0"]
    info = history.read_sdist(history.sdist_path(sdist_cache, "0.11.0"), "0.11.0")
    assert not versions.admits(info.requires_python, "3.11")
    # asked for 3.11 alone, the same release is refused, saying why
    with pytest.raises(history.HistoryError, match=r"jax 0\.11\.0 needs Python >=3\.1[2-9]"):
        history.build(tmp_path / "other", first="0.11.0", last="0.11.0", python_version="3.11",
                      sdist_cache=sdist_cache)


@pytest.mark.slow
def test_the_whole_history_keeps_the_hashes_the_committed_results_were_measured_at(tmp_path):
    """Releases already in the history keep their commits as it grows to the newest release:
    every committed result's commit is the release its Versions benchmark says it ran."""
    commits = dict((c, v) for v, c in history.build(tmp_path / "jax",
                                                    sdist_cache=history.default_cache()))
    assert "0.12.0.1" in commits.values()
    measured = 0
    for path in glob.glob(os.path.join(paths.RESULTS, "*", "*.json")):
        data = json.load(open(path))
        if "commit_hash" not in data:
            continue
        row = dict(zip(data["result_columns"],
                       data["results"]["bench_environment.Versions.track_jax_version"]))
        assert data["commit_hash"] in commits, path
        assert versions.encoded(commits[data["commit_hash"]]) == row["result"][0], path
        measured += 1
    assert measured >= 13
