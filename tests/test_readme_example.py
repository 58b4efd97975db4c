"""The README's "add a benchmark" example, pasted into a copy of the suite, is a benchmark: asv
discovers and runs it beside the suite's own modules, it has the shape
tests/test_bench_structure.py requires, and it passes the honesty checks of
tests/test_honest_timing.py (every phase waits for its device work, no timed call compiles,
the NumPy baseline computes on the host). Broken copies of the example fail the same checks,
so a guide that teaches a broken benchmark cannot pass."""

import ast
import itertools
import os
import re
import shutil
import sys
import textwrap

import pytest
from asv_runner.discovery import disc_benchmarks
from asv_tools import asv, benchmark_names, config, git_repo
from test_bench_structure import (
    docstring_problems,
    parameter_problems,
    setup_cache_problems,
    x64_problems,
)
from test_honest_timing import (
    NO_DEVICE_WORK,
    PUTS,
    READS_BACK,
    RUNS_THE_PROGRAM,
    first_params,
    jax_arrays_from_the_baseline,
    set_up,
    waiting_problems,
)

from jaxbench_helpers.common import asvconfig
from jaxbench_helpers.runtime import monitor, workload

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
BENCHMARKS = os.path.join(ROOT, "benchmarks")
# the example: a marker naming the file it is saved as, then a python block
EXAMPLE = re.compile(r"<!-- example: benchmarks/(bench_\w+)\.py\b[^>]*-->\s*```python\n(.*?)```",
                     re.S)
MARKER_FORM = "<!-- example: benchmarks/bench_NAME.py ... --> right before a ```python block"
# The waiting check puts this much device work behind every output (about 10 ms on a 2-core
# VM; the suite's own test uses a tenth) and looks this many times: an unwaited call is caught
# unless the test's thread is descheduled until the work is done, every time.
SPINS, TRIES = 400, 3
# phases that trace, lower or compile by design (each sample stages one fresh object)
COLD_STAGES = {"time_trace", "time_lower", "time_compile", "time_load_from_persistent_cache"}
CLASSIFIED = RUNS_THE_PROGRAM | PUTS | set(READS_BACK) | set(NO_DEVICE_WORK)

_packages = itertools.count()


def readme_example(text):
    """(module name, source) of the one marked example in the README's ``text``."""
    found = EXAMPLE.findall(text)
    if len(found) != 1:
        raise AssertionError(f"README.md has {len(found)} marked examples; the guide needs "
                             f"exactly one, marked {MARKER_FORM}")
    return found[0]


def scratch_suite(folder, module, source, with_suite):
    """A benchmark package in ``folder`` holding ``source`` as ``module`` and, ``with_suite``,
    a copy of every module of the real benchmarks package; its name is new to this process,
    so it imports here beside the real package."""
    package = os.path.join(str(folder), f"suite_with_example_{next(_packages)}")
    if with_suite:
        shutil.copytree(BENCHMARKS, package, ignore=shutil.ignore_patterns("__pycache__"))
    else:
        os.makedirs(package)
        open(os.path.join(package, "__init__.py"), "w").close()
    path = os.path.join(package, f"{module}.py")
    if os.path.exists(path):
        raise AssertionError(f"the example's module benchmarks/{module}.py exists in the suite: "
                             "name the example after an area the suite does not have")
    with open(path, "w") as f:
        f.write(source)
    return package


def discovered(package, module):
    """The benchmarks of ``module`` that asv_runner's discovery (what asv runs inside a
    benchmark environment) finds in ``package``."""
    parent = os.path.dirname(package)
    sys.path.insert(0, parent)
    try:
        return [b for b in disc_benchmarks(package) if b.name.startswith(f"{module}.")]
    finally:
        sys.path.remove(parent)


def compile_problems(bench, name):
    """A warm phase that traces, lowers or compiles inside its timed call, set up as asv sets
    it up; [] if it does none of that."""
    params = first_params(type(bench))
    set_up(bench, params)
    before = monitor.compile_events()
    try:
        getattr(bench, name)(*params)
    except monitor.RecompilationError as err:
        return [str(err)]
    events = monitor.compile_events() - before
    return [f"{name} traced or compiled {events} times inside its timed call"] if events else []


def honesty_problems(cls):
    problems = []
    for name in sorted(n for n in dir(cls) if n.startswith("time_")):
        if name not in CLASSIFIED:
            problems.append(f"{cls.__name__}.{name}: tests/test_honest_timing.py does not "
                            "classify this phase; add it to the set naming its device work")
        for _ in range(TRIES):
            unwaited = waiting_problems(cls(), name, SPINS)
            if unwaited:
                problems += unwaited
                break
        if name not in COLD_STAGES:
            problems += compile_problems(cls(), name)
    if hasattr(cls, "time_numpy") and jax_arrays_from_the_baseline(cls):
        problems.append(f"{cls.__name__}'s NumPy baseline returns JAX arrays: time_numpy "
                        "would time JAX")
    return problems


def example_problems(folder, module, source):
    """Why ``source``, saved as ``module`` of the benchmarks package, is not a benchmark of
    this suite; [] if nothing."""
    package = scratch_suite(folder, module, source, with_suite=False)
    found = discovered(package, module)
    if not found:
        return [f"asv_runner discovers no benchmark in {module}"]
    loaded = sys.modules[f"{os.path.basename(package)}.{module}"]
    problems = setup_cache_problems(loaded)
    problems += [p for bench in found for p in docstring_problems(bench.name, bench.func)]
    for cls in workload.workload_classes(loaded):
        problems += parameter_problems(cls) + x64_problems(cls)
        try:
            problems += honesty_problems(cls)
        except AssertionError as err:  # setup's NumPy check, or a skip no CPU case may take
            problems.append(f"{cls.__name__}: {err}")
    return problems


@pytest.fixture(scope="module")
def example():
    with open(README) as f:
        return readme_example(f.read())


def test_the_example_has_the_suites_shape_and_passes_the_honesty_checks(fresh, tmp_path,
                                                                       example):
    module, source = example
    assert example_problems(tmp_path, module, source) == []


def test_asv_discovers_and_runs_the_example_beside_the_suite(tmp_path, example):
    module, source = example
    package = scratch_suite(tmp_path, module, source, with_suite=True)
    conf = config(tmp_path, git_repo(tmp_path / "repo"))
    settings = asvconfig.read(conf)
    settings["benchmark_dir"] = package
    asvconfig.write(settings, conf)
    rc, out = asv(conf, "machine", "--yes", "--machine", "ci")
    assert rc == 0, out
    # an existing environment ignores the matrix's variables: the profile comes from here
    rc, out = asv(conf, "run", "--python=same", "--quick", "--dry-run", "--show-stderr",
                  "--machine", "ci", "--bench", rf"^{module}\.", env={"JAXBENCH_PROFILE": "quick"})
    assert rc == 0, out
    names = benchmark_names(tmp_path / "results")
    ours = sorted(n for n in names if n.startswith(f"{module}."))
    assert ours, sorted(names)
    assert "bench_matmul.SquareMatmul.time_run" in names  # discovered beside the suite
    statuses = dict(re.findall(r"^\[\s*[\d.]+%\] ··· (\S+)\s+(\S.*)$", out, re.M))
    assert {name: statuses.get(name) for name in ours} == {name: "ok" for name in ours}, out


# ---- the checks catch a broken example -----------------------------------------------------

def _name(node):
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return node.name
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        return getattr(node.targets[0], "id", None)
    return None


def broken(source, *, members=(), without=(), then=""):
    """The example with ``members`` (class-body statements) put into its workload class in
    place of those of the same name, the module-level definitions ``without`` left out, and
    ``then`` (``{cls}`` for the class's name) appended; jax imported."""
    tree = ast.parse(source)
    (cls,) = [node for node in tree.body if isinstance(node, ast.ClassDef)
              and any(ast.unparse(base).endswith("Workload") for base in node.bases)]
    for text in members:
        new = ast.parse(textwrap.dedent(text)).body
        replaced = {_name(node) for node in new}
        cls.body = [node for node in cls.body if _name(node) not in replaced] + new
    tree.body = [node for node in tree.body if _name(node) not in without]
    return "import jax\n" + ast.unparse(tree) + "\n" + then.format(cls=cls.name)


UNWAITED = '''
def time_run(self, *params):
    """Timed: handing the call to JAX. Not timed: the work, which nothing waits for."""
    self.prepared.run(*self.prepared.args)
'''
COMPILES = '''
def time_run(self, *params):
    """Timed: jitting a new function object (a compile) and its call. Not timed: setup."""
    jax.block_until_ready(jax.jit(self.prepared.fresh_program())(*self.prepared.args))
'''
UNDOCUMENTED = '''
def time_run_twice(self, *params):
    jax.block_until_ready([self.prepared.run(*self.prepared.args) for _ in range(2)])
'''

BROKEN = {
    "does not wait for its work": (dict(members=[UNWAITED]),
                                   ["time_run returned with 1 arrays computing"]),
    "compiles in a timed call": (dict(members=[COMPILES]), ["time_run traced or compiled"]),
    "computes its NumPy baseline with JAX": (
        dict(then="{cls}.reference = staticmethod(jax.jit({cls}.program))\n"),
        ["NumPy baseline returns JAX arrays"]),
    "computes something else than its reference": (
        dict(members=["program = staticmethod(lambda *args: args[0] * 2)"]), ["against NumPy"]),
    "has no setup_cache": (dict(without=["setup_cache"]), ["has no setup_cache"]),
    "has a phase of its own, undocumented and unclassified": (
        dict(members=[UNDOCUMENTED]),
        ["time_run_twice has no docstring", "time_run_twice: tests/test_honest_timing.py does "
         "not classify"]),
}


@pytest.mark.parametrize("how", BROKEN)
def test_the_checks_catch_a_broken_example(fresh, tmp_path, example, how):
    module, source = example
    change, expected = BROKEN[how]
    problems = example_problems(tmp_path, module, broken(source, **change))
    assert [any(e in problem for problem in problems) for e in expected] == [True] * len(
        expected), problems


def test_a_readme_without_one_marked_example_is_a_clear_error(example):
    module, source = example
    block = f"<!-- example: benchmarks/{module}.py -->\n```python\n{source}```\n"
    assert readme_example("intro\n" + block) == example
    for text in ("```python\nimport jax\n```\n", block + block):
        with pytest.raises(AssertionError, match="the guide needs exactly one, marked"):
            readme_example(text)
