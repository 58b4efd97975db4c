"""What ran: versions of the libraries under the benchmarks, recorded with every result.

A step on the dashboard that lines up with a jaxlib or NumPy change, not a jax change, is
explained here. Versions are encoded as major*10000 + minor*100 + micro (0.10.2 -> 1002).
"""

import os

from jaxbench_helpers.runtime import platform, versions

# the name the tracks' code uses: asv versions a benchmark by its source text
_encoded = versions.encoded


class Versions:
    """Library versions in the benchmark environment (major*10000 + minor*100 + micro)."""

    unit = "version"

    def track_jax_version(self):
        import jax

        return _encoded(jax.__version__)

    def track_jaxlib_version(self):
        import jaxlib

        return _encoded(jaxlib.__version__)

    def track_numpy_version(self):
        import numpy

        return _encoded(numpy.__version__)


class Threads:
    """CPUs the benchmarks may run on: one where JAXBENCH_CPU_THREADS (or the profile, on CPU)
    pins them."""

    unit = "CPUs"

    def setup(self):
        platform.configure()

    def track_cpus_usable(self):
        return len(os.sched_getaffinity(0))
