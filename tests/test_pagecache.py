"""Shared objects written afresh: the same bytes, mode and times in a new file, links and other
files left alone, nothing left behind; the command that does it where asv installs nothing."""

import os
import subprocess
import sys

from jaxbench_helpers.common import paths
from jaxbench_helpers.install import pagecache


def test_shared_objects_get_new_files_with_the_same_bytes_mode_and_times(tmp_path):
    pkg = tmp_path / "site-packages" / "pkg"
    pkg.mkdir(parents=True)
    lib, versioned, module = pkg / "libx.so", pkg / "liby.so.1", pkg / "mod.py"
    lib.write_bytes(os.urandom(3 * pagecache.CHUNK // 2))  # more than one chunk
    versioned.write_bytes(b"\x7fELF small")
    module.write_text("x = 1\n")
    os.chmod(lib, 0o751)
    os.utime(lib, (1_000_000_000, 1_000_000_000))
    (pkg / "libx-link.so").symlink_to("libx.so")
    before = {p.name: (p.read_bytes(), os.stat(p)) for p in (lib, versioned, module)}

    files, size = pagecache.write_afresh(str(tmp_path))

    assert (files, size) == (2, len(before["libx.so"][0]) + len(before["liby.so.1"][0]))
    for path in (lib, versioned):
        data, old = before[path.name]
        new = os.stat(path)
        assert path.read_bytes() == data
        assert new.st_ino != old.st_ino  # a new file, so new pages in the page cache
        assert (new.st_mode, new.st_mtime) == (old.st_mode, old.st_mtime)
    assert os.stat(lib).st_mode & 0o777 == 0o751
    assert os.stat(module).st_ino == before["mod.py"][1].st_ino
    assert os.readlink(pkg / "libx-link.so") == "libx.so"
    assert sorted(os.listdir(pkg)) == ["libx-link.so", "libx.so", "liby.so.1", "mod.py"]


def test_a_process_mapping_the_old_file_keeps_its_bytes(tmp_path):
    import mmap

    lib = tmp_path / "libz.so"
    lib.write_bytes(b"A" * 8192)
    with open(lib, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as old:
        pagecache.write_afresh(str(tmp_path))
        lib.write_bytes(b"B" * 8192)  # the new file changes; the mapped old one does not
        assert old[:4] == b"AAAA"


def test_the_names_it_takes_for_shared_objects():
    assert pagecache.is_shared_object("libjax_common.so")
    assert pagecache.is_shared_object("libgfortran.so.5")
    assert pagecache.is_shared_object("_multiarray_umath.cpython-312-x86_64-linux-gnu.so")
    assert not pagecache.is_shared_object("solver.py")


def test_the_log_line_names_how_many_files_and_mebibytes(tmp_path):
    assert pagecache.written_afresh(str(tmp_path)) == "0 shared objects (0 MiB) written afresh"
    (tmp_path / "liba.so").write_bytes(b"\0" * (3 << 20))
    assert pagecache.written_afresh(str(tmp_path)) == "1 shared object (3 MiB) written afresh"


def _afresh(*args):
    return subprocess.run([sys.executable, "-m", "jaxbench_helpers", "afresh", *args],
                          cwd=paths.ROOT, capture_output=True, text=True, timeout=120)


def test_the_afresh_command_rewrites_each_folder_it_is_given(tmp_path):
    env1, env2 = tmp_path / "env" / "a", tmp_path / "env" / "b"
    for env in (env1, env2):
        env.mkdir(parents=True)
        (env / "liba.so").write_bytes(b"\0" * (2 << 20))
    inodes = [os.stat(env / "liba.so").st_ino for env in (env1, env2)]

    proc = _afresh(str(env1), str(env2))

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"jaxbench afresh: {env}: 1 shared object (2 MiB) written afresh" for env in (env1, env2)]
    assert all(os.stat(env / "liba.so").st_ino != ino for env, ino in zip((env1, env2), inodes))


def test_the_afresh_command_names_a_missing_folder_and_rewrites_nothing(tmp_path):
    (tmp_path / "liba.so").write_bytes(b"\0" * 4096)
    inode = os.stat(tmp_path / "liba.so").st_ino
    missing = tmp_path / "no-env"

    proc = _afresh(str(tmp_path), str(missing))

    assert proc.returncode == 2
    assert f"no such folder: {missing}" in proc.stderr and "env_dir" in proc.stderr
    assert proc.stdout == ""
    assert os.stat(tmp_path / "liba.so").st_ino == inode
