"""Which Python each JAX release is benchmarked on, and where that interpreter is on this host.

The policy: one Python for as long a stretch of releases as possible, because a change of
interpreter moves timings too and would read as a step in JAX's history. Walking the releases
oldest first, a stretch keeps its Python while that Python can install the release; where it
cannot, the next stretch takes the Python that installs the most releases in a row from there,
and the release before the change is benchmarked on both, so the interpreter's own step can be
told apart from JAX's. "Can install" is read from the data, never from a table: the release's
Requires-Python (its sdist) admits the Python, and the package index has a jaxlib wheel for
that Python which the install step would pair with the release (``install.step.choose_jaxlib``).
With the index as of jax 0.12.0.1 that is CPython 3.12 for every release from 0.4.20 on (the
index has jaxlib 0.4.18 .. 0.12.0.1 for 3.12; 3.11 stops at 0.10.2, 3.13 starts at 0.4.34).
A release that no Python can install stays in the stretch whose Python its Requires-Python
admits, so asv reaches it and skips it with the install step's message.

asv's virtualenv plugin finds an interpreter as ``pythonX.Y`` on PATH. Here a shim of that name
may exist and not run (pyenv's, when X.Y is not its global version), so ``find`` takes the
first ``pythonX.Y`` on PATH that really runs as X.Y, else the newest X.Y.* pyenv has installed,
and ``asv_env`` hands asv a PATH that starts with a folder of links to those interpreters.
"""

import functools
import os
import re
import shutil
import subprocess
import sys

from ..common import asvconfig, paths
from ..install.step import InstallError, JaxSource, choose_jaxlib
from ..runtime.versions import admits, release

# links named pythonX.Y to the interpreters found, put first on PATH for asv
LINKS = os.path.join(paths.STATE, "pythons")


class PythonError(asvconfig.ConfigError):
    """No usable interpreter, or no answer from the package index."""


# ---------------------------------------------------------------- the package index


def index_versions(package, *options):
    """Versions of ``package`` that ``pip index versions`` lists (newest first); [] when the
    index has none that fit ``options``."""
    cmd = [sys.executable, "-m", "pip", "index", "versions", package, *options,
           "--disable-pip-version-check", "--no-input"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    line = next((ln for ln in result.stdout.splitlines()
                 if ln.startswith("Available versions:")), None)
    if line is not None and not result.returncode:
        return [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()]
    output = result.stdout + result.stderr
    # an index that does not answer reads the same: candidates() fails when every answer is []
    if "No matching distribution" in output:
        return []
    tail = "\n".join(output.strip().splitlines()[-15:])
    raise PythonError(f"'{' '.join(cmd[1:6 + len(options)])}' failed; is the package index "
                      f"reachable?\n{tail}")


@functools.cache
def jaxlib_wheels(python):
    """The jaxlib versions the index has a wheel of for CPython ``python`` on this platform."""
    return tuple(index_versions("jaxlib", "--python-version", python, "--only-binary=:all:"))


# ---------------------------------------------------------------- the policy


def installs(info, wheels):
    """Whether one of ``wheels`` (jaxlib versions) fits the release ``info`` (an object with
    ``version`` and ``minimum_jaxlib``), by the install step's own rule."""
    try:
        choose_jaxlib(JaxSource(info.version, info.minimum_jaxlib or "0", is_release=True),
                      list(wheels))
    except InstallError:
        return False
    return True


def candidates(infos, wheels=jaxlib_wheels, highest_minor=99):
    """The Pythons 3.X worth considering for ``infos`` (releases with ``requires_python``),
    oldest first: those a release's Requires-Python admits, up to the first newer one the index
    has no jaxlib wheel for at all."""
    found = []
    for minor in range(highest_minor + 1):
        python = f"3.{minor}"
        if not any(admits(info.requires_python, python) for info in infos):
            continue
        if wheels(python):
            found.append(python)
        elif found:
            break
    if not found:
        raise PythonError("the package index lists no jaxlib wheel for any Python these jax "
                          "releases admit; is it reachable ('pip index versions jaxlib')?")
    return found


def plan(infos, pythons, wheels=jaxlib_wheels):
    """[(version, (python, ...))] for ``infos`` (releases with ``version``, ``requires_python``
    and ``minimum_jaxlib``, oldest first) over the candidate ``pythons`` (oldest first): one
    Python per release, two for the release where the Python changes, none for a release
    that no candidate's Requires-Python admits (it is left out)."""
    usable = []
    for info in infos:
        admitted = [p for p in pythons if admits(info.requires_python, p)]
        usable.append([p for p in admitted if installs(info, wheels(p))] or admitted)

    def stretch(python, start):
        n = start
        while n < len(usable) and (python in usable[n] or not usable[n]):
            n += 1
        return n - start

    chosen, current, previous = [], None, None
    for i, (info, fits) in enumerate(zip(infos, usable)):
        if not fits:
            chosen.append((info.version, ()))
            continue
        if current not in fits:
            overlaps = previous is not None and usable[previous]
            best = max(fits, key=lambda p: (stretch(p, i), bool(overlaps) and p in overlaps,
                                            -pythons.index(p)))
            if current is not None and overlaps and best in overlaps:
                chosen[previous] = (chosen[previous][0], (current, best))
            current = best
        chosen.append((info.version, (current,)))
        previous = i
    return chosen


def stretches(chosen):
    """The plan in words: 'Python 3.12 for jax 0.4.20 .. 0.12.0.1 (49 releases)'."""
    order = [p for _, pythons in chosen for p in pythons]
    parts = []
    for python in sorted(set(order), key=order.index):
        versions = [v for v, pythons in chosen if python in pythons]
        span = versions[0] + (f" .. {versions[-1]}" if len(versions) > 1 else "")
        parts.append(f"Python {python} for jax {span} ({len(versions)} releases)")
    return "; ".join(parts)


# ---------------------------------------------------------------- interpreters


def _runs_as(path, version):
    try:
        result = subprocess.run([path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0 and result.stdout.strip() == version


def _pyenv():
    root = os.environ.get("PYENV_ROOT") or os.path.join(os.path.expanduser("~"), ".pyenv")
    own = os.path.join(root, "bin", "pyenv")
    return shutil.which("pyenv") or (own if os.access(own, os.X_OK) else None)


def _pyenv_interpreter(version):
    """pythonX.Y of the newest X.Y.* pyenv has installed, or None."""
    pyenv = _pyenv()
    if pyenv is None:
        return None
    listed = subprocess.run([pyenv, "versions", "--bare"], capture_output=True, text=True)
    installed = [v.strip() for v in listed.stdout.split()
                 if re.fullmatch(rf"{re.escape(version)}\.\d+", v.strip())]
    if not installed:
        return None
    newest = max(installed, key=release)
    prefix = subprocess.run([pyenv, "prefix", newest], capture_output=True, text=True)
    if prefix.returncode:
        return None
    return os.path.join(prefix.stdout.strip(), "bin", f"python{version}")


def find(version, search_path=None):
    """The path of an interpreter that runs as Python ``version`` (X.Y): the first
    ``pythonX.Y`` on PATH that really runs, else pyenv's newest X.Y.*."""
    if not re.fullmatch(r"\d+\.\d+", version):
        raise PythonError(f"Python {version!r} is not a version like 3.12")
    name = f"python{version}"
    search_path = os.environ.get("PATH", "") if search_path is None else search_path
    for folder in search_path.split(os.pathsep):
        candidate = os.path.join(folder or os.curdir, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK) and _runs_as(
                candidate, version):
            return os.path.realpath(candidate)
    candidate = _pyenv_interpreter(version)
    if candidate and _runs_as(candidate, version):
        return os.path.realpath(candidate)
    raise PythonError(
        f"the benchmarks run on Python {version}, and no {name} runs here (none on PATH that "
        f"starts, and pyenv has no {version}.*): install Python {version} (pyenv install "
        f"{version}, or your system's {name} package), then run this again")


def link_folder(versions, folder=LINKS):
    """``folder`` holding ``pythonX.Y`` for each of ``versions``, each a link to an interpreter
    that runs as that version."""
    os.makedirs(folder, exist_ok=True)
    for version in versions:
        target = find(version)
        link = os.path.join(folder, f"python{version}")
        if os.path.realpath(link) == target:
            continue
        # a new link moved over the old one: an asv run in progress never sees none
        part = f"{link}.{os.getpid()}"
        if os.path.lexists(part):
            os.remove(part)
        os.symlink(target, part)
        os.replace(part, link)
    return folder


def committed():
    """The Pythons the committed asv.conf.json benchmarks on."""
    return list(asvconfig.read(paths.CONFIG).get("pythons", []))


def asv_env(versions, env=None):
    """``env`` (default: this process's environment) with PATH starting at the links to
    ``versions``, for an asv subprocess."""
    env = dict(os.environ if env is None else env)
    env["PATH"] = link_folder(versions) + os.pathsep + env.get("PATH", "")
    return env
