"""Running real asv from the tests, against derived configs in temporary folders."""

import json
import os
import subprocess
import sys

from jaxbench_helpers.common import asvconfig
from jaxbench_helpers.host import asvconf, pythons


def git_repo(path):
    """A one-commit git repository: enough for asv commands that build nothing."""
    os.makedirs(path, exist_ok=True)
    for cmd in (["init", "-q", "-b", "main"],
                ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                 "--allow-empty", "-m", "empty"]):
        subprocess.run(["git", *cmd], cwd=path, check=True)
    return path


def config(tmp_path, repo, profile="quick", **kwargs):
    conf = asvconf.derive(str(repo), results_dir=str(tmp_path / "results"),
                          html_dir=str(tmp_path / "html"), env_dir=str(tmp_path / "env"),
                          profile=profile, **kwargs)
    return asvconfig.write(conf, str(tmp_path / "asv.conf.json"))


def benchmark_names(results_dir):
    """The names (no parameters) of every benchmark asv discovered: its benchmarks.json."""
    with open(os.path.join(results_dir, "benchmarks.json")) as f:
        return set(json.load(f)) - {"version"}


def _environment(conf, env):
    """This process's environment and ``env``, with the config's Pythons found as the jaxbench
    commands find them."""
    return pythons.asv_env(asvconfig.read(conf).get("pythons", []),
                           dict(os.environ, **(env or {})))


def asv(conf, *args, env=None, timeout=3600):
    """Run asv; returns (exit code, combined output)."""
    proc = subprocess.run([sys.executable, "-m", "asv", "--config", conf, *args],
                          capture_output=True, text=True, timeout=timeout,
                          env=_environment(conf, env))
    return proc.returncode, proc.stdout + proc.stderr


def start_asv(conf, *args, log, cpus, env=None):
    """Start asv in the background on the CPUs ``cpus`` alone (it and everything it starts),
    its combined output going to the open file ``log``; returns the process."""
    return subprocess.Popen([sys.executable, "-m", "asv", "--config", conf, *args],
                            stdout=log, stderr=subprocess.STDOUT, env=_environment(conf, env),
                            preexec_fn=lambda: os.sched_setaffinity(0, cpus))
