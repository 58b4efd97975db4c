"""A project virtual environment (.venv) with asv and the test tools, made on first use.

The README's commands run through here, so a fresh machine needs only Python 3.11+ and git,
and for the benchmarks the Python they run on (3.12, found by ``pythons``: on PATH or pyenv).
The environment is rebuilt when pyproject.toml changes.
"""

import hashlib
import os
import subprocess
import sys

from ..common import paths
from ..common.paths import ROOT, VENV

PYTHON = os.path.join(VENV, "bin", "python")
STAMP = os.path.join(VENV, "jaxbench-installed")
# the dashboard tests drive Debian's Chromium (Playwright cannot download its own browser here)
CHROMIUM = "/usr/bin/chromium"


def _wanted_stamp():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def inside():
    return os.path.realpath(sys.prefix) == os.path.realpath(VENV)


class BrowserSetupError(RuntimeError):
    pass


def ensure_browser():
    """Install Debian's chromium when missing, for the dashboard tests."""
    packages = [] if os.path.exists(CHROMIUM) else ["chromium"]
    if not packages:
        return
    print(f"jaxbench: installing {' '.join(packages)} from Debian's packages", flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    steps = (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", *packages])
    for step in steps:
        try:
            failed = subprocess.run(step, env=env).returncode
        except FileNotFoundError:
            failed = "apt-get is not on PATH"
        if failed:
            raise BrowserSetupError(
                f"'{' '.join(step)}' failed ({failed}). The dashboard tests need {CHROMIUM}: "
                "install it as root ('apt-get install -y chromium' on Debian), then run the "
                "tests again")


def ensure(browser=False):
    """Create or update .venv; returns its python. ``browser``: also install what the
    dashboard tests drive (Debian's chromium)."""
    if sys.version_info < (3, 11):
        sys.exit(f"jaxbench needs Python 3.11 or newer to run (this is {sys.version.split()[0]})")
    if browser:
        try:
            ensure_browser()
        except BrowserSetupError as err:
            sys.exit(f"jaxbench: {err}")
    wanted = _wanted_stamp()
    if os.path.exists(STAMP) and open(STAMP).read() == wanted:
        return PYTHON
    if not os.path.exists(PYTHON):
        print(f"jaxbench: creating {VENV}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
    pip = [PYTHON, "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    subprocess.run(pip + ["--upgrade", "pip"], check=True)
    subprocess.run(pip + ["-e", f"{ROOT}[test]"], check=True)
    with open(STAMP, "w") as f:
        f.write(wanted)
    return PYTHON


def ensure_benchmark_pythons():
    """Fail early, saying what to install, when the Python the benchmarks run on is missing
    (the end-to-end tests build asv environments with it)."""
    from . import pythons

    try:
        for version in pythons.committed():
            pythons.find(version)
    except pythons.PythonError as err:
        sys.exit(f"jaxbench: {err}")


def reexec_inside(argv, keep_cwd=False):
    """Run ``python -m jaxbench_helpers ARGV`` in .venv, replacing this process (from the
    project's folder, or with ``keep_cwd`` from this one, so relative paths in ARGV hold)."""
    if argv[:1] == ["test"]:
        ensure_benchmark_pythons()
    python = ensure(browser=argv[:1] == ["test"])
    env = dict(os.environ)
    if keep_cwd:
        env = paths.project_on_path(env)
    else:
        os.chdir(ROOT)
    os.execve(python, [python, "-m", "jaxbench_helpers", *argv], env)
