"""Memory of one model step (the models of bench_models, at the same sizes): the host process's
peak resident memory, and the device allocator's peak where the device reports one.

Compiled buffer sizes are ``track_temp_bytes`` / ``track_output_bytes`` of the bench_models
classes.
"""

from jaxbench_helpers.runtime import device, workload

from . import bench_models


def setup_cache():
    workload.warm_module(__name__)


class _StepMemory:
    """Memory phases of one model step; subclasses name the model's program and inputs."""

    def _step(self):
        device.block(self.prepared.run(*self.prepared.args))

    def peakmem_host_step(self, dtype):
        """Peak resident memory of the whole benchmark process after one step, waited for.

        Measured: the process's lifetime peak (asv reads ru_maxrss), so it includes the jax
        import, the runtime, setup (loading the executable, placing the inputs, checking the
        output is finite) and, on CPU, the arrays themselves. Host memory only."""
        self._step()

    def track_device_peak_bytes(self, dtype):
        """The device allocator's peak bytes in use after one step (``memory_stats()``), n/a
        where the device reports none (CPUs)."""
        self._step()
        stats = self.prepared.device.memory_stats()
        if not stats or "peak_bytes_in_use" not in stats:
            workload.skip("this device reports no allocator statistics (memory_stats())")
        return stats["peak_bytes_in_use"]

    track_device_peak_bytes.unit = "bytes"


class MLPTrainStep(_StepMemory, workload.Workload):
    """Memory of one SGD step of bench_models.MLPTrainStep: a small model's training loop."""

    params = [["float32"]]
    param_names = ["dtype"]

    program = staticmethod(bench_models.MLPTrainStep.program)
    inputs = bench_models.MLPTrainStep.inputs


class TransformerBlock(_StepMemory, workload.Workload):
    """Memory of bench_models.TransformerBlock's forward and backward pass: attention
    activations kept for the backward pass."""

    params = [["float32"]]
    param_names = ["dtype"]

    program = staticmethod(bench_models.TransformerBlock.program)
    inputs = bench_models.TransformerBlock.inputs


class CNNTrainStep(_StepMemory, workload.Workload):
    """Memory of one SGD step of bench_models.CNNTrainStep: convolution activations and their
    gradients."""

    params = [["float32"]]
    param_names = ["dtype"]

    program = staticmethod(bench_models.CNNTrainStep.program)
    inputs = bench_models.CNNTrainStep.inputs
