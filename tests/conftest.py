import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# The in-process tests measure the CPU, whatever the machine has.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("JAXBENCH_PLATFORM", "cpu")


@pytest.fixture
def profile(monkeypatch):
    """Select a size profile for the duration of a test."""

    def select(name):
        monkeypatch.setenv("JAXBENCH_PROFILE", name)

    return select


@pytest.fixture(scope="session")
def sdist_cache(tmp_path_factory):
    """One download of each jax sdist per test session."""
    return str(tmp_path_factory.mktemp("sdists"))
