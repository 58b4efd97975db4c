"""Matrix products: the two workloads of JAX's asynchronous-dispatch documentation.

Each class is one workload; its ``time_*`` methods (from ``jaxbench_helpers.workload``) are the
phases: run, dispatch, latency, trace, lower, compile, transfer, and the NumPy baseline.
"""

import jax.numpy as jnp
import numpy as np

from jaxbench_helpers.runtime import phases, workload


def setup_cache():
    """One warm-up process for every workload class here (asv runs it before any
    benchmark of the module, in the folder they all share)."""
    workload.warm_module(__name__)


class SquareMatmul(phases.AllPhases, workload.Workload):
    """jnp.dot(x, x) on a square matrix (1000x1000 in the regular profile): the docs' example
    whose dispatch-only timing looked like 269 us."""

    @staticmethod
    def program(x):
        return jnp.dot(x, x)

    @staticmethod
    def reference(x):
        return np.dot(x, x)

    def inputs(self, profile, dtype, dispatch):
        side = profile.dispatch_side if dispatch else profile.matrix_side
        return (self.normal((side, side), dtype),)


class CenteredGram(phases.AllPhases, workload.Workload):
    """x.T @ (x - x.mean(axis=0)): a reduction, a broadcast and a matmul fused in one program
    (the second example of the async-dispatch docs)."""

    @staticmethod
    def program(x):
        return x.T @ (x - x.mean(axis=0))

    @staticmethod
    def reference(x):
        return x.T @ (x - x.mean(axis=0))

    def inputs(self, profile, dtype, dispatch):
        side = profile.dispatch_side if dispatch else profile.matrix_side
        return (self.normal((side, side), dtype),)
