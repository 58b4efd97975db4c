"""A planted regression in real JAX, found by asv find, flagged by asv continuous, and turned
into a pull-request table by the report's compare mode.

The repository is jax 0.10.2 rebuilt from its sdist, then four commits: three neutral ones
(comments in jax's own source) and, third of the four, one that makes every jitted call miss
the C++ fast path. That commit adds a guard to ``_get_fastpath_data`` meant for calls whose
unused arguments were pruned, but tests ``any`` kept argument where it meant "not all": any
function that uses an argument then runs its whole dispatch in Python on every call (about ten
times slower for ``JitTrivial`` on a 2-core machine). Nothing sleeps; the version stays 0.10.2,
so every commit pairs with the same jaxlib. One asv environment, one benchmark.

On a machine shared with other work, asv's 99% confidence intervals of a slow commit can get
wide enough to cover a tenfold step, so the comparisons here judge medians against the factor
(``--no-stats``); asv's statistics are checked against asv compare in tests/test_report.py.
"""

import json
import os
import re
import subprocess

import pytest
from asv_tools import asv, config

from jaxbench_helpers.analysis import report
from jaxbench_helpers.host import history

pytestmark = [pytest.mark.slow, pytest.mark.judges_timings]

BENCHMARK = "bench_dispatch.JitTrivial.time_dispatch_100_calls"
SUBSET = ["-b", r"JitTrivial\.time_dispatch_100_calls"]
MACHINE = "planted"
GIT = ["git", "-c", "user.name=jaxbench tests", "-c", "user.email=tests@localhost",
       "-c", "commit.gpgsign=false"]

NEUTRAL_BEFORE = [
    ("jax/_src/dispatch.py", "def apply_primitive(prim, *args, **params):\n",
     "# Eager operations run one primitive at a time through a cached jit of it.\n",
     "dispatch: say how eager primitives run"),
    ("jax/_src/api.py", "def vmap(",
     "# vmap batches by tracing once with batched avals, never by looping in Python.\n",
     "api: comment on how vmap batches"),
]
PLANTED = (
    "jax/_src/pjit.py",
    "  kept_var_bitvec = [i in executable._kept_var_idx\n"
    "                      for i in range(len(const_args) + len(args_flat))]\n",
    "  # Calls whose unused arguments were pruned at compile time select their\n"
    "  # arguments in Python.\n"
    "  if any(kept_var_bitvec):\n"
    "    return None\n",
    "pjit: select pruned arguments in Python",
)
NEUTRAL_AFTER = [
    ("jax/_src/pjit.py", "def _infer_params(\n",
     "# Argument inference is cached per function and signature.\n",
     "pjit: comment on _infer_params"),
]


def _commit(repo, path, anchor, text, message, after_anchor=False):
    """Insert ``text`` before (or after) the one line block ``anchor`` of ``path``; commit."""
    full = os.path.join(repo, path)
    source = open(full).read()
    assert source.count(anchor) == 1, f"{path}: the anchor {anchor!r} is not unique in 0.10.2"
    source = source.replace(anchor, anchor + text if after_anchor else text + anchor)
    open(full, "w").write(source)
    subprocess.run(GIT + ["-C", repo, "commit", "-qam", message], check=True)
    return subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def planted(tmp_path_factory, sdist_cache):
    """(tmp, config, repo, release hash, [commit hashes after it], planted hash)."""
    tmp = tmp_path_factory.mktemp("planted")
    repo = str(tmp / "jax")
    releases = history.build(repo, first="0.10.1", last="0.10.2", sdist_cache=sdist_cache)
    release = releases[-1][1]
    commits = [_commit(repo, *c) for c in NEUTRAL_BEFORE]
    planted = _commit(repo, *PLANTED, after_anchor=True)
    commits += [planted] + [_commit(repo, *c) for c in NEUTRAL_AFTER]
    version_py = open(os.path.join(repo, "jax", "version.py")).read()
    assert '_version = "0.10.2"' in version_py  # every commit pairs with jaxlib 0.10.2
    conf = config(tmp, repo, profile="quick")
    rc, out = asv(conf, "machine", "--yes", "--machine", MACHINE)
    assert rc == 0, out
    return tmp, conf, repo, release, commits, planted


# asv find bisects on differences of medians: its last step weighs the jump into the planted
# commit against the difference between two slow commits measured minutes apart. Load from
# other processes that slows one of those twice as much as the other can tip it, so a wrong
# answer is retried; a systematic error names the wrong commit every time.
FIND_ATTEMPTS = 3


@pytest.fixture(scope="module")
def found(planted):
    """asv find over the commits after the release: [(exit code, named hash prefix, output)],
    one per attempt, the last naming the planted commit unless all attempts failed."""
    tmp, conf, *_, bad = planted
    attempts = []
    for attempt in range(FIND_ATTEMPTS):
        rc, out = asv(conf, "find", "--machine", MACHINE, "--show-stderr", "jax-v0.10.2..main",
                      BENCHMARK)
        (tmp / f"find-{attempt}.log").write_text(out)
        named = re.findall(r"Greatest regression found: ([0-9a-f]{8})", out)
        attempts.append((rc, named, out))
        if rc == 0 and named == [bad[:8]]:
            break
    return attempts


@pytest.fixture(scope="module")
def continuous(planted, found):
    """asv continuous of the release against main: (exit code, output)."""
    tmp, conf, *_ = planted
    rc, out = asv(conf, "continuous", "--machine", MACHINE, "--factor", "1.5", "--no-stats",
                  "--show-stderr", *SUBSET, "jax-v0.10.2", "main")
    (tmp / "continuous.log").write_text(out)
    return rc, out


def test_find_names_the_planted_commit(planted, found):
    _, _, _, _, commits, bad = planted
    assert len(commits) == 4 and 0 < commits.index(bad) < len(commits) - 1
    rc, named, out = found[-1]
    assert rc == 0, out
    assert named == [bad[:8]], "\n\n".join(o for _, _, o in found)


def test_continuous_fails_and_names_the_slowed_benchmark(continuous):
    rc, out = continuous
    assert rc == 1, out
    assert "PERFORMANCE DECREASED" in out
    slowed = [line for line in out.splitlines()
              if "JitTrivial.time_dispatch_100_calls" in line and re.match(r"\|\s*\+", line)]
    assert slowed, out


def test_compare_report_puts_the_slowdown_in_a_table(planted, continuous, tmp_path):
    _, conf, _, release, commits, _ = planted
    out = tmp_path / "comment.md"
    rc = report.main(["compare", "jax-v0.10.2", "main", "--config", conf, "--machine",
                      MACHINE, "--factor", "1.5", "--no-stats", "-o", str(out)])
    text = out.read_text()
    assert rc == 1, text
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in text.splitlines()
            if line.startswith("| ") and "`bench_" in line]
    assert rows[0][:2] == ["slower", f"`{BENCHMARK}('float32')`"], text
    assert float(rows[0][4]) >= 3, text  # planted to be unmistakable: about 10x here
    assert release[:8] in text and commits[-1][:8] in text
    assert "**Failed at HEAD:** none." in text


def test_history_report_puts_the_planted_commit_on_top(planted, found, continuous):
    tmp, conf, repo, _, commits, bad = planted
    results_dir = json.load(open(conf))["results_dir"]
    found_steps = report.history(results_dir, MACHINE, repo, window=2, factor=1.5,
                                 use_stats=False)
    worse = sorted((s for s in found_steps.steps if s.worse), key=lambda s: -s.size)
    assert worse, found_steps.steps
    top = worse[0]
    assert top.key.benchmark == BENCHMARK
    assert top.after.hash == bad
    # asv find measured the commit just before the planted one
    assert top.before.hash == commits[commits.index(bad) - 1]
    assert top.ratio >= 3
