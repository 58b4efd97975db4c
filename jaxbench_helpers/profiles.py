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
    # side used by dispatch phases: small enough that execution hides no Python overhead
    dispatch_side: int = 8


PROFILES = {
    "quick": Profile("quick", matrix_side=128),
    "regular": Profile("regular", matrix_side=1000),
    "large": Profile("large", matrix_side=4000),
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
