"""Matrix products: the two workloads of JAX's asynchronous-dispatch documentation, in every
phase (run, dispatch, latency, trace, lower, compile, both transfers, the NumPy baseline), in
float32 and float64."""

import jax.numpy as jnp
import numpy as np

from jaxbench_helpers.runtime import counts, data, phases, workload


def setup_cache():
    workload.warm_module(__name__)


class SquareMatmul(counts.Counts, phases.RunPhase, phases.DispatchPhase, phases.LatencyPhase,
                   phases.StagePhases, phases.TransferPhases, phases.NumpyBaseline,
                   workload.Workload):
    """jnp.dot(x, x) on a square matrix (1000x1000 in the regular profile): the docs' example
    whose dispatch-only timing looked like 269 us."""

    params = [["float32", "float64"]]
    param_names = ["dtype"]
    count_params = [("float32",)]

    def x64(self, dtype):
        return dtype == "float64"

    @staticmethod
    def program(x):
        return jnp.dot(x, x)

    @staticmethod
    def reference(x):
        return np.dot(x, x)

    def inputs(self, profile, dtype, dispatch):
        side = profile.dispatch_side if dispatch else profile.matrix_side
        return (data.normal((side, side), dtype),)


class CenteredGram(phases.RunPhase, phases.DispatchPhase, phases.LatencyPhase,
                   phases.StagePhases, phases.TransferPhases, phases.NumpyBaseline,
                   workload.Workload):
    """x.T @ (x - x.mean(axis=0)): a reduction, a broadcast and a matmul fused in one program
    (the second example of the async-dispatch docs)."""

    params = [["float32", "float64"]]
    param_names = ["dtype"]

    def x64(self, dtype):
        return dtype == "float64"

    @staticmethod
    def program(x):
        return x.T @ (x - x.mean(axis=0))

    @staticmethod
    def reference(x):
        return x.T @ (x - x.mean(axis=0))

    def inputs(self, profile, dtype, dispatch):
        side = profile.dispatch_side if dispatch else profile.matrix_side
        return (data.normal((side, side), dtype),)
