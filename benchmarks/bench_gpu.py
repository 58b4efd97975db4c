"""Accelerator-facing figures: achieved matmul throughput with FP32, TF32, bfloat16 and float16
products against the device's peak for each (GPU-only, n/a elsewhere), and how far Python can
queue work ahead of the device."""

import statistics
import time

import jax.numpy as jnp

from jaxbench_helpers.runtime import data, device, phases, workload


def setup_cache():
    workload.warm_module(__name__)


# side of the square matmul: large enough to reach a GPU's peak at the large profile
SIDES = {"quick": 256, "regular": 2048, "large": 8192}
# side of the program whose queueing depth is measured: about a millisecond of device work
DEPTH_SIDES = {"quick": 128, "regular": 256, "large": 2048}

# The throughput cases: the dtype of the inputs and the precision jnp.dot is given. On the
# GPUs below, XLA computes float32 products in TF32 on tensor cores for DEFAULT (JAX's default
# for float32) and in FP32 on CUDA cores for HIGHEST (XLA's GPU dot emitters allow TF32 only
# below HIGHEST: IsTf32Allowed in xla/service/gpu/matmul_utils.cc; the Triton emitter only for
# DEFAULT); 16-bit inputs use tensor cores, accumulating in float32, at DEFAULT.
CASES = {
    "float32": ("float32", "highest"),
    "tensorfloat32": ("float32", "default"),
    "bfloat16": ("bfloat16", "default"),
    "float16": ("float16", "default"),
}

# Dense peak FLOP/s by device kind and case: the FP32 figure, and half the data sheets'
# "with sparsity" tensor figures. NVIDIA H100 (SXM5) and H200 (SXM) Tensor Core GPU data
# sheets: FP32 67 TFLOP/s, TF32 tensor 989 with sparsity (494.5 dense), BF16 and FP16 tensor
# 1,979 with sparsity (989.5 dense); the H200 has the H100's compute. NVIDIA A100 (SXM4 80GB)
# data sheet: FP32 19.5, TF32 tensor 312 with sparsity (156 dense), BF16 and FP16 tensor 624
# with sparsity (312 dense).
_HOPPER = {"float32": 67e12, "tensorfloat32": 494.5e12, "bfloat16": 989.5e12,
           "float16": 989.5e12}
PEAK_FLOPS = {
    "NVIDIA H100 80GB HBM3": _HOPPER,
    "NVIDIA H200": _HOPPER,
    "NVIDIA A100-SXM4-80GB": {"float32": 19.5e12, "tensorfloat32": 156e12,
                              "bfloat16": 312e12, "float16": 312e12},
}

TIMED_CALLS = 20


def _median_seconds(call, calls=TIMED_CALLS):
    """Median wall time of ``calls`` waited-for calls (the first, warm-up call is dropped)."""
    device.block(call())
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        device.block(call())
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class MatmulThroughput(phases.RunPhase, workload.Workload):
    """Square matmul on a GPU with FP32, TF32, bfloat16 and float16 products (the precision
    set explicitly): achieved FLOP/s against the device's peak for that arithmetic, where a
    compiler or library regression shows first."""

    params = [list(CASES)]
    param_names = ["precision"]
    # CPU matmul throughput is bench_array_ops' and bench_matmul's
    platforms = ("gpu",)
    # 2: the precision is explicit and names the case (float32 was JAX's default, TF32 on
    # these GPUs, against the FP32 peak; that program is now the tensorfloat32 case)
    version = "2"

    def static_arguments(self, profile, precision):
        return {"precision": CASES[precision][1]}

    @staticmethod
    def program(x, *, precision):
        return jnp.dot(x, x, precision=precision)

    @staticmethod
    def reference(x, *, precision):
        wide = x.astype("float32")
        return (wide @ wide).astype(x.dtype)

    def inputs(self, profile, precision, dispatch):
        side = SIDES[profile.name]
        return (data.normal((side, side), "float32").astype(jnp.dtype(CASES[precision][0])),)

    def track_achieved_flops_per_second(self, precision):
        """2 n^3 over the median time of 20 waited calls of the compiled n x n matmul.

        Timed, per call: dispatch, the device computing, the wait, freeing the output.
        Not timed: compiling and placing the input (setup), one warm-up call.
        """
        side = self.prepared.args[0].shape[0]
        seconds = _median_seconds(lambda: self.prepared.run(*self.prepared.args))
        return 2 * side**3 / seconds

    track_achieved_flops_per_second.unit = "flops/s"

    def track_peak_flops_per_second(self, precision):
        """The dense data-sheet peak of this device for this case's arithmetic (n/a for
        devices not in PEAK_FLOPS)."""
        kind = self.prepared.device.device_kind
        if kind not in PEAK_FLOPS:
            workload.skip(f"no data-sheet peak for {kind!r}")
        return PEAK_FLOPS[kind][precision]

    track_peak_flops_per_second.unit = "flops/s"


class AsyncDispatchDepth(workload.Workload):
    """How many calls Python queues before the first one finishes: the work asynchronous
    dispatch hides (1 where dispatch is synchronous, as on CPU before jax 0.4.33). On CPU the
    runtime lets only so many calls be in flight (32-33 read on jax 0.10.2, at every size),
    and where the computing threads share loaded CPUs with Python the first call can finish
    before the second is made (1): there the figure shows the runtime and the scheduler more
    than the program."""

    params = [["float32"]]
    param_names = ["dtype"]
    max_calls = 1000

    @staticmethod
    def program(x):
        return jnp.tanh(x @ x)

    def inputs(self, profile, dtype, dispatch):
        side = DEPTH_SIDES[profile.name]
        return (data.normal((side, side), dtype) / side,)

    def track_calls_queued_before_first_result(self, dtype):
        """Calls of a ~1 ms program dispatched before the first one's output is ready (at
        most ``max_calls``); all are waited for before returning."""
        run, args = self.prepared.run, self.prepared.args
        first = run(*args)
        if not hasattr(first, "is_ready"):
            device.block(first)
            workload.skip("jax.Array.is_ready is missing in this jax")
        queued, outs = 1, [first]
        while not first.is_ready() and queued < self.max_calls:
            outs.append(run(*args))
            queued += 1
        device.block(outs)
        return queued

    track_calls_queued_before_first_result.unit = "calls"
