"""What ran: versions of the libraries under the benchmarks and the CPUs they may use,
recorded with every result.

A step on the dashboard that lines up with a jaxlib or NumPy change, not a jax change, is
explained here. Versions are encoded as major*10000 + minor*100 + micro (0.10.2 -> 1002).
These classes have no ``version`` of their own: each method's is the hash of its source that
asv gave it before the docstrings were written, so the history stays one series.
"""

import os

from jaxbench_helpers.runtime import platform, versions


class Versions:
    """Library versions in the benchmark environment (major*10000 + minor*100 + micro)."""

    unit = "version"

    def track_jax_version(self):
        """jax.__version__ of the benchmark environment, encoded."""
        import jax

        return versions.encoded(jax.__version__)

    track_jax_version.version = ("ad7d9f1dcd50203509d15b323f079ec5"
                                 "5db2b00252ebc5071bb3b6bfabfeeb58")

    def track_jaxlib_version(self):
        """jaxlib.__version__ of the benchmark environment, encoded."""
        import jaxlib

        return versions.encoded(jaxlib.__version__)

    track_jaxlib_version.version = ("20a47eb74a80c4f067b9b5d0060dd3c4"
                                    "2b2f27e302361e9e8aa8c648e119355a")

    def track_numpy_version(self):
        """numpy.__version__ of the benchmark environment, encoded."""
        import numpy

        return versions.encoded(numpy.__version__)

    track_numpy_version.version = ("09f2b724923557a6ec5a0bce0406a607"
                                   "c592e7c018ffd21b3bda3cad772284e5")


class Threads:
    """CPUs the benchmarks may run on: one where JAXBENCH_CPU_THREADS (or the profile, on CPU)
    pins them."""

    unit = "CPUs"

    def setup(self):
        platform.configure()

    def track_cpus_usable(self):
        """CPUs in the benchmark process's affinity mask after the platform setup."""
        return len(os.sched_getaffinity(0))

    track_cpus_usable.version = ("5bfb08e3d759b76a220908d572be1f54"
                                 "d8ed717d7b316e58ecce0c2457d56dc2")
