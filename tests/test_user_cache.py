"""Every cache jaxbench keeps (counts shim, jax sdists, npm tarballs) lives in one folder that
follows $XDG_CACHE_HOME."""

import os

from jaxbench_helpers.host import dashboard, history
from jaxbench_helpers.runtime import counts, user_cache


def test_every_cache_follows_xdg_cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    own = str(tmp_path / "xdg" / "jaxbench")
    assert user_cache.folder() == own
    assert history.default_cache() == os.path.join(own, "sdists")
    assert os.path.dirname(counts._shim_path()) == own
    # a tarball already in the cache is taken from there, without the registry
    monkeypatch.setenv("npm_config_registry", "http://127.0.0.1:9")
    kept = tmp_path / "xdg" / "jaxbench" / "npm" / "somelib-1.0.0.tgz"
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"kept")
    assert dashboard.tarball("somelib", "1.0.0") == str(kept)


def test_without_xdg_cache_home_the_cache_is_under_the_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert user_cache.folder("npm") == str(tmp_path / ".cache" / "jaxbench" / "npm")
    # the XDG base directory spec: a relative path is invalid and is ignored
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    assert user_cache.folder() == str(tmp_path / ".cache" / "jaxbench")
