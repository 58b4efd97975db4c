"""Rewrite an environment's shared objects so two environments' libraries lie in memory alike.

The pages of a shared object that a process executes are the file's pages in the kernel's page
cache. A file just written sits there in large folios, physically contiguous runs of pages,
which break up over minutes; a file read back after the kernel let it go sits in single pages
scattered over memory. XLA's compiler runs through tens of megabytes of jaxlib's code, and on
an AMD EPYC VM it compiled a 1000x1000 matmul 8-13% faster from contiguous pages than from
scattered ones, whichever environment held which (results/PAGE-CACHE.md). An A/B whose base
environment was installed yesterday and whose head was installed a minute ago reads that as the
head compiling faster. Writing every shared object of both environments afresh just before
they are compared puts both in the same state; the install step does the same after each
install, and ``calibrate`` before each run of an environment installed earlier.

Where asv installs nothing, nothing writes it afresh: ``asv run`` of a commit already installed
(``--append-samples``, a rerun of a failed commit) and ``asv run --python=same``. For those::

    python3 -m jaxbench_helpers afresh .asv/env
"""

import argparse
import os
import shutil
import sys
import tempfile

CHUNK = 16 << 20  # large writes: the page cache takes them in large folios


def is_shared_object(name):
    return name.endswith(".so") or ".so." in name


def write_afresh(root):
    """Copy every shared object under ``root`` to a new file beside it and rename that over it
    (same bytes, mode and times; symbolic links left alone). Processes that have the old file
    mapped keep it. Returns (files, bytes) rewritten."""
    files = size = 0
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            if not is_shared_object(name) or os.path.islink(path) or not os.path.isfile(path):
                continue
            fd, fresh = tempfile.mkstemp(dir=folder, prefix=f".{name}.")
            try:
                # read and write, not copyfile: its sendfile may leave the copy in small pages
                with os.fdopen(fd, "wb") as out, open(path, "rb") as old:
                    shutil.copyfileobj(old, out, CHUNK)
                shutil.copystat(path, fresh)
                os.replace(fresh, path)
            except BaseException:
                if os.path.exists(fresh):
                    os.unlink(fresh)
                raise
            files += 1
            size += os.path.getsize(path)
    return files, size


def written_afresh(root):
    """``write_afresh(root)``, said in words for a log line."""
    files, size = write_afresh(root)
    noun = "shared object" if files == 1 else "shared objects"
    return f"{files} {noun} ({size / 2**20:.0f} MiB) written afresh"


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python3 -m jaxbench_helpers afresh",
        description="Write every shared object under each DIR afresh, before timing an "
                    "environment asv will not install into (a commit already installed, "
                    "--python=same). Run it while nothing installs into DIR.")
    parser.add_argument("dirs", nargs="+", metavar="DIR",
                        help="an environment folder: asv.conf.json's env_dir (.asv/env), one "
                             "environment in it, or the sys.prefix of the Python --python=same "
                             "runs")
    args = parser.parse_args(argv)
    missing = [d for d in args.dirs if not os.path.isdir(d)]
    if missing:
        print(f"jaxbench afresh: no such folder: {', '.join(missing)}; give an environment "
              "folder (asv.conf.json's env_dir, .asv/env unless changed)", file=sys.stderr)
        return 2
    for folder in args.dirs:
        print(f"jaxbench afresh: {folder}: {written_afresh(folder)}", flush=True)
    return 0
