"""A project virtual environment (.venv) with asv and the test tools, made on first use.

The README's commands run through here, so a fresh machine needs only Python 3.11+ and git.
The environment is rebuilt when pyproject.toml changes.
"""

import hashlib
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, ".venv")
PYTHON = os.path.join(VENV, "bin", "python")
STAMP = os.path.join(VENV, "jaxbench-installed")


def _wanted_stamp():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def inside():
    return os.path.realpath(sys.prefix) == os.path.realpath(VENV)


def ensure():
    """Create or update .venv; returns its python."""
    if sys.version_info < (3, 11):
        sys.exit(f"jaxbench needs Python 3.11 or newer to run (this is {sys.version.split()[0]})")
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


def reexec_inside(argv):
    """Run ``python -m jaxbench_helpers ARGV`` in .venv, replacing this process."""
    python = ensure()
    os.chdir(ROOT)
    os.execv(python, [python, "-m", "jaxbench_helpers", *argv])
