"""The same suite, unchanged, imports and runs on the oldest and the newest supported release.

The newest (the test environment's jax) is covered by test_asv_suite; this runs every benchmark
once, with asv, in a plain virtualenv holding the oldest supported release. A case whose API
the release lacks must skip (n/a), never fail.
"""

import os
import re
import subprocess
import sys

import pytest
from asv_tools import asv, config, git_repo

from jaxbench_helpers.common import paths

pytestmark = pytest.mark.slow

OLDEST = "0.4.20"
SPAN_VENVS = os.path.join(paths.ROOT, ".asv", "span")


def release_venv(version):
    """A virtualenv with jax and jaxlib ``version`` and this checkout's helpers (made once)."""
    path = os.path.join(SPAN_VENVS, f"jax-{version}")
    python = os.path.join(path, "bin", "python")
    stamp = os.path.join(path, "jaxbench-ready")
    if not os.path.exists(stamp):
        subprocess.run([sys.executable, "-m", "venv", "--clear", path], check=True)
        pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        numpy = ["numpy<2", "scipy<1.14"] if version.startswith("0.4.") else []
        subprocess.run(pip + [f"jax=={version}", f"jaxlib=={version}", "asv_runner==0.2.5",
                              "pympler", *numpy], check=True)
        subprocess.run(pip + ["--no-deps", "-e", paths.ROOT], check=True)
        open(stamp, "w").close()
    return python


def test_every_benchmark_runs_or_skips_on_the_oldest_release(tmp_path):
    python = release_venv(OLDEST)
    conf = config(tmp_path, git_repo(tmp_path / "repo"))
    rc, out = asv(conf, "machine", "--yes", "--machine", "span")
    assert rc == 0, out
    rc, out = asv(conf, "run", f"--environment=existing:{python}", "--quick", "--dry-run",
                  "--show-stderr", "--machine", "span", env={"JAXBENCH_PROFILE": "quick"})
    (tmp_path / "run.log").write_text(out)
    failed = re.findall(r"^\[\s*[\d.]+%\] ··· (\S+)\s+failed$", out, re.M)
    assert rc == 0 and not failed, out
    assert "track_jax_version" in out and "420" in out  # it really ran jax 0.4.20
