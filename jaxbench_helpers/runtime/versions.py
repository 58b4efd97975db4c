"""Version strings of jax, jaxlib, NumPy and Python: one home for reading them.

Used inside benchmark processes (``bench_environment`` records versions), by the asv install
step (which jaxlib a jax commit accepts) and on the host (which releases exist and which
Python can install them). ``packaging`` is used where it is installed, else a plain reading.
"""

import re


class VersionError(ValueError):
    pass


def release(text):
    """Numeric release parts of a version string: '0.4.31.dev20240710+abc' -> (0, 4, 31)."""
    parts = []
    for piece in re.split(r"[.+]", text.strip()):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    return tuple(parts)


def encoded(text):
    """major*10000 + minor*100 + micro, a number asv can plot: '0.10.2' -> 1002."""
    parts = (release(text) + (0, 0, 0))[:3]
    return parts[0] * 10000 + parts[1] * 100 + parts[2]


def version_key(text):
    """Sort key for a release: packaging's Version, else the numeric parts as a tuple."""
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:
        return tuple(int(part) for part in re.findall(r"\d+", text.split("+")[0]))
    try:
        return Version(text)
    except InvalidVersion as err:
        raise VersionError(f"{text!r} is not a version") from err


def is_final(text):
    """True for a final release, False for a pre-release or dev release."""
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:
        return re.fullmatch(r"\d+(\.\d+)*(\.post\d+)?", text) is not None
    try:
        return not Version(text).is_prerelease
    except InvalidVersion:
        return False


def _clause_admits(clause, version):
    match = re.fullmatch(r"(~=|===|==|!=|<=|>=|<|>)\s*(\d+(?:\.\d+)*)(\.\*)?", clause)
    if not match:
        raise VersionError(f"cannot read the Requires-Python clause {clause!r}")
    op, bound, wildcard = match.groups()
    want = [int(p) for p in bound.split(".")]
    have = [int(p) for p in version.split(".")]
    if wildcard:
        same = have[: len(want)] == want
        return same if op in ("==", "===") else not same
    size = max(len(want), len(have))
    want_t, have_t = (tuple(v + [0] * (size - len(v))) for v in (want, have))
    if op == "~=":
        return have_t >= want_t and have[: len(want) - 1] == want[:-1]
    return {
        "==": have_t == want_t, "===": have_t == want_t, "!=": have_t != want_t,
        "<=": have_t <= want_t, ">=": have_t >= want_t, "<": have_t < want_t, ">": have_t > want_t,
    }[op]


def admits(requires_python, python_version):
    """Whether a Requires-Python specifier (None or '' admits all) admits ``python_version``."""
    if not requires_python:
        return True
    try:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
    except ImportError:
        clauses = [c.strip() for c in requires_python.split(",") if c.strip()]
        return all(_clause_admits(c, python_version) for c in clauses)
    try:
        return SpecifierSet(requires_python).contains(python_version, prereleases=True)
    except InvalidSpecifier as err:
        raise VersionError(f"cannot read Requires-Python {requires_python!r}") from err
