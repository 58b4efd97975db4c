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
"""

import os
import shutil
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
