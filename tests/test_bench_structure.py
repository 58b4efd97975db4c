"""A benchmark reads in one hop: each workload class declares its own parameters and its x64
rule, every benchmark method says what its timer holds, and each module warms itself in a
one-line ``setup_cache`` of its own (asv keys setup_cache by module and line)."""

import ast
import importlib
import inspect
import pkgutil
import textwrap
import types

import pytest
from asv_runner.discovery import _get_benchmark, disc_benchmarks

import benchmarks
from benchmarks import bench_matmul
from jaxbench_helpers.runtime import phases, workload

BENCHMARK_PREFIXES = ("time_", "timeraw_", "track_", "peakmem_", "mem_")


def benchmark_modules():
    return [importlib.import_module(f"benchmarks.{m.name}")
            for m in pkgutil.iter_modules(benchmarks.__path__) if m.name.startswith("bench_")]


def all_workload_classes():
    return [cls for module in benchmark_modules() for cls in workload.workload_classes(module)]


# ---- checks (functions, so each can be shown to catch a planted mistake) ---------------------

def parameter_problems(cls):
    """What a reader of ``cls`` cannot see of its parameters in the class itself."""
    return [f"{cls.__name__} inherits {name}; declare it in the class"
            for name in ("params", "param_names") if name not in vars(cls)]


def x64_problems(cls):
    """64-bit mode must be on exactly for the cases with a float64 parameter value."""
    import itertools

    bench = cls()
    return [f"{cls.__name__}{combo}: x64 is {bench.x64(*combo)}"
            for combo in itertools.product(*cls.params)
            if bench.x64(*combo) != ("float64" in combo)]


def docstring_problems(name, method):
    """A benchmark method must say what its timer holds: time_ and timeraw_ methods with a
    'Timed:' and a 'Not timed:' part."""
    doc = " ".join((inspect.getdoc(method) or "").split())
    if not doc:
        return [f"{name} has no docstring"]
    short = name.rsplit(".", 1)[-1]
    if short.startswith(("time_", "timeraw_")):
        return [f"{name}'s docstring lacks {part!r}"
                for part in ("Timed:", "Not timed:") if part not in doc]
    return []


def setup_cache_problems(module):
    """A module with workload classes needs its own setup_cache, whose one line warms it."""
    if not workload.workload_classes(module):
        return []
    function = vars(module).get("setup_cache")
    if not isinstance(function, types.FunctionType):
        return [f"{module.__name__} has no setup_cache: its workloads would compile in every "
                "benchmark process and be checked against NumPy nowhere before setup"]
    problems = []
    if function.__module__ != module.__name__:
        problems.append(f"{module.__name__}.setup_cache is defined in {function.__module__}: "
                        "asv would run one setup_cache for both modules")
    (node,) = ast.parse(textwrap.dedent(inspect.getsource(function))).body
    expected = ast.dump(ast.parse("workload.warm_module(__name__)").body[0])
    if [ast.dump(statement) for statement in node.body] != [expected]:
        problems.append(f"{module.__name__}.setup_cache is not the one line "
                        "workload.warm_module(__name__)")
    return problems


# ---- the suite ------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", all_workload_classes(), ids=lambda c: c.__qualname__)
def test_every_workload_declares_its_own_parameters_and_x64_rule(cls):
    assert parameter_problems(cls) == []
    assert x64_problems(cls) == []


def test_every_benchmark_says_what_its_timer_holds():
    problems = [problem for bench in disc_benchmarks(benchmarks.__path__[0])
                for problem in docstring_problems(bench.name, bench.func)]
    assert problems == []


@pytest.mark.parametrize("module", benchmark_modules(), ids=lambda m: m.__name__)
def test_every_module_warms_itself_in_a_setup_cache_of_its_own(module, monkeypatch):
    assert setup_cache_problems(module) == []
    classes = workload.workload_classes(module)
    if not classes:
        return
    # what asv sees: every benchmark of the module runs this function, keyed to this file
    for cls in classes:
        for name in dir(cls):
            if name.startswith(BENCHMARK_PREFIXES):
                bench = _get_benchmark(name, module, cls, getattr(cls, name))
                assert bench._setup_cache is module.setup_cache
                line = inspect.getsourcelines(module.setup_cache)[1]
                assert bench.setup_cache_key == f"{module.__name__.split('.', 1)[1]}:{line}"
    warmed = []
    monkeypatch.setattr(workload, "warm_module", warmed.append)
    module.setup_cache()
    assert warmed == [module.__name__]


# ---- the checks catch planted mistakes -------------------------------------------------------

class InheritsItsParameters(bench_matmul.SquareMatmul):
    """A subclass that does not say its parameters."""


class X64Always(bench_matmul.SquareMatmul):
    params = [["float32", "float64"]]
    param_names = ["dtype"]

    def x64(self, dtype):
        return True


class Undocumented(phases.RunPhase, workload.Workload):
    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(x):
        return x

    def inputs(self, profile, dtype, dispatch):
        return ()

    def time_undocumented(self, dtype):
        self.prepared.run()

    def time_half_documented(self, dtype):
        """Timed: the call."""


def _planted_module(tmp_path, monkeypatch, name, source):
    """A benchmark module written to a file and imported, as asv imports the suite's."""
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module(name)


WORKLOAD_CLASS = """
    from jaxbench_helpers.runtime import workload


    class W(workload.Workload):
        params = [["float32"]]
        param_names = ["dtype"]
        program = staticmethod(lambda x: x)

        def inputs(self, profile, dtype, dispatch):
            return ()
"""


def test_the_checks_catch_what_they_look_for(tmp_path, monkeypatch):
    assert parameter_problems(InheritsItsParameters) == [
        "InheritsItsParameters inherits params; declare it in the class",
        "InheritsItsParameters inherits param_names; declare it in the class"]
    assert x64_problems(X64Always) == ["X64Always('float32',): x64 is True"]
    assert docstring_problems("m.Undocumented.time_undocumented",
                              Undocumented.time_undocumented) == [
        "m.Undocumented.time_undocumented has no docstring"]
    assert docstring_problems("m.Undocumented.time_half_documented",
                              Undocumented.time_half_documented) == [
        "m.Undocumented.time_half_documented's docstring lacks 'Not timed:'"]

    missing = _planted_module(tmp_path, monkeypatch, "planted_missing", WORKLOAD_CLASS)
    assert "has no setup_cache" in setup_cache_problems(missing)[0]
    # one function shared by two modules: asv would run it once for both
    shared = _planted_module(tmp_path, monkeypatch, "planted_shared", WORKLOAD_CLASS + """
    from benchmarks.bench_matmul import setup_cache
""")
    assert "is defined in benchmarks.bench_matmul" in setup_cache_problems(shared)[0]
    other = _planted_module(tmp_path, monkeypatch, "planted_other", WORKLOAD_CLASS + """

    def setup_cache():
        workload.warm_module("benchmarks.bench_matmul")
""")
    assert "is not the one line" in setup_cache_problems(other)[0]
