"""JAX's release history as a local git repository, rebuilt from the jax sdists on PyPI.

One commit per release on ``main``, oldest first, each tagged ``jax-vVERSION``, so asv can
benchmark release after release without reaching GitHub. The build is deterministic: the
same releases give the same commit hashes on any machine, and a rerun only appends releases
that are new since the last one.

Which releases it holds: those whose sdist's Requires-Python admits the Python each is
benchmarked on (``pythons.plan``), or ``--python-version`` where given.

    python -m jaxbench_helpers history --dest PATH [--first 0.4.20] [--last X]
        [--python-version 3.12] [--sdist-cache DIR]
"""

import argparse
import atexit
import email.parser
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass

from ..common import git
from ..runtime import user_cache
from ..runtime.versions import VersionError, admits, is_final, version_key
from . import pythons

FIRST = "0.4.20"
IDENTITY = ("jaxbench", "jaxbench@localhost")
TAG_PREFIX = "jax-v"
# in .git, so it touches no hash: lets a build interrupted before its first commit resume
MARKER = "jaxbench-history"
# on every git call, overriding whatever a repository's own config says
GIT_OPTIONS = (
    "commit.gpgsign=false",
    "core.autocrlf=false",
    "core.fileMode=true",
    "core.symlinks=true",
    "init.defaultBranch=main",
)


class HistoryError(RuntimeError):
    pass


def log(message):
    print(f"jaxbench history: {message}", flush=True)


# ---------------------------------------------------------------- PyPI


def _pip(*args):
    cmd = [sys.executable, "-m", "pip", *args, "--disable-pip-version-check", "--no-input"]
    return subprocess.run(cmd, capture_output=True, text=True)


def _tail(result, lines=15):
    return "\n".join((result.stdout + result.stderr).strip().splitlines()[-lines:])


@functools.cache
def available_versions():
    """jax's final releases on the package index, oldest first (pip leaves out yanked ones)."""
    # Requires-Python is judged later from each sdist, against the chosen Python, not this one
    try:
        versions = pythons.index_versions("jax", "--ignore-requires-python")
    except pythons.PythonError as err:
        raise HistoryError(str(err)) from None
    if not versions:
        raise HistoryError("'pip index versions jax' lists nothing; is the package index "
                           "reachable?")
    return sorted((v for v in versions if is_final(v)), key=version_key)


def default_cache():
    return user_cache.folder("sdists")


def sdist_path(cache, version):
    return os.path.join(cache, f"jax-{version}.tar.gz")


def fetch_sdist(version, cache):
    """The path of jax's sdist for ``version``, downloaded once into ``cache``; None if PyPI
    has no sdist for it."""
    path = sdist_path(cache, version)
    if os.path.exists(path):
        return path
    os.makedirs(cache, exist_ok=True)
    log(f"downloading the jax {version} sdist")
    # a private folder, moved into place whole, so an interrupted download leaves nothing
    with tempfile.TemporaryDirectory(dir=cache, prefix=".download-") as tmp:
        result = _pip("download", "--no-deps", "--no-binary", ":all:", "--ignore-requires-python",
                      f"jax=={version}", "-d", tmp)
        output = result.stdout + result.stderr
        if result.returncode:
            # "(from versions: none)" means the index answered nothing at all: a network fault
            if "No matching distribution" in output and "(from versions: none)" not in output:
                return None
            raise HistoryError(f"pip could not download the jax {version} sdist; is the package "
                               f"index reachable?\n{_tail(result)}")
        got = os.path.join(tmp, os.path.basename(path))
        if not os.path.exists(got):
            raise HistoryError(f"pip download saved {os.listdir(tmp)}, not {os.path.basename(got)}")
        os.replace(got, path)
    return path


# ---------------------------------------------------------------- sdists


@dataclass(frozen=True)
class Sdist:
    """What a release's sdist says about itself."""

    version: str
    date: int  # mtime of PKG-INFO: when the sdist was made
    requires_python: str
    git_hash: str  # the upstream commit, or "unknown" for releases that do not record it
    minimum_jaxlib: str = ""  # jax/version.py's _minimum_jaxlib_version


def _members(tar, version):
    """(path inside the release, member) for each member, the top-level jax-V/ stripped."""
    prefix = f"jax-{version}/"
    for member in tar.getmembers():
        name = member.name[2:] if member.name.startswith("./") else member.name
        if name.rstrip("/") == prefix.rstrip("/"):
            continue
        if not name.startswith(prefix):
            raise HistoryError(f"jax {version} sdist: {member.name} lies outside {prefix}")
        yield name[len(prefix):], member


# jax-vX.Y.Z tag -> commit in the upstream repository, for sdists older than 0.5, which do
# not record the commit they were built from
UPSTREAM_RELEASES = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                 "upstream_releases.json")


def upstream_commit(version):
    with open(UPSTREAM_RELEASES) as f:
        return json.load(f).get(version)


def _minimum_jaxlib(version_py):
    match = re.search(r"^_minimum_jaxlib_version\s*(?::\s*str)?\s*=\s*['\"]([^'\"]+)['\"]",
                      version_py, re.M)
    return match.group(1) if match else ""


def _git_hash(version_py, version):
    match = re.search(r"^_git_hash\s*(?::\s*str)?\s*=\s*['\"]([0-9a-fA-F]+)['\"]", version_py,
                      re.M)
    if match:
        return match.group(1)
    return upstream_commit(version) or "unknown"


@functools.cache
def read_sdist(path, version):
    """Date, Requires-Python and upstream commit of the sdist at ``path``."""
    try:
        with tarfile.open(path) as tar:
            members = dict(_members(tar, version))
            if "PKG-INFO" not in members:
                raise HistoryError(f"{path} has no PKG-INFO; it is not a jax sdist")
            pkg_info = tar.extractfile(members["PKG-INFO"]).read().decode("utf-8", "replace")
            version_py = members.get("jax/version.py")
            source = tar.extractfile(version_py).read().decode() if version_py else ""
    except (tarfile.TarError, OSError) as err:
        raise HistoryError(f"cannot read {path} ({err}); delete it to download it again") from err
    headers = email.parser.HeaderParser().parsestr(pkg_info)
    return Sdist(version, int(members["PKG-INFO"].mtime),
                 (headers.get("Requires-Python") or "").strip(), _git_hash(source, version),
                 _minimum_jaxlib(source))


def release_infos(first=FIRST, last=None, sdist_cache=None):
    """What the sdists of jax's final releases from ``first`` to ``last`` (default: the newest)
    say about themselves ([Sdist], oldest first); a release without an sdist is left out.

    Downloads the sdists into ``sdist_cache``: their PKG-INFO says which Python they need.
    """
    cache = sdist_cache or default_cache()
    versions = available_versions()
    for name, given in (("--first", first), ("--last", last)):
        if given is not None and given not in versions:
            raise HistoryError(f"{name} {given}: jax {given} is not a final, unyanked release on "
                               "the package index (see 'pip index versions jax')")
    low, high = version_key(first), version_key(last) if last else None
    if high is not None and high < low:
        raise HistoryError(f"--last {last} comes before --first {first}")
    infos = []
    for version in versions:
        key = version_key(version)
        if key < low or (high is not None and key > high):
            continue
        path = fetch_sdist(version, cache)
        if path is None:
            if version in (first, last):
                raise HistoryError(f"jax {version} has no sdist on the package index; pick "
                                   "another --first or --last")
            log(f"skipping jax {version}: it has no sdist on the package index")
            continue
        infos.append(read_sdist(path, version))
    return infos


def python_plan(first=FIRST, last=None, sdist_cache=None):
    """[(version, (python, ...))]: the Python each release from ``first`` to ``last`` is
    benchmarked on (``pythons.plan``; none for a release no Python admits)."""
    infos = release_infos(first, last, sdist_cache)
    try:
        return pythons.plan(infos, pythons.candidates(infos))
    except pythons.PythonError as err:
        raise HistoryError(str(err)) from None


def list_releases(first=FIRST, last=None, python_version=None, sdist_cache=None):
    """The releases to build, oldest first: final releases from ``first`` to ``last`` (default:
    the newest) that have an sdist whose Requires-Python admits the Python they are benchmarked
    on (``python_version``, else each release's own from ``python_plan``)."""
    infos = release_infos(first, last, sdist_cache)
    if python_version:
        admitted = {i.version for i in infos if admits(i.requires_python, python_version)}
        judged = f"Python {python_version}"
    else:
        try:
            plan = pythons.plan(infos, pythons.candidates(infos))
        except pythons.PythonError as err:
            raise HistoryError(str(err)) from None
        admitted = {version for version, chosen in plan if chosen}
        judged = "every Python the index has a jaxlib for"
        log("benchmark Pythons: " + pythons.stretches(plan))
    excluded = [f"{i.version} (Requires-Python {i.requires_python})" for i in infos
                if i.version not in admitted]
    for info in infos:
        if info.version in (first, last) and info.version not in admitted:
            raise HistoryError(f"jax {info.version} needs Python {info.requires_python}, not "
                               f"{judged}; pass another --python-version or release")
    if excluded:
        log(f"excluded for {judged}: jax " + ", ".join(excluded))
    chosen = [i.version for i in infos if i.version in admitted]
    if not chosen:
        raise HistoryError(f"no jax release from {first} to {last or 'the newest'} has an sdist "
                           f"for {judged}")
    return chosen


# ---------------------------------------------------------------- git


@functools.cache
def _empty_home():
    home = tempfile.mkdtemp(prefix="jaxbench-git-home-")
    atexit.register(shutil.rmtree, home, True)
    return home


def _git_env(extra=None):
    # no GIT_* from the caller (GIT_DIR, GIT_CONFIG_PARAMETERS...) and no user or system config
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    home = _empty_home()
    env.update(HOME=home, XDG_CONFIG_HOME=home, GIT_CONFIG_NOSYSTEM="1", LC_ALL="C")
    env.update(extra or {})
    return env


def _git(repo, *args, input=None, env=None, check=True):
    try:
        result = git.run(repo, *args, input=input, env=_git_env(env), options=GIT_OPTIONS,
                         check=check)
    except git.GitError as err:
        raise HistoryError(str(err)) from None
    return result.strip() if check else result


def _tags(repo):
    """Commit hash -> version, from the jax-v* tags."""
    tags = {}
    out = _git(repo, "for-each-ref", "--format=%(objectname) %(*objectname) %(refname)",
               f"refs/tags/{TAG_PREFIX}*")
    for line in out.splitlines():
        obj, peeled, ref = line.split(" ", 2)
        tags.setdefault(peeled or obj, ref[len(f"refs/tags/{TAG_PREFIX}"):])
    return tags


def release_commits(dest):
    """(version, commit hash) along ``main``'s first-parent history, oldest first."""
    head = _git(dest, "rev-parse", "-q", "--verify", "refs/heads/main^{commit}", check=False)
    if head.returncode:
        return []
    tags = _tags(dest)
    commits = _git(dest, "rev-list", "--first-parent", "--reverse", "refs/heads/main").split()
    untagged = [c for c in commits if c not in tags]
    if untagged:
        raise HistoryError(f"{dest}: commit {untagged[0][:12]} on main has no {TAG_PREFIX} tag, so "
                           "this is not a jax release-history repository; delete it or pass "
                           "another --dest")
    return [(tags[c], c) for c in commits]


def _existing(dest):
    """The releases already in ``dest``; refuses a folder this command did not make."""
    if not os.path.exists(dest):
        return []
    if not os.path.isdir(dest):
        raise HistoryError(f"{dest} is not a folder")
    if not os.listdir(dest):
        return []
    if not os.path.isdir(os.path.join(dest, ".git")):
        raise HistoryError(f"{dest} is not empty and not a git repository; pass a new or empty "
                           "folder as --dest")
    commits = release_commits(dest)
    if not commits and not os.path.exists(os.path.join(dest, ".git", MARKER)):
        raise HistoryError(f"{dest} is a git repository with no jax releases on main; pass a new "
                           "or empty folder as --dest")
    return commits


def _check_prefix(dest, have, wanted):
    n = min(len(have), len(wanted))
    if have[:n] == wanted[:n]:
        return
    if have[0] != wanted[0]:
        raise HistoryError(f"{dest} starts at jax {have[0]}, not {wanted[0]}: delete it to "
                           f"rebuild from {wanted[0]}, or pass --first {have[0]}")
    i = next(i for i in range(n) if have[i] != wanted[i])
    raise HistoryError(f"{dest} has jax {have[i]} after {have[i - 1]} where {wanted[i]} belongs "
                       "(another --python-version?); delete it to rebuild")


def _init(dest):
    os.makedirs(dest, exist_ok=True)
    # no templates: nothing (hooks, excludes) from this machine's git installation
    _git(dest, "init", "-q", "--template=")
    _git(dest, "symbolic-ref", "HEAD", "refs/heads/main")
    with open(os.path.join(dest, ".git", MARKER), "w") as f:
        f.write("made by python -m jaxbench_helpers history\n")


# ---------------------------------------------------------------- commits


def _clear_worktree(dest):
    for entry in os.scandir(dest):
        if entry.name == ".git":
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.remove(entry.path)


def _target(dest, rel):
    parts = rel.rstrip("/").split("/")
    if rel.startswith("/") or ".." in parts or parts[0] == ".git":
        raise HistoryError(f"unsafe path in sdist: {rel}")
    target = os.path.join(dest, *parts)
    # a symlink earlier in the sdist must not lead a later file out of the work tree
    parent = os.path.realpath(os.path.dirname(target))
    if parent != os.path.realpath(dest) and not parent.startswith(os.path.realpath(dest) + os.sep):
        raise HistoryError(f"sdist path {rel} leads outside {dest}")
    return target


def _unpack(sdist, version, dest):
    """Write the release's files into ``dest``; git records only 644 vs 755, so modes are those."""
    with tarfile.open(sdist) as tar:
        for rel, member in _members(tar, version):
            target = _target(dest, rel)
            if member.isdir():
                os.makedirs(target, exist_ok=True)
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if member.issym():
                os.symlink(member.linkname, target)
            elif member.isfile() or member.islnk():
                with tar.extractfile(member) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out)
                os.chmod(target, 0o755 if member.mode & 0o111 else 0o644)


def commit_message(info):
    return (f"jax {info.version}\n\nRelease {info.version}, rebuilt from its PyPI sdist.\n"
            f"Upstream commit: {info.git_hash}\n")


def _commit_release(dest, info, sdist, parent):
    """Commit the release on top of ``parent`` (None for the first); returns the commit hash."""
    _clear_worktree(dest)
    _unpack(sdist, info.version, dest)
    # -f: keep files that a .gitignore inside the sdist would otherwise hide
    _git(dest, "add", "-A", "-f")
    tree = _git(dest, "write-tree")
    name, address = IDENTITY
    date = f"@{info.date} +0000"
    env = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": address, "GIT_AUTHOR_DATE": date,
           "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": address, "GIT_COMMITTER_DATE": date}
    # commit-tree runs no hooks and takes the message verbatim; the commit equals git commit's
    commit = _git(dest, "commit-tree", tree, *(["-p", parent] if parent else []), "-F", "-",
                  input=commit_message(info), env=env)
    # the tag before main: an interruption between the two leaves main on a tagged commit
    _git(dest, "update-ref", f"refs/tags/{TAG_PREFIX}{info.version}", commit)
    _git(dest, "update-ref", "refs/heads/main", commit, parent or "")
    return commit


# a commit that adds a line here changes nothing that is installed, yet asv builds and
# installs it anew: what separates two commits whose code is the same
NEUTRAL_FILE = "JAXBENCH_NEUTRAL.txt"


def neutral_commit(repo, message, env=None):
    """Commit a line added to ``NEUTRAL_FILE`` (outside the package) on the checked-out branch
    of ``repo``, by ``env``'s GIT_AUTHOR_*/GIT_COMMITTER_* (default: ``IDENTITY``); returns
    the commit hash."""
    name, address = IDENTITY
    env = env or {f"GIT_{who}_{what}": value for who in ("AUTHOR", "COMMITTER")
                  for what, value in (("NAME", name), ("EMAIL", address))}
    with open(os.path.join(repo, NEUTRAL_FILE), "a") as f:
        f.write(message + "\n")
    _git(repo, "add", "--", NEUTRAL_FILE)
    _git(repo, "commit", "-q", "-m", message, env=env)
    return _git(repo, "rev-parse", "HEAD")


def _print_summary(dest, commits):
    dates = dict(line.split() for line in _git(
        dest, "log", "--first-parent", "--date=short", "--format=%H %cd", "refs/heads/main"
    ).splitlines())
    for version, commit in commits:
        print(f"  jax {version:<10} {commit[:12]}  {dates[commit]}")
    print(dest, flush=True)


def build(dest, first=FIRST, last=None, python_version=None, sdist_cache=None):
    """Build or extend the release-history repository at ``dest``.

    Returns [(version, commit hash)] for the releases from ``first`` to ``last``, oldest first.
    """
    dest = os.path.abspath(dest)
    if python_version and not re.fullmatch(r"\d+(\.\d+)*", python_version):
        raise HistoryError(f"--python-version {python_version!r} is not like 3.12")
    cache = os.path.abspath(sdist_cache or default_cache())
    existing = _existing(dest)  # before any download: a wrong --dest fails fast
    wanted = list_releases(first, last, python_version, cache)
    have = [version for version, _ in existing]
    if have:
        _check_prefix(dest, have, wanted)
    if len(have) > len(wanted):
        log(f"{dest} also has releases after jax {wanted[-1]}; they are left as they are")
    missing = wanted[len(have):]
    if missing:
        if not have and not os.path.isdir(os.path.join(dest, ".git")):
            _init(dest)
        # the work tree and index follow main, whatever was checked out here
        _git(dest, "symbolic-ref", "HEAD", "refs/heads/main")
    parent = existing[-1][1] if existing else None
    for version in missing:
        sdist = sdist_path(cache, version)
        parent = _commit_release(dest, read_sdist(sdist, version), sdist, parent)
        log(f"committed jax {version} as {parent[:12]}")
    commits = release_commits(dest)[: len(wanted)]
    _print_summary(dest, commits)
    return commits


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m jaxbench_helpers history", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", required=True, help="the repository to build or extend")
    parser.add_argument("--first", default=FIRST, help=f"oldest release (default {FIRST})")
    parser.add_argument("--last", help="newest release (default: the newest on the index)")
    parser.add_argument("--python-version",
                        help="leave out releases whose Requires-Python excludes this Python "
                        "(default: the Python each release is benchmarked on)")
    parser.add_argument("--sdist-cache", default=default_cache(),
                        help="where the sdists are kept (default %(default)s)")
    args = parser.parse_args(argv)
    try:
        build(args.dest, first=args.first, last=args.last, python_version=args.python_version,
              sdist_cache=args.sdist_cache)
    except (HistoryError, VersionError) as err:
        print(f"jaxbench history: error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
