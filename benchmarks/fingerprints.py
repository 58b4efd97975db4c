"""Fingerprints of what each benchmark times, checked in beside its asv version.

Most workload classes set ``version`` explicitly, which turns asv's versioning by code hash
off: an edit of a program, a size or a phase would change what old results mean with nothing
to notice it. ``fingerprints.json`` records, per benchmark, its version and a hash of what it
times; tests/test_fingerprints.py fails when a fingerprint changed while the version did not,
and when the file is stale. Regenerate it with::

    .venv/bin/python -m benchmarks.fingerprints

which refuses to record a changed fingerprint under an unchanged version unless the benchmark
is named in ``--same-meaning PATTERN`` (an fnmatch pattern of benchmark names), for edits that
change the code but not what is timed.

A benchmark's fingerprint covers, as syntax trees without docstrings, comments or formatting:
its method; its class and the base classes the suite or ``runtime/phases.py`` defines, without
their other benchmark methods or ``version``; every module-level definition those use, in the
benchmarks package, ``phases.py`` and ``data.py`` (functions, classes, constants, module-level
objects such as jitted functions, registrations), followed transitively; the literal constants
they use from the rest of the runtime (``workload.DISPATCH_CALLS``); and the values in every
profile of the size fields they read (``profile.matrix_side``). The rest of the runtime
(``Prepared``, ``device``, ``monitor``, ``compat``, ...) is machinery every benchmark shares:
not hashed, and versioned by ``Workload.version`` or a phase method's own ``version``.
"""

import ast
import fnmatch
import functools
import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import sys

PACKAGE = __name__.rsplit(".", 1)[0] if "." in __name__ else "benchmarks"
RUNTIME = "jaxbench_helpers.runtime"
HASHED_RUNTIME = (f"{RUNTIME}.phases", f"{RUNTIME}.data")
PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fingerprints.json")
COMMAND = ".venv/bin/python -m benchmarks.fingerprints"
BENCHMARK_PREFIXES = ("time_", "timeraw_", "track_", "peakmem_", "mem_")
# Profile fields that size a workload; the others only set sampling (or the CPUs) and do not
# change what one sample times.
SIZE_FIELDS = ("matrix_side", "dispatch_side")
SAMPLING_FIELDS = ("name", "rounds", "repeat", "warmup_time", "cold_repeat", "cpu_threads")


# ---- syntax trees ------------------------------------------------------------------------

def _strip_docstrings(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                node.body = body[1:] or [ast.Pass()]
    return tree


def _dump(node):
    """A canonical text of a syntax tree: fields that are empty or None are left out, so the
    text does not change with the Python version's ast defaults."""
    if isinstance(node, ast.AST):
        fields = []
        for name, value in ast.iter_fields(node):
            if value is None or value == []:
                continue
            fields.append(f"{name}={_dump(value)}")
        return f"{type(node).__name__}({', '.join(fields)})"
    if isinstance(node, list):
        return "[" + ", ".join(_dump(item) for item in node) + "]"
    return repr(node)


def _hash(text):
    return hashlib.sha256(text.encode()).hexdigest()


def _targets(statement):
    """Names a top-level statement defines."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [statement.name]
    targets = []
    if isinstance(statement, ast.Assign):
        targets = statement.targets
    elif isinstance(statement, ast.AnnAssign):
        targets = [statement.target]
    names = []
    for target in targets:
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                names.append(node.id)
    return names


def _chains(node):
    """Dotted references in ``node``: ['data', 'normal'] for ``data.normal``, ['x'] for x."""
    found = []

    def visit(n):
        if isinstance(n, ast.Attribute):
            parts, inner = [n.attr], n.value
            while isinstance(inner, ast.Attribute):
                parts.append(inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name):
                found.append([inner.id] + parts[::-1])
                return
            visit(inner)
            return
        if isinstance(n, ast.Name):
            found.append([n.id])
            return
        for child in ast.iter_child_nodes(n):
            visit(child)

    visit(node)
    return found


class _Module:
    """One module's top-level definitions and imports, from its source."""

    def __init__(self, name):
        module = importlib.import_module(name)
        self.name = name
        self.is_package = hasattr(module, "__path__")
        source = open(inspect.getsourcefile(module)).read()
        self.definitions = {}
        self.imports = {}
        body = _strip_docstrings(ast.parse(source)).body
        for statement in body:
            for target in _targets(statement):
                self.definitions.setdefault(target, []).append(statement)
            if isinstance(statement, ast.Import):
                for alias in statement.names:
                    if alias.asname:
                        self.imports[alias.asname] = (alias.name, None)
                    else:
                        top = alias.name.split(".")[0]
                        self.imports[top] = (top, None)
            elif isinstance(statement, ast.ImportFrom):
                base = statement.module or ""
                if statement.level:
                    parts = name.split(".")
                    keep = len(parts) - statement.level + (1 if self.is_package else 0)
                    base = ".".join(parts[:keep] + ([statement.module] if statement.module
                                                    else []))
                for alias in statement.names:
                    self.imports[alias.asname or alias.name] = (base, alias.name)
        # module-level calls that change a definition's behaviour (pytree registrations)
        for statement in body:
            if isinstance(statement, ast.Expr):
                for chain in _chains(statement):
                    if chain[0] in self.definitions:
                        self.definitions[chain[0]].append(statement)


def _in_scope(module_name):
    return module_name.split(".")[0] == PACKAGE or module_name.startswith(RUNTIME + ".")


def _hashed(module_name):
    return module_name.split(".")[0] == PACKAGE or module_name in HASHED_RUNTIME


@functools.cache
def _module(name):
    return _Module(name)


@functools.cache
def _is_module(name):
    if not _in_scope(name):
        return False
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _resolve(module_name, chain):
    """The (module, name) definition a dotted reference in ``module_name`` names, if it is one
    this fingerprint covers; else None."""
    if not chain or not _in_scope(module_name):
        return None
    module = _module(module_name)
    head, rest = chain[0], chain[1:]
    if head in module.definitions:
        return module_name, head
    if head not in module.imports:
        return None
    target, attribute = module.imports[head]
    if attribute is None:
        return _resolve(target, rest) if _is_module(target) else None
    if _is_module(f"{target}.{attribute}"):
        return _resolve(f"{target}.{attribute}", rest)
    return _resolve(target, [attribute] + rest)


# ---- pieces ------------------------------------------------------------------------------

def _is_benchmark_name(name):
    return name.startswith(BENCHMARK_PREFIXES)


def _class_parts(statement):
    """A class statement split into its body without benchmark methods and ``version``, and
    each benchmark method with the statements that set its attributes."""
    rest, methods = [], {}
    for node in statement.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _is_benchmark_name(
                node.name):
            methods.setdefault(node.name, []).insert(0, node)
            continue
        targets = node.targets if isinstance(node, ast.Assign) else []
        owner = [t.value.id for t in targets
                 if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)]
        if owner and _is_benchmark_name(owner[0]):
            if targets[0].attr != "version":
                methods.setdefault(owner[0], []).append(node)
            continue
        if "version" in _targets(node):
            continue
        rest.append(node)
    shell = ast.ClassDef(name=statement.name, bases=statement.bases,
                         keywords=statement.keywords, body=rest or [ast.Pass()],
                         decorator_list=statement.decorator_list)
    return shell, methods


def _closure(module_name, name, method):
    """{piece key: syntax-tree text} of the definition ``name`` of ``module_name`` and all it
    uses, with ``method`` the one benchmark method kept in classes."""
    pieces, profile_fields, todo, seen = {}, set(), [(module_name, name)], set()
    while todo:
        key = todo.pop()
        if key in seen:
            continue
        seen.add(key)
        mod, defined = key
        statements = _module(mod).definitions[defined]
        if not _hashed(mod):
            values = [s.value for s in statements if isinstance(s, (ast.Assign, ast.AnnAssign))]
            try:
                [ast.literal_eval(v) for v in values]
            except (ValueError, TypeError, SyntaxError):
                continue  # shared machinery: named by the code that uses it, not hashed
            if values:
                pieces[f"{mod}.{defined}"] = "\n".join(_dump(s) for s in statements)
            continue
        used, texts = [], []
        for statement in statements:
            if isinstance(statement, ast.ClassDef):
                shell, methods = _class_parts(statement)
                texts.append(_dump(shell))
                used.append(shell)
                if method in methods:
                    pieces[f"{mod}.{defined}.{method}"] = "\n".join(
                        _dump(node) for node in methods[method])
                    used.extend(methods[method])
            else:
                texts.append(_dump(statement))
                used.append(statement)
        pieces[f"{mod}.{defined}"] = "\n".join(texts)
        for node in used:
            for chain in _chains(node):
                if chain[-1] in SIZE_FIELDS:
                    profile_fields.add(chain[-1])
                target = _resolve(mod, chain)
                if target is not None:
                    todo.append(target)
    return pieces, profile_fields


def _profile_values(fields):
    from jaxbench_helpers.runtime import profiles

    return {f"profile.{field}": repr({p.name: getattr(p, field)
                                      for p in profiles.PROFILES.values()})
            for field in sorted(fields)}


def _method_origin(cls, method):
    for klass in cls.__mro__:
        if method in vars(klass):
            return klass
    return None


def _counted_phase(cls, method):
    """An instruction count (runtime/counts.py) counts the work of its ``time_*`` phase: its
    fingerprint and version are that phase's."""
    return getattr(getattr(cls, method, None), "counted_phase", None) or method


def benchmark_pieces(module_name, class_name, method):
    """{piece key: text} of everything the fingerprint of one benchmark covers."""
    module = importlib.import_module(module_name)
    if class_name is None:
        pieces, fields = _closure(module_name, method, method)
    else:
        cls = getattr(module, class_name)
        method = _counted_phase(cls, method)
        pieces, fields = _closure(cls.__module__, cls.__qualname__, method)
        origin = _method_origin(cls, method)
        if origin is not None and not _hashed(origin.__module__):
            raise ValueError(f"{module_name}.{class_name}.{method} is defined in "
                             f"{origin.__module__}, which fingerprints do not cover")
    pieces.update(_profile_values(fields))
    return pieces


def _version_owner(module_name, class_name, method):
    """Where asv takes this benchmark's version from: the method's own attribute (which every
    class sharing the method shares) or the class."""
    if class_name is None:
        return f"{module_name}.{method}"
    cls = getattr(importlib.import_module(module_name), class_name)
    method = _counted_phase(cls, method)
    origin = _method_origin(cls, method)
    if origin is not None and "version" in getattr(vars(origin)[method], "__dict__", {}):
        return f"{origin.__module__}.{origin.__qualname__}.{method}"
    return f"{cls.__module__}.{cls.__qualname__}"


def compute(root=None):
    """The suite as asv discovers it: ({'benchmarks': {name: {'version', 'fingerprint'}},
    'pieces': {key: short hash}}, {name: {'pieces': [keys], 'version_from': where}})."""
    from asv_runner.discovery import disc_benchmarks

    root = root or os.path.dirname(os.path.abspath(__file__))
    found, pieces, info = {}, {}, {}
    for bench in disc_benchmarks(root):
        parts = bench.name.split(".")
        module_name = ".".join([PACKAGE] + parts[:-2]) if len(parts) > 2 else (
            f"{PACKAGE}.{parts[0]}")
        class_name = parts[-2] if len(parts) > 2 else None
        own = benchmark_pieces(module_name, class_name, parts[-1])
        hashes = {key: _hash(text) for key, text in own.items()}
        pieces.update(hashes)
        info[bench.name] = {
            "pieces": sorted(hashes),
            "version_from": _version_owner(module_name, class_name, parts[-1])}
        fingerprint = _hash("\n".join(f"{key} {hashes[key]}" for key in sorted(hashes)))
        found[bench.name] = {"version": bench.version, "fingerprint": fingerprint}
    return {"benchmarks": dict(sorted(found.items())),
            "pieces": {key: pieces[key][:16] for key in sorted(pieces)}}, info


# ---- checking ------------------------------------------------------------------------------

def problems(recorded, current, info, same_meaning=()):
    """(versions to bump, staleness) messages of ``recorded`` against ``current``; benchmarks
    matching a ``same_meaning`` pattern may change their fingerprint under the same version."""
    bump, stale = [], []
    then_all, now_all = recorded.get("benchmarks", {}), current["benchmarks"]
    then_pieces = recorded.get("pieces", {})
    for name, now in now_all.items():
        then = then_all.get(name)
        if then is None:
            stale.append(f"{name} is not in the file")
            continue
        if now["fingerprint"] != then["fingerprint"] and now["version"] == then["version"]:
            if any(fnmatch.fnmatchcase(name, p) for p in same_meaning):
                continue
            changed = [key for key in info[name]["pieces"]
                       if then_pieces.get(key) != current["pieces"][key]]
            bump.append(f"what {name} times changed ({', '.join(changed) or 'its pieces'}) "
                        f"but its version is still {now['version']!r}: "
                        f"{_how_to_bump(name, info[name]['version_from'])}, then regenerate "
                        f"with {COMMAND}")
        elif now != then:
            stale.append(f"{name} is recorded as {then}, is now {now}")
    stale += [f"{name} is recorded but no longer exists" for name in then_all if name not in
              now_all]
    if not stale and not bump and then_pieces != current["pieces"]:
        stale.append("the table of pieces differs")
    if stale:
        stale = [f"{COMMAND} must be run again: {message}" for message in stale]
    return bump, stale


def _how_to_bump(name, owner):
    short = owner.split(".", 1)[1] if owner.startswith(PACKAGE + ".") else owner
    if owner.endswith("." + name.rsplit(".", 1)[-1]):
        return (f"its version is the method's own ({short}.version), shared by every class "
                f"with that method: bump that, or give {name.rsplit('.', 1)[0]} a method of "
                "its own with a new version")
    return f"bump `version` of {short}"


def load(path=PATH):
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def write(current, path=PATH):
    with open(path, "w") as f:
        json.dump(dict(current, command=COMMAND), f, indent=1, sort_keys=True)
        f.write("\n")


def main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.fingerprints",
        description="Regenerate benchmarks/fingerprints.json: each benchmark's asv version and "
                    "a hash of what it times.")
    parser.add_argument("--same-meaning", action="append", default=[], metavar="PATTERN",
                        help="benchmarks (fnmatch patterns of names) whose code changed but "
                             "whose timing means the same: record them without a version bump")
    args = parser.parse_args(argv)
    current, info = compute()
    bump, _ = problems(load(), current, info, args.same_meaning)
    if bump:
        print("not written:", *bump, sep="\n  ", file=sys.stderr)
        return 1
    write(current)
    print(f"wrote {PATH}: {len(current['benchmarks'])} benchmarks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
