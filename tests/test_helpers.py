"""The helper modules that need no JAX: profiles, platforms, data, versions, configs."""

import json
import os

import numpy as np
import pytest

from jaxbench_helpers.common import asvconfig, paths
from jaxbench_helpers.host import asvconf
from jaxbench_helpers.install import step as install
from jaxbench_helpers.runtime import data, platform, profiles, versions


def test_profile_defaults_to_regular(monkeypatch):
    monkeypatch.delenv("JAXBENCH_PROFILE", raising=False)
    assert profiles.current().name == "regular"
    assert profiles.current().matrix_side == 1000  # the docs' 1000x1000 matmul


def test_unknown_profile_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("JAXBENCH_PROFILE", "huge")
    with pytest.raises(profiles.ProfileError, match="JAXBENCH_PROFILE='huge'.*quick, regular"):
        profiles.current()


def test_unknown_platform_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("JAXBENCH_PLATFORM", "quantum")
    with pytest.raises(platform.PlatformError, match="JAXBENCH_PLATFORM='quantum'.*cpu, gpu"):
        platform.selected()


def test_missing_platform_skips_the_benchmark(monkeypatch):
    monkeypatch.setenv("JAXBENCH_PLATFORM", "gpu")
    with pytest.raises(NotImplementedError, match="no gpu device"):
        platform.device()


def test_data_is_seeded_read_only_and_cached():
    a = data.normal((3, 4), "float32")
    assert a is data.normal([3, 4], np.float32)
    assert a.dtype == np.float32 and not a.flags.writeable
    rng = np.random.default_rng(data.SEED)
    np.testing.assert_array_equal(a, rng.standard_normal((3, 4)).astype(np.float32))


@pytest.mark.parametrize("text, want", [
    ("0.4.31.dev20240710+abc123", (0, 4, 31)),
    ("0.9.0.1", (0, 9, 0, 1)),
    ("0.10.2", (0, 10, 2)),
    ("0.4.20rc1", (0, 4)),
])
def test_version_tuple(text, want):
    assert versions.release(text) == want


AVAILABLE = ["0.4.13", "0.4.18", "0.4.19", "0.4.20", "0.4.30", "0.4.31", "0.10.1", "0.10.2"]


def test_release_pairs_with_the_same_jaxlib():
    src = install.JaxSource("0.10.2", "0.10.1", latest_jaxlib_on_pypi="0.10.1", is_release=True)
    assert install.choose_jaxlib(src, AVAILABLE) == "0.10.2"


def test_commit_between_releases_pairs_with_what_ci_used():
    # a 0.4.31 dev commit must not get jaxlib 0.4.31, released after it
    src = install.JaxSource("0.4.31", "0.4.30", latest_jaxlib_on_pypi="0.4.30")
    assert install.choose_jaxlib(src, AVAILABLE) == "0.4.30"


def test_release_without_its_jaxlib_takes_the_newest_that_fits():
    src = install.JaxSource("0.4.21", "0.4.14", is_release=True)
    assert install.choose_jaxlib(src, AVAILABLE) == "0.4.20"


def test_no_installable_jaxlib_is_a_clear_error():
    src = install.JaxSource("0.4.16", "0.4.14", is_release=True)
    with pytest.raises(install.InstallError, match="no jaxlib .* fits jax 0.4.16.*skips"):
        install.choose_jaxlib(src, AVAILABLE)


def _fake_checkout(tmp_path, version_py, setup_py=""):
    (tmp_path / "jax").mkdir()
    (tmp_path / "jax" / "version.py").write_text(version_py)
    (tmp_path / "setup.py").write_text(setup_py)
    return str(tmp_path)


def test_reads_a_release_sdist(tmp_path):
    path = _fake_checkout(
        tmp_path,
        '_version = "0.10.2"\n_release_version: str = \'0.10.2\'\n'
        "_minimum_jaxlib_version = '0.10.1'\n",
        "_latest_jaxlib_version_on_pypi = '0.10.1'\n",
    )
    assert install.JaxSource.read(path) == install.JaxSource("0.10.2", "0.10.1", "0.10.1", True)


def test_reads_a_git_checkout(tmp_path):
    path = _fake_checkout(
        tmp_path,
        '_version: str = "0.4.31"\n_release_version: str | None = None\n'
        '_minimum_jaxlib_version: str = "0.4.30"\n',
    )
    src = install.JaxSource.read(path)
    assert (src.version, src.minimum_jaxlib, src.is_release) == ("0.4.31", "0.4.30", False)


def test_not_a_jax_checkout(tmp_path):
    with pytest.raises(install.InstallError, match="not a jax checkout"):
        install.JaxSource.read(str(tmp_path))


def test_old_jaxlib_gets_numpy_1(tmp_path):
    path = _fake_checkout(
        tmp_path, "_version = '0.4.20'\n_release_version = '0.4.20'\n"
                  "_minimum_jaxlib_version = '0.4.14'\n")
    _, jaxlib, commands = install.plan(path, None, AVAILABLE)
    assert jaxlib == "0.4.20"
    assert "numpy<2" in commands[0] and "jaxlib==0.4.20" in commands[0]
    assert commands[-1][-2:] == ["-e", install.HELPERS_DIR]


def test_derived_config_points_elsewhere(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    conf = asvconf.derive(str(repo), results_dir=str(tmp_path / "r"), profile="quick")
    assert conf["repo"] == str(repo)
    assert conf["results_dir"] == str(tmp_path / "r")
    assert os.path.isabs(conf["html_dir"]) and os.path.isabs(conf["benchmark_dir"])
    assert conf["matrix"]["env_nobuild"]["JAXBENCH_PROFILE"] == ["quick"]
    both = asvconf.derive(str(repo), platforms=["cpu", "gpu"])
    assert both["matrix"]["env_nobuild"]["JAXBENCH_PLATFORM"] == ["cpu", "gpu"]
    assert all("{conf_dir}" not in c for c in conf["install_command"])
    assert asvconfig.read(paths.CONFIG)["repo"].endswith("jax-ml/jax.git")  # committed file intact
    path = asvconfig.write(conf, str(tmp_path / "asv.json"))
    assert json.load(open(path))["repo"] == str(repo)


def test_derived_config_rejects_bad_input(tmp_path):
    with pytest.raises(asvconfig.ConfigError, match="not a git repository"):
        asvconf.derive(str(tmp_path))
    (tmp_path / ".git").mkdir()
    with pytest.raises(asvconfig.ConfigError, match="unknown profile 'huge'"):
        asvconf.derive(str(tmp_path), profile="huge")
    with pytest.raises(asvconfig.ConfigError, match="unknown platform 'quantum'"):
        asvconf.derive(str(tmp_path), platforms=["cpu", "quantum"])


def _cli(*args):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "jaxbench_helpers", *args],
                          cwd=paths.ROOT, capture_output=True, text=True)


def test_config_command(tmp_path):
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    out = tmp_path / "asv.releases.conf.json"
    proc = _cli("config", "--repo", str(tmp_path / "repo"), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert json.load(open(out))["repo"] == str(tmp_path / "repo")
    proc = _cli("config", "--repo", str(tmp_path / "repo"), "-o", str(out), "--profile", "huge")
    assert proc.returncode == 1 and "unknown profile 'huge'" in proc.stderr


def test_unknown_command_lists_the_commands():
    proc = _cli("bogus")
    assert proc.returncode == 2 and "main" in proc.stdout and "history" in proc.stdout


def test_a_command_run_by_an_interpreter_without_asv_runs_in_venv(tmp_path):
    """The README runs the commands with the machine's python3, which has no asv: they move
    into .venv, keeping the folder they were started from (relative paths hold)."""
    import subprocess
    import sys

    base = sys._base_executable
    probe = subprocess.run([base, "-c", "import asv"], capture_output=True)
    if probe.returncode == 0:
        pytest.skip(f"{base} has asv itself")
    proc = subprocess.run([base, "-m", "jaxbench_helpers", "ab", "--help"], cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=paths.ROOT), capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "usage: python -m jaxbench_helpers ab" in proc.stdout


def _release_checkout(tmp_path, version="0.10.2", minimum="0.10.1"):
    return _fake_checkout(
        tmp_path, f"_version = '{version}'\n_release_version = '{version}'\n"
                  f"_minimum_jaxlib_version = '{minimum}'\n")


def test_cpu_machine_installs_no_gpu_packages(tmp_path, monkeypatch):
    monkeypatch.delenv(install.CUDA_ENV, raising=False)
    assert install.gpu_selection() == ""
    _, _, commands = install.plan(_release_checkout(tmp_path), None, AVAILABLE)
    assert not any("cuda" in arg for cmd in commands for arg in cmd)


def test_gpu_machine_installs_plugin_and_pjrt_of_exactly_that_jaxlib(tmp_path, monkeypatch):
    monkeypatch.setenv(install.CUDA_ENV, "cuda12")
    offered = {"plugin": ["0.10.1", "0.10.2"], "pjrt": ["0.10.1", "0.10.2"]}
    _, jaxlib, commands = install.plan(_release_checkout(tmp_path), None, AVAILABLE,
                                       install.gpu_selection(), offered)
    assert jaxlib == "0.10.2"
    assert "jax-cuda12-plugin[with-cuda]==0.10.2" in commands[0]
    assert "jax-cuda12-pjrt==0.10.2" in commands[0]


def test_gpu_machine_without_a_matching_plugin_fails_clearly(tmp_path):
    offered = {"plugin": ["0.10.1"], "pjrt": ["0.10.1", "0.10.2"]}
    with pytest.raises(install.InstallError, match=r"jax-cuda12-plugin==0\.10\.2 .*skips"):
        install.plan(_release_checkout(tmp_path), None, AVAILABLE, "cuda12", offered)


def test_unknown_cuda_flavour_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(install.CUDA_ENV, "cuda11")
    with pytest.raises(install.InstallError, match="JAXBENCH_CUDA='cuda11' is not one of"):
        install.gpu_selection()


def test_install_dry_run_prints_the_plan(tmp_path):
    proc = _cli("install", "--build-dir", _release_checkout(tmp_path), "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "jax 0.10.2 (release, accepts jaxlib >=0.10.1) -> jaxlib 0.10.2 (CPU only)" in (
        proc.stdout)


def test_gpu_platform_allocates_on_demand(monkeypatch):
    monkeypatch.setenv("JAXBENCH_PLATFORM", "gpu")
    monkeypatch.delenv("XLA_PYTHON_CLIENT_PREALLOCATE", raising=False)
    platform.configure()
    assert os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"


def test_span_spreads_releases_evenly_and_keeps_both_ends():
    from jaxbench_helpers.host import mainjob

    releases = [(f"0.{i}", f"h{i}") for i in range(39)]
    chosen = mainjob.spread(releases, 13)
    assert len(chosen) == 13
    assert chosen[0] == releases[0] and chosen[-1] == releases[-1]
    gaps = {int(b[0][2:]) - int(a[0][2:]) for a, b in zip(chosen, chosen[1:])}
    assert gaps <= {3, 4}
    assert mainjob.spread(releases[:5], 13) == releases[:5]
    with pytest.raises(SystemExit, match="at least 2"):
        mainjob.spread(releases, 1)


def test_derived_config_keeps_or_takes_the_benchmark_pythons(tmp_path):
    (tmp_path / ".git").mkdir()
    assert asvconf.derive(str(tmp_path))["pythons"] == asvconfig.read(paths.CONFIG)["pythons"]
    assert asvconf.derive(str(tmp_path), pythons=["3.13"])["pythons"] == ["3.13"]


def test_serve_command_shows_a_dashboard_folder(tmp_path):
    import subprocess
    import sys
    import urllib.request

    (tmp_path / "index.html").write_text("<title>a dashboard</title>")
    server = subprocess.Popen([sys.executable, "-m", "jaxbench_helpers", "serve", "--html-dir",
                               str(tmp_path), "--port", "0"], cwd=paths.ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        url = line.split(" at ", 1)[1].split()[0]
        assert url.startswith("http://127.0.0.1:")
        assert urllib.request.urlopen(url, timeout=30).read() == b"<title>a dashboard</title>"
    finally:
        server.terminate()
        server.wait(timeout=30)
    proc = _cli("serve", "--html-dir", str(tmp_path / "nothing"))
    assert proc.returncode == 2 and "no dashboard in" in proc.stderr
