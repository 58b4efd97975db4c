"""The layers of jaxbench_helpers import only downwards, and the benchmarks only the runtime.

The order (``jaxbench_helpers/__init__.py``): runtime, install, common, analysis, host,
selftest. A layer may import the layers before it and itself; every import counts, those
inside functions too, because a lazy import is still a dependency.
"""

import ast
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = "jaxbench_helpers"
LAYERS = ("runtime", "install", "common", "analysis", "host", "selftest")


def imported_modules(path, module):
    """Absolute names of the modules that the source at ``path`` imports (``module`` is its
    dotted name, for relative imports)."""
    tree = ast.parse(pathlib.Path(path).read_text(), filename=str(path))
    package = module.rsplit(".", 1)[0] if not str(path).endswith("__init__.py") else module
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module
            # "from pkg import name" may name a submodule: count both
            found.append(prefix)
            found += [f"{prefix}.{alias.name}" for alias in node.names]
    return found


def layer_of(name):
    parts = name.split(".")
    if parts[0] != PACKAGE or len(parts) < 2:
        return None
    return parts[1] if parts[1] in LAYERS else "top"


def violations(path, module):
    """'module imports other' for every import against the layer order."""
    own = layer_of(module)
    bad = []
    for name in imported_modules(path, module):
        other = layer_of(name)
        if other is None or other == own:
            continue
        if other == "top" or own == "top":
            if own != "top" and name != PACKAGE:
                bad.append(f"{module} imports {name} (the package's entry point)")
            continue
        if LAYERS.index(other) > LAYERS.index(own):
            bad.append(f"{module} ({own}) imports {name} ({other}), a later layer")
    return bad


def package_modules():
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield path, ".".join(parts)


def test_every_module_is_in_a_layer():
    loose = [m for _, m in package_modules()
             if layer_of(m) == "top" and m not in (PACKAGE, f"{PACKAGE}.__main__")]
    assert loose == [], f"modules outside every layer: {loose}; put each in one of {LAYERS}"


def test_layers_import_only_earlier_layers():
    bad = [v for path, module in package_modules() for v in violations(path, module)]
    assert bad == []


def test_benchmarks_import_only_the_runtime():
    bad = []
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        for name in imported_modules(path, f"benchmarks.{path.stem}"):
            if name.startswith(PACKAGE) and layer_of(name) != "runtime" and name != PACKAGE:
                bad.append(f"benchmarks/{path.name} imports {name}")
            if name == PACKAGE:
                bad.append(f"benchmarks/{path.name} imports {PACKAGE} itself, not its runtime")
    assert bad == []


def test_runtime_has_no_import_cycle():
    graph = {}
    for path, module in package_modules():
        if layer_of(module) == "runtime":
            graph[module] = {n for n in imported_modules(path, module)
                             if layer_of(n) == "runtime" and n != module}
    graph = {m: {n for n in deps if n in graph} for m, deps in graph.items()}

    def cycle_from(start):
        stack = [(start, [start])]
        while stack:
            node, trail = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    return trail + [start]
                if nxt not in trail:
                    stack.append((nxt, trail + [nxt]))
        return None

    cycles = [c for m in graph if (c := cycle_from(m))]
    assert cycles == []


@pytest.mark.parametrize("layer, source, bad", [
    ("runtime", "from ..host import mainjob\n", True),
    ("runtime", "def f():\n    from ..selftest import plants\n", True),  # lazy still counts
    ("analysis", "from jaxbench_helpers.host import history\n", True),
    ("host", "from ..analysis import report\nfrom ..runtime import profiles\n", False),
    ("common", "from . import paths\n", False),
])
def test_the_checker_sees_a_forbidden_import(tmp_path, layer, source, bad):
    path = tmp_path / "probe.py"
    path.write_text(source)
    found = violations(path, f"{PACKAGE}.{layer}.probe")
    assert bool(found) is bad, found


def test_the_layer_list_matches_the_package():
    folders = sorted(p.name for p in (ROOT / PACKAGE).iterdir()
                     if (p / "__init__.py").exists())
    assert folders == sorted(LAYERS)
    doc = (ROOT / PACKAGE / "__init__.py").read_text()
    assert [layer for layer in LAYERS if f"``{layer}``" in doc] == list(LAYERS)
    assert os.path.basename(__file__) in doc
