"""The asv install step: pair the jax commit under test with a jaxlib from the package index.

jax is pure Python and asv builds its wheel from the checked-out commit; jaxlib is compiled
and comes from the index. At any commit jax accepts ``_minimum_jaxlib_version <= jaxlib <=
_version`` (``jax/version.py``). This step reads those numbers from the checkout, picks one
installable jaxlib, installs it with jax's other dependencies, then the jax wheel with
``--no-deps``, then ``jaxbench_helpers`` (editable, so the environment runs this checkout's
helpers). With JAXBENCH_CUDA set (a GPU machine), the CUDA plugin and PJRT packages of exactly
that jaxlib version come too. Last, it writes every shared object in the environment afresh
(``pagecache``: the libraries kept from earlier commits, numpy's among them, and the jaxlib pip
just unpacked then lie in memory alike at every commit). A commit with no installable jaxlib
(or plugin) fails here, so asv skips it and goes on.

Run by asv (see ``install_command`` in asv.conf.json) with the environment's python::

    python -m jaxbench_helpers.install --build-dir DIR --wheel FILE [--dry-run]
"""

import argparse
import os
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass

from ..runtime.versions import release
from . import pagecache

# jaxlib older than this was built against NumPy 1 and breaks under NumPy 2
FIRST_JAXLIB_FOR_NUMPY2 = (0, 4, 26)

# On a GPU machine, JAXBENCH_CUDA names the CUDA flavour of the plugin to install next to
# jaxlib (jax-cuda12-plugin and jax-cuda12-pjrt of exactly jaxlib's version).
CUDA_ENV = "JAXBENCH_CUDA"
CUDA_FLAVOURS = ("", "cuda12", "cuda13")

# the project folder, whose jaxbench_helpers the environment installs (editable)
HELPERS_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class InstallError(RuntimeError):
    pass


def _assignment(source, name):
    match = re.search(rf"^{name}\s*(?::\s*[\w |]+)?=\s*['\"]([^'\"]+)['\"]", source, re.M)
    return match.group(1) if match else None


@dataclass(frozen=True)
class JaxSource:
    """What a jax checkout says about the jaxlib it accepts."""

    version: str  # _version: the release, or the next release during a dev cycle
    minimum_jaxlib: str
    latest_jaxlib_on_pypi: str = None  # setup.py, what upstream CI pairs a dev commit with
    is_release: bool = False  # an sdist bakes _release_version in; a git checkout does not

    @classmethod
    def read(cls, build_dir):
        version_py = os.path.join(build_dir, "jax", "version.py")
        try:
            with open(version_py) as f:
                source = f.read()
        except OSError as err:
            raise InstallError(f"{build_dir} is not a jax checkout: cannot read {err}") from None
        setup_py = os.path.join(build_dir, "setup.py")
        setup = open(setup_py).read() if os.path.exists(setup_py) else ""
        version = _assignment(source, "_version")
        minimum = _assignment(source, "_minimum_jaxlib_version")
        if not version or not minimum:
            raise InstallError(
                f"{version_py} names no _version or _minimum_jaxlib_version; "
                "jaxbench supports jax commits from 2021 on"
            )
        return cls(
            version=version,
            minimum_jaxlib=minimum,
            latest_jaxlib_on_pypi=_assignment(setup, "_latest_jaxlib_version_on_pypi"),
            is_release=_assignment(source, "_release_version") is not None,
        )


def choose_jaxlib(source, available):
    """The jaxlib to pair with ``source`` from the ``available`` versions (strings).

    A release pairs with the jaxlib of the same number, as its users get it. A commit between
    releases pairs with the jaxlib upstream CI used for it (``_latest_jaxlib_version_on_pypi``,
    else the minimum), never a jaxlib released after the commit when an older one fits.
    """
    low, high = release(source.minimum_jaxlib), release(source.version)
    fits = [v for v in available if low <= release(v) <= high]
    if not fits:
        ordered = sorted(available, key=release)
        offer = f"{len(ordered)} versions, {ordered[0]} to {ordered[-1]}" if ordered else "none"
        raise InstallError(
            f"no jaxlib on the package index fits jax {source.version}: it needs "
            f">={source.minimum_jaxlib}, <={source.version}, and this Python can install "
            f"{offer}. asv skips this commit"
        )
    preferred = [source.latest_jaxlib_on_pypi, source.minimum_jaxlib]
    if source.is_release:
        preferred.insert(0, source.version)
    for want in preferred:
        if want in fits:
            return want
    return max(fits, key=release)


def available_versions(package, python=sys.executable):
    """Versions of ``package`` the index offers for this interpreter and platform."""
    cmd = [python, "-m", "pip", "index", "versions", package]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    match = re.search(r"Available versions:\s*(.*)", proc.stdout)
    if proc.returncode != 0 or not match:
        if "No matching distribution" in proc.stderr:
            return []
        raise InstallError(
            f"could not list {package} versions ({' '.join(cmd)} exited {proc.returncode}): "
            f"{proc.stderr.strip()[-500:]}"
        )
    return [v.strip() for v in match.group(1).split(",") if v.strip()]


def wheel_requirements(wheel):
    """jax's own run-time dependencies from the wheel's metadata, jaxlib excluded."""
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = zf.read(name).decode()
    reqs = []
    for line in metadata.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = line.split(":", 1)[1].strip()
        if ";" in req or re.match(r"jaxlib\b", req):
            continue  # extras and environment-marked deps are not part of a CPU install
        reqs.append(req)
    return reqs


def gpu_selection():
    """The CUDA flavour asked for by JAXBENCH_CUDA ('' on a CPU machine)."""
    cuda = os.environ.get(CUDA_ENV, "").strip().lower()
    if cuda not in CUDA_FLAVOURS:
        raise InstallError(f"{CUDA_ENV}={cuda!r} is not one of {', '.join(CUDA_FLAVOURS[1:])} "
                           "(or empty for a CPU-only machine)")
    return cuda


def gpu_requirements(cuda, jaxlib, plugins, pjrts):
    """The CUDA plugin and PJRT packages matching ``jaxlib`` exactly; a mismatched plugin is
    ignored by jax (0.5.3+) or crashes it (older), so a missing one fails the install."""
    missing = [f"jax-{cuda}-{kind}=={jaxlib}" for kind, offered in
               (("plugin", plugins), ("pjrt", pjrts)) if jaxlib not in offered]
    if missing:
        raise InstallError(
            f"jaxlib {jaxlib} needs {' and '.join(missing)} for {CUDA_ENV}={cuda}, and the "
            "package index has no such wheel for this Python. asv skips this commit"
        )
    return [f"jax-{cuda}-plugin[with-cuda]=={jaxlib}", f"jax-{cuda}-pjrt=={jaxlib}"]


def plan(build_dir, wheel, available, cuda="", gpu_available=None):
    """The pip commands that install this commit, as lists of arguments.

    ``gpu_available`` maps 'plugin' and 'pjrt' to the versions the index offers (GPU only).
    """
    source = JaxSource.read(build_dir)
    jaxlib = choose_jaxlib(source, available)
    deps = [f"jaxlib=={jaxlib}"] + (wheel_requirements(wheel) if wheel else [])
    deps += HELPER_REQUIREMENTS
    if cuda:
        gpu_available = gpu_available or {}
        deps += gpu_requirements(cuda, jaxlib, gpu_available.get("plugin", []),
                                 gpu_available.get("pjrt", []))
    if release(jaxlib) < FIRST_JAXLIB_FOR_NUMPY2:
        deps.append("numpy<2")
    pip = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check"]
    commands = [pip + deps]
    if wheel:
        commands.append(pip + ["--no-deps", "--force-reinstall", wheel])
    commands.append(pip + ["--no-deps", "-e", HELPERS_DIR])
    return source, jaxlib, commands


# what the helpers need in a benchmark environment: threadpoolctl gives NumPy's BLAS one thread
# under JAXBENCH_CPU_THREADS=1 (cpu_threads.py)
HELPER_REQUIREMENTS = ["threadpoolctl>=3.1"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", required=True, help="the jax checkout asv built")
    parser.add_argument("--wheel", help="the jax wheel asv built from it")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, install nothing")
    args = parser.parse_args(argv)
    try:
        cuda = gpu_selection()
        gpu_available = {kind: available_versions(f"jax-{cuda}-{kind}")
                         for kind in ("plugin", "pjrt")} if cuda else None
        source, jaxlib, commands = plan(args.build_dir, args.wheel,
                                        available_versions("jaxlib"), cuda, gpu_available)
    except InstallError as err:
        print(f"jaxbench install: {err}", file=sys.stderr)
        return 1
    kind = "release" if source.is_release else "commit between releases"
    print(f"jaxbench install: jax {source.version} ({kind}, accepts jaxlib "
          f">={source.minimum_jaxlib}) -> jaxlib {jaxlib}"
          + (f" with the {cuda} plugin" if cuda else " (CPU only)"), flush=True)
    for cmd in commands:
        print("jaxbench install: " + " ".join(cmd), flush=True)
        if not args.dry_run:
            proc = subprocess.run(cmd)
            if proc.returncode:
                print(f"jaxbench install: pip exited {proc.returncode}", file=sys.stderr)
                return proc.returncode
    if not args.dry_run:
        print(f"jaxbench install: {pagecache.written_afresh(sys.prefix)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
