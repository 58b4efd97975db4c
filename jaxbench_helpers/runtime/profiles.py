"""Size profiles: one environment variable picks how big every workload is.

Sizes never live in asv ``params`` (those must be identical on every machine and version);
they come from the profile, so ``quick`` can smoke-test and ``large`` can fill a GPU with the
same benchmark names.
"""

import os
from dataclasses import dataclass

PROFILE_ENV = "JAXBENCH_PROFILE"
DEFAULT_PROFILE = "regular"


@dataclass(frozen=True)
class Profile:
    name: str
    # side of the square matrices in the seed workloads (the docs' 1000x1000 matmul)
    matrix_side: int
    # asv sampling. rounds: separate processes per benchmark, interleaved, so one unlucky
    # process cannot decide the median; repeat: (min, max samples, max seconds) per round
    rounds: int
    repeat: tuple
    warmup_time: float
    # samples per round of the cold phases (trace, lower, compile), one staged object each
    cold_repeat: tuple
    # side used by dispatch phases: small enough that execution hides no Python overhead
    dispatch_side: int = 8
    # CPUs of the benchmark process unless JAXBENCH_CPU_THREADS says otherwise: "1" pins it to
    # one CPU (cpu_threads.py), which halved the change between same-commit runs on a 2-core VM
    cpu_threads: str = "all"


PROFILES = {
    # a smoke run: one process per benchmark and few samples, for a figure in minutes
    "quick": Profile("quick", matrix_side=128, rounds=1, repeat=(1, 3, 1.0), warmup_time=0.02,
                     cold_repeat=(1, 2, 1.0)),
    # for comparisons: two rounds of 10-25 samples (5-10 for cold phases), on one CPU
    "regular": Profile("regular", matrix_side=1000, rounds=2, repeat=(10, 25, 10.0),
                       warmup_time=0.1, cold_repeat=(5, 10, 10.0), cpu_threads="1"),
    "large": Profile("large", matrix_side=4000, rounds=2, repeat=(1, 5, 10.0),
                     warmup_time=0.1, cold_repeat=(3, 5, 10.0)),
}


class ProfileError(ValueError):
    pass


def current():
    """The profile named by JAXBENCH_PROFILE (default ``regular``)."""
    name = os.environ.get(PROFILE_ENV, DEFAULT_PROFILE).strip() or DEFAULT_PROFILE
    try:
        return PROFILES[name]
    except KeyError:
        raise ProfileError(
            f"{PROFILE_ENV}={name!r} is not a profile; use one of {', '.join(PROFILES)}"
        ) from None
