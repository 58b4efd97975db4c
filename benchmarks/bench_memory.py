"""Memory of one model step (the models of bench_models, at the same sizes).

``peakmem_host_step`` is the peak resident memory of the whole benchmark process after one step:
host memory only (the jax import, the runtime, loaded executables, and on CPU the arrays
themselves). ``track_device_peak_bytes`` is the device allocator's peak
(``Device.memory_stats()``), which CPUs do not report: n/a there. Compiled buffer sizes are
``track_temp_bytes`` / ``track_output_bytes`` of the bench_models classes.
"""

from jaxbench_helpers.runtime import device, workload

from . import bench_models


def setup_cache():
    """One warm-up process for every workload class here (asv runs it before any
    benchmark of the module, in the folder they all share)."""
    workload.warm_module(__name__)


class _StepMemory:
    """Memory phases of one model step; subclasses name the model's program and inputs."""

    params = [["float32"]]

    def _step(self):
        device.block(self.prepared.run(*self.prepared.args))

    def peakmem_host_step(self, dtype):
        self._step()

    def track_device_peak_bytes(self, dtype):
        self._step()
        stats = self.prepared.device.memory_stats()
        if not stats or "peak_bytes_in_use" not in stats:
            workload.skip("this device reports no allocator statistics (memory_stats())")
        return stats["peak_bytes_in_use"]

    track_device_peak_bytes.unit = "bytes"


class MLPTrainStep(_StepMemory, workload.Workload):
    """Memory of one SGD step of bench_models.MLPTrainStep: a small model's training loop."""

    program = staticmethod(bench_models.MLPTrainStep.program)
    inputs = bench_models.MLPTrainStep.inputs


class TransformerBlock(_StepMemory, workload.Workload):
    """Memory of bench_models.TransformerBlock's forward and backward pass: attention
    activations kept for the backward pass."""

    program = staticmethod(bench_models.TransformerBlock.program)
    inputs = bench_models.TransformerBlock.inputs


class CNNTrainStep(_StepMemory, workload.Workload):
    """Memory of one SGD step of bench_models.CNNTrainStep: convolution activations and their
    gradients."""

    program = staticmethod(bench_models.CNNTrainStep.program)
    inputs = bench_models.CNNTrainStep.inputs
