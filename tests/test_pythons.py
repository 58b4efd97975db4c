"""The Python each release is benchmarked on, and finding that interpreter as asv needs it.

The policy is checked on release data shaped like the index's (which Pythons have which jaxlib
wheels), including a future that drops a Python, and on the real index and sdists; finding an
interpreter with real interpreters: a shim named python3.12 that does not run (as pyenv's does
when 3.12 is not its global version) must not be the one asv gets.
"""

import os
import subprocess
import sys

import pytest

from jaxbench_helpers.common import asvconfig, paths
from jaxbench_helpers.host import history, pythons

BENCHMARK_PYTHON = pythons.committed()[0]


def release(version, requires=">=3.9", minimum=None):
    return history.Sdist(version, 0, requires, "unknown", minimum or version)


def wheels_by_python(table):
    """wheels(python) over {python: [jaxlib versions]}."""
    return lambda python: tuple(table.get(python, ()))


# the shape of the index at jax 0.12.0.1: 3.11 stops at 0.10.2, 3.13 starts at 0.4.34
OLD = ["0.4.20", "0.4.30", "0.4.34", "0.10.2"]
NEW = ["0.11.0", "0.12.0.1"]
INDEX = {"3.10": ["0.4.20", "0.4.30"], "3.11": OLD, "3.12": OLD + NEW,
         "3.13": ["0.4.34", "0.10.2", *NEW]}
RELEASES = [release(v) for v in OLD] + [release(v, ">=3.11") for v in NEW]


def test_one_python_covers_the_whole_span_where_the_index_allows():
    wheels = wheels_by_python(INDEX)
    candidates = pythons.candidates(RELEASES, wheels)
    assert candidates == ["3.10", "3.11", "3.12", "3.13"]
    plan = pythons.plan(RELEASES, candidates, wheels)
    assert plan == [(r.version, ("3.12",)) for r in RELEASES]
    assert pythons.stretches(plan) == "Python 3.12 for jax 0.4.20 .. 0.12.0.1 (6 releases)"


def test_a_release_that_drops_the_python_changes_it_and_the_release_before_runs_on_both():
    future = RELEASES + [release("0.13.0", ">=3.13")]
    wheels = wheels_by_python(dict(INDEX, **{"3.13": INDEX["3.13"] + ["0.13.0"],
                                             "3.14": ["0.12.0.1", "0.13.0"]}))
    plan = pythons.plan(future, pythons.candidates(future, wheels), wheels)
    assert plan[:5] == [(r.version, ("3.12",)) for r in RELEASES[:5]]
    assert plan[5:] == [("0.12.0.1", ("3.12", "3.13")), ("0.13.0", ("3.13",))]
    assert pythons.stretches(plan) == ("Python 3.12 for jax 0.4.20 .. 0.12.0.1 (6 releases); "
                                       "Python 3.13 for jax 0.12.0.1 .. 0.13.0 (2 releases)")


def test_a_release_no_python_can_install_stays_in_its_stretch():
    # jax 0.4.37 has no jaxlib of its own: the install step pairs it with an older one that
    # fits its minimum; with no fitting wheel at all it stays where asv reports the failure
    releases = [release("0.4.36"), release("0.4.37", minimum="0.4.37"), release("0.4.38")]
    wheels = wheels_by_python({"3.12": ["0.4.36", "0.4.38"]})
    assert pythons.plan(releases, ["3.12"], wheels) == [
        ("0.4.36", ("3.12",)), ("0.4.37", ("3.12",)), ("0.4.38", ("3.12",))]
    # a release whose Requires-Python no candidate admits gets no Python: it is left out
    releases.insert(1, release("0.4.36.1", "<3.0"))
    assert pythons.plan(releases, ["3.12"], wheels)[1] == ("0.4.36.1", ())


def test_no_jaxlib_for_any_python_is_an_error_about_the_index():
    with pytest.raises(pythons.PythonError, match="lists no jaxlib wheel for any Python"):
        pythons.candidates(RELEASES, wheels_by_python({}))


@pytest.mark.slow
def test_the_real_index_gives_one_python_for_every_release_and_the_config_names_it():
    """From the package index and the sdists as they are: one Python from 0.4.20 to the newest
    release, and asv.conf.json (what users run against JAX's main) names the newest's."""
    plan = history.python_plan()
    versions = [v for v, _ in plan]
    assert versions[0] == "0.4.20" and "0.12.0.1" in versions
    chosen = {p for _, ps in plan for p in ps}
    assert chosen == {"3.12"}, pythons.stretches(plan)
    assert asvconfig.read(paths.CONFIG)["pythons"] == list(plan[-1][1][-1:])


# ---------------------------------------------------------------- interpreters


def _broken_shim(folder, version):
    """A pythonX.Y that exits 127 with pyenv's message, as pyenv's shim does."""
    folder.mkdir(exist_ok=True)
    shim = folder / f"python{version}"
    shim.write_text(f"#!/bin/sh\necho 'pyenv: python{version}: command not found' >&2\n"
                    "exit 127\n")
    shim.chmod(0o755)
    return shim


def test_find_skips_a_shim_that_does_not_run(tmp_path):
    real = pythons.find(BENCHMARK_PYTHON)
    shims = tmp_path / "shims"
    _broken_shim(shims, BENCHMARK_PYTHON)
    good = tmp_path / "good"
    good.mkdir()
    (good / f"python{BENCHMARK_PYTHON}").symlink_to(real)
    assert pythons.find(BENCHMARK_PYTHON, f"{shims}{os.pathsep}{good}") == real


def test_find_falls_back_to_pyenv(tmp_path):
    if pythons._pyenv_interpreter(BENCHMARK_PYTHON) is None:
        pytest.skip(f"pyenv has no {BENCHMARK_PYTHON} here")
    shims = tmp_path / "shims"
    _broken_shim(shims, BENCHMARK_PYTHON)
    found = pythons.find(BENCHMARK_PYTHON, str(shims))
    assert found == os.path.realpath(pythons._pyenv_interpreter(BENCHMARK_PYTHON))


def test_a_missing_python_is_a_clear_error():
    with pytest.raises(pythons.PythonError, match=r"install Python 3\.99 \(pyenv install 3\.99"):
        pythons.find("3.99", "")
    with pytest.raises(pythons.PythonError, match="not a version like 3.12"):
        pythons.find("3")


def test_asv_finds_a_python_that_runs_on_the_path_it_is_given(tmp_path):
    """asv's virtualenv plugin takes the first pythonX.Y on PATH: behind a broken shim it
    would pick the shim; with asv_env's PATH it picks one that runs."""
    shims = tmp_path / "shims"
    _broken_shim(shims, BENCHMARK_PYTHON)
    plain = dict(os.environ, PATH=f"{shims}{os.pathsep}{os.environ['PATH']}")
    probe = ("from asv.plugins.virtualenv import Virtualenv; "
             f"print(Virtualenv._find_python('{BENCHMARK_PYTHON}'))")
    picked = subprocess.run([sys.executable, "-c", probe], env=plain, capture_output=True,
                            text=True, check=True).stdout.strip()
    assert picked == str(shims / f"python{BENCHMARK_PYTHON}")
    env = pythons.asv_env([BENCHMARK_PYTHON], plain)
    picked = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                            text=True, check=True).stdout.strip()
    ran = subprocess.run([picked, "-c", "import sys; print(sys.version_info[:2])"],
                         capture_output=True, text=True)
    assert ran.returncode == 0 and ran.stdout.strip() == str(
        tuple(int(p) for p in BENCHMARK_PYTHON.split("."))), ran.stderr
    assert os.path.dirname(picked) == pythons.LINKS
