"""The same suite, unchanged, imports and runs on the oldest and the newest supported release.

Every benchmark runs once, with asv, in a plain virtualenv holding the release on the Python it
is benchmarked on (``pythons.plan``). A case whose API the release lacks must skip (n/a), never
fail, and the set of n/a cases is pinned per release: a compat probe that regresses (every
``time_lower`` silently n/a, say) changes the set and fails the test.

On the oldest release the instruction counts run for ``bench_staging`` alone (its trace and
lower counts, one of them n/a there, are the counts' compat paths); every other count runs on
the newest. A count child costs minutes under callgrind (the models' child 430-450 s of a
release's ~1100 s), and the count child runs the same ``setup`` and ``time_*`` methods whose
timings run on both releases.
"""

import concurrent.futures
import glob
import itertools
import json
import math
import os
import re
import subprocess

import pytest
from asv_tools import asv, benchmark_names, config, git_repo, start_asv

from jaxbench_helpers.common import paths
from jaxbench_helpers.host import history, pythons
from jaxbench_helpers.install import step as install
from jaxbench_helpers.runtime import user_cache
from jaxbench_helpers.runtime.versions import release

pytestmark = pytest.mark.slow

OLDEST, NEWEST = "0.4.20", "0.12.0.1"
SPAN_VENVS = os.path.join(paths.ROOT, ".asv", "span")

# On a CPU: benchmark x parameters -> the gist of why it is n/a there. Where the skip happens in
# setup, asv prints the reason ("asv: skipped: ..."), and the gist must be among those printed.
GPU_ONLY = "GPU-only"
COUNTED_ELSEWHERE = "counted only at"
NO_ALLOCATOR_STATS = "reports no allocator statistics"
# jax.device_get of a CPU array gives NumPy the device buffer itself on every release
DEVICE_VIEW = "returns a view of the device buffer"
ON_EVERY_RELEASE = {
    "bench_transfer.Bandwidth.track_to_host_bytes_per_second('64MB')": DEVICE_VIEW,
    **{f"bench_gpu.MatmulThroughput.{method}('{dtype}')": GPU_ONLY
       for method in ("time_run", "track_achieved_flops_per_second",
                      "track_peak_flops_per_second")
       for dtype in ("float32", "tensorfloat32", "bfloat16", "float16")},
    **{f"bench_memory.{workload}.track_device_peak_bytes('float32')": NO_ALLOCATOR_STATS
       for workload in ("CNNTrainStep", "MLPTrainStep", "TransformerBlock")},
    **{f"bench_matmul.SquareMatmul.track_{phase}_cpu_instructions{per_call}('float64')":
       COUNTED_ELSEWHERE
       for phase, per_call in (("run", ""), ("dispatch", "_per_call"), ("latency", "_per_call"),
                               ("trace", ""), ("lower", ""), ("compile", ""), ("to_device", ""),
                               ("to_host", ""))},
    **{f"bench_transfer.ArrayTransfer.track_{phase}_cpu_instructions('{size}')": COUNTED_ELSEWHERE
       for phase in ("to_device", "to_host") for size in ("1KB", "1MB", "16MB", "64MB")},
    **{f"bench_staging.AddChain.track_{phase}_cpu_instructions({n})": COUNTED_ELSEWHERE
       for phase in ("trace", "lower") for n in (10, 1000)},
    **{f"bench_array_ops.MatmulShapes.track_run_cpu_instructions('float32', '{shape}')":
       COUNTED_ELSEWHERE for shape in ("gemv", "batched")},
}
NO_TRACE = "lowering alone needs jax.jit(f).trace"
NO_CPU_PERSISTENT_CACHE = "writes no persistent compilation cache entries"
NO_BUFFER_SIZES = "memory_analysis() of this jax reports no"
ALIASES = "no bytes move"
EXPECTED_NA = {
    OLDEST: {
        **ON_EVERY_RELEASE,
        **{f"bench_matmul.{w}.time_lower('{d}')": NO_TRACE
           for w in ("SquareMatmul", "CenteredGram") for d in ("float32", "float64")},
        **{f"bench_models.{w}.{m}('float32')": NO_TRACE
           for w in ("MLPTrainStep", "CNNTrainStep", "TransformerBlock", "ODEIntegration")
           for m in ("time_lower", "track_lower_cpu_instructions")},
        "bench_matmul.SquareMatmul.track_lower_cpu_instructions('float32')": NO_TRACE,
        **{f"bench_staging.AddChain.time_lower({n})": NO_TRACE for n in (10, 100, 1000)},
        "bench_staging.AddChain.track_lower_cpu_instructions(100)": NO_TRACE,
        **{f"bench_staging.{w}.time_lower('float32')": NO_TRACE
           for w in ("NestedJitCalls", "ScanMlp", "WhileLoopKepler", "GradVmapRemat",
                     "Rk4Steps")},
        **{f"bench_staging.PersistentCache.{m}('float32')": NO_CPU_PERSISTENT_CACHE
           for m in ("time_compile", "time_load_from_persistent_cache")},
        **{f"bench_models.{w}.{m}('float32')": NO_BUFFER_SIZES
           for w in ("MLPTrainStep", "CNNTrainStep", "TransformerBlock", "ODEIntegration")
           for m in ("track_output_bytes", "track_temp_bytes")},
        # jax 0.4.20 on CPU aliases the 64 MB host array instead of copying it
        "bench_transfer.Bandwidth.track_to_device_bytes_per_second('64MB')": ALIASES,
    },
    NEWEST: dict(ON_EVERY_RELEASE),
}
# the gists asv prints because the skip happens in setup (a skip inside the timed method leaves
# no message in asv's output)
PRINTED = {GPU_ONLY, NO_CPU_PERSISTENT_CACHE}


def benchmark_python(version):
    """The Python ``version`` is benchmarked on, by the policy over the whole history."""
    return dict(history.python_plan())[version][0]


def release_venv(version):
    """A virtualenv with jax and jaxlib ``version`` and this checkout's helpers (made once)."""
    python_version = benchmark_python(version)
    path = os.path.join(SPAN_VENVS, f"jax-{version}-py{python_version}")
    python = os.path.join(path, "bin", "python")
    stamp = os.path.join(path, "jaxbench-ready")
    if not os.path.exists(stamp):
        base = pythons.find(python_version)
        subprocess.run([base, "-m", "venv", "--clear", path], check=True)
        pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        numpy = (["numpy<2", "scipy<1.14"]
                 if release(version) < install.FIRST_JAXLIB_FOR_NUMPY2 else [])
        subprocess.run(pip + [f"jax=={version}", f"jaxlib=={version}", "asv_runner==0.2.5",
                              "pympler", *install.HELPER_REQUIREMENTS, *numpy], check=True)
        subprocess.run(pip + ["--no-deps", "-e", paths.ROOT], check=True)
        open(stamp, "w").close()
    return python


# The asv runs, as (release, asv --bench regexes (a benchmark matching any runs), lane). The
# two lanes run side by side, each pinned to a CPU of its own, the runs of a lane one after the
# other: most of a run is instruction counts, whose callgrind child runs on one CPU (the last of
# its parent's), so one run alone leaves the other CPU of a 2-core machine idle, and the models'
# counts (about as long as the newest release's other benchmarks) get a lane to themselves.
COUNTS = r"_cpu_instructions"
MODELS_COUNTS = rf"^bench_models\..*{COUNTS}"
RUNS = (
    (NEWEST, (MODELS_COUNTS,), 0),
    (OLDEST, (rf"^(?!.*{COUNTS})", rf"^bench_staging\..*{COUNTS}"), 0),
    (NEWEST, (rf"^(?!{MODELS_COUNTS[1:]})",), 1),
)


def runs_at(version, name):
    """Whether benchmark ``name`` (no parameters) is among what runs on ``version``."""
    return any(re.search(pattern, name)
               for release_, patterns, _ in RUNS if release_ == version for pattern in patterns)


def outcomes(results_dir):
    """{'module.Class.method(params)': value}: NaN for n/a, None for a failure."""
    found = {}
    for path in glob.glob(os.path.join(results_dir, "span", "*.json")):
        if path.endswith("machine.json"):
            continue
        data = json.load(open(path))
        columns = data["result_columns"]
        for name, row in data["results"].items():
            row = dict(zip(columns, row))
            combos = list(itertools.product(*row["params"])) or [()]
            for combo, value in zip(combos, row["result"]):
                found[f"{name}({', '.join(combo)})" if combo else name] = value
    return found


def _start(version, python, patterns, cpu, tmp_path_factory):
    """Start one asv run of ``version``'s benchmarks matching ``patterns`` with ``python`` (its
    release venv) on CPU ``cpu``; returns (process, log file, results folder)."""
    tmp_path = tmp_path_factory.mktemp(f"span-{version}")
    repo = git_repo(tmp_path / "repo")
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()
    conf = config(tmp_path, repo)
    # asv rewrites ~/.asv-machine.json in place at every start, so lanes starting together
    # could read each other's half-written file: each lane's asv has a home of its own
    home = tmp_path / "home"
    home.mkdir()
    # the real cache keeps the built counts shim
    env = {"HOME": str(home), "XDG_CACHE_HOME": os.path.dirname(user_cache.folder())}
    rc, out = asv(conf, "machine", "--yes", "--machine", "span", env=env)
    assert rc == 0, out
    log = open(tmp_path / "run.log", "w")
    # saved (into tmp_path), not --dry-run: the results say which case was n/a; asv saves an
    # existing environment's results only under a commit named for them
    bench = [arg for pattern in patterns for arg in ("--bench", pattern)]
    proc = start_asv(conf, "run", f"--environment=existing:{python}", "--quick",
                     "--show-stderr", "--set-commit-hash", head, "--machine", "span", *bench,
                     env=dict(env, JAXBENCH_PROFILE="quick"), log=log, cpus={cpu})
    return proc, log, tmp_path / "results"


@pytest.fixture(scope="module")
def span_runs(request, tmp_path_factory):
    """{version: [(asv's exit code, its output, its results folder)]}: the runs of the
    selected releases (``RUNS``). Their timings mean nothing (``--quick``); only what ran is
    checked."""
    cpus = sorted(os.sched_getaffinity(0))
    selected = {item.callspec.params["version"] for item in request.session.items
                if item.module.__name__ == __name__ and hasattr(item, "callspec")}
    # made before the runs start, one after the other
    pythons_ = {version: release_venv(version) for version in sorted(selected)}
    lanes = {}
    for version, patterns, lane in RUNS:
        if version in selected:
            lanes.setdefault(lane, []).append((version, patterns))
    running = []  # (process, log) of every run started, to stop them all on a failure

    def run_lane(lane, runs):
        done = []
        for version, patterns in runs:
            proc, log, results = _start(version, pythons_[version], patterns,
                                        cpus[lane % len(cpus)], tmp_path_factory)
            running.append((proc, log))
            rc = proc.wait(timeout=3600)  # an hour for each run, from its own start
            log.close()  # the finally below closes those a failure left open
            done.append((version, (rc, open(log.name).read(), results)))
        return done

    runs = {}
    try:
        with concurrent.futures.ThreadPoolExecutor(len(lanes) or 1) as pool:
            for lane_done in pool.map(lambda item: run_lane(*item), lanes.items()):
                for version, run in lane_done:
                    runs.setdefault(version, []).append(run)
    finally:
        for proc, log in running:
            if proc.poll() is None:
                proc.kill()
            log.close()
    return runs


@pytest.mark.parametrize("version", [OLDEST, NEWEST])
def test_every_benchmark_runs_or_skips_as_pinned(version, span_runs):
    found, out = {}, ""
    for rc, run_out, results in span_runs[version]:
        found.update(outcomes(results))
        out += run_out
        failed = sorted(name for name, value in found.items() if value is None)
        assert rc == 0 and not failed, (
            f"asv exit {rc}, failed on jax {version}: {failed}\n{run_out[-20000:]}")
    discovered = benchmark_names(span_runs[version][0][2])
    # every benchmark meant to run on this release ran, each in exactly one run
    assert sum(len(outcomes(results)) for *_, results in span_runs[version]) == len(found)
    assert {name.split("(")[0] for name in found} == {
        name for name in discovered if runs_at(version, name)}, out
    na = {name for name, value in found.items() if isinstance(value, float) and math.isnan(value)}
    expected = {name: gist for name, gist in EXPECTED_NA[version].items()
                if runs_at(version, name.split("(")[0])}
    assert sorted(na - set(expected)) == [], f"n/a on jax {version}, not expected"
    assert sorted(set(expected) - na) == [], f"expected n/a on jax {version}, but measured"
    printed = set(re.findall(r"asv: skipped: \w+\((.*)\)\s*$", out, re.M))
    for reason in printed:
        assert any(gist in reason for gist in PRINTED & set(expected.values())), reason
    for gist in PRINTED & set(expected.values()):
        assert any(gist in reason for reason in printed), gist
    # it really ran this jax
    major, minor, micro = (release(version) + (0, 0, 0))[:3]
    assert found["bench_environment.Versions.track_jax_version"] == (
        major * 10000 + minor * 100 + micro)
    # the to-device bandwidth is n/a exactly where device_put aliases the host array
    aliases = found["bench_transfer.Bandwidth.track_to_device_aliases_host('64MB')"]
    assert aliases == (1 if ALIASES in expected.values() else 0)
