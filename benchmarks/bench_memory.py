"""Memory of one model step (the models of bench_models, at the same sizes): the host memory the
step adds at its peak, and the device allocator's peak where the device reports one.

Compiled buffer sizes are ``track_temp_bytes`` / ``track_output_bytes`` of the bench_models
classes.
"""

import ctypes
import gc

from jaxbench_helpers.runtime import device, workload

from . import bench_models


def setup_cache():
    workload.warm_module(__name__)


def _status_bytes(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise NotImplementedError(f"/proc/self/status has no {field}")


def _release_free_heap():
    """Give the pages the C heap holds free back to the system (glibc's ``malloc_trim``): a step
    that reuses them makes no new resident page, so what it adds would follow what the process
    happened to free before (results/HOST-PEAK.md)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        workload.skip("the C library has no malloc_trim (glibc's) to release the heap's free "
                      "pages: what the step adds would depend on what was freed before")
    trim(0)


def _reset_peak():
    """Reset the process's resident peak (VmHWM) to its current size; returns that size."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError as err:
        workload.skip(f"the resident peak cannot be reset here ({err}): Linux only")
    return _status_bytes("VmRSS")


class _StepMemory:
    """Memory phases of one model step; subclasses name the model's program and inputs."""

    def _step(self):
        device.block(self.prepared.run(*self.prepared.args))

    def track_host_step_peak_bytes(self, dtype):
        """Host memory one step adds at its peak: the process's resident peak during the step,
        waited for, less its resident size just before (Linux: the peak is reset through
        /proc/self/clear_refs first). The jax import, the runtime and setup's arrays are in
        both, so they cancel; the step's outputs and temporaries (on CPU: its buffers) are
        what remains. Garbage is collected and the heap's free pages released first, and the
        collector stays off during the step: arrays freed mid-step would lower the resident size
        under the peak, and free pages reused would hide the step's own."""
        collecting = gc.isenabled()
        gc.collect()
        _release_free_heap()
        gc.disable()
        try:
            before = _reset_peak()
            self._step()
            return _status_bytes("VmHWM") - before
        finally:
            if collecting:
                gc.enable()

    track_host_step_peak_bytes.unit = "bytes"
    # 2: garbage collected and the heap's free pages released before the peak reset
    track_host_step_peak_bytes.version = "2"

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
