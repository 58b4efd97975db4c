import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# The in-process tests measure the CPU, whatever the machine has, simulated as 8 devices (as
# bench_multidevice asks for) before any test starts JAX's backend.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("JAXBENCH_PLATFORM", "cpu")
# Every in-process test shares this process: it keeps all CPUs whatever the profile; the asv
# runs the tests start inherit this too, and tests of pinning set the variable themselves.
os.environ["JAXBENCH_CPU_THREADS"] = "all"
if "--xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               " --xla_force_host_platform_device_count=8").strip()


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


@pytest.fixture(scope="session")
def dispatch_plant(tmp_path_factory):
    """jax 0.10.2 as a release-history repository and, on top of it, a commit that doubles
    every jitted call's dispatch: (work folder, repository, release hash, planted hash). Built
    once for the tests that compare the two (the A/B, and sensitivity's runs, which also reuse the
    builds the A/B leaves in the folder)."""
    from jaxbench_helpers.selftest import sensitivity

    work = tmp_path_factory.mktemp("dispatch-plant")
    repo, release = sensitivity.build_repo(str(work), "0.10.2")
    # the wrapper alone costs about 0.8 us a call; 100% doubles the rest
    return work, repo, release, sensitivity.plant_commit(repo, release, "dispatch", 1.0)


@pytest.fixture
def fresh(profile):
    """Quick sizes (each benchmark object prepares its own state, as asv's one object per
    process does); 64-bit mode off again afterwards, as a new process has it."""
    from jaxbench_helpers.runtime import compat

    profile("quick")
    yield
    compat.set_x64(False)


# The longest test file (its asv runs take a quarter of an hour), first: with the README's
# test workers, a worker starts it at once instead of running it alone at the end.
LONGEST_FIRST = ("test_release_span.py",)


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: item.path.name not in LONGEST_FIRST)
