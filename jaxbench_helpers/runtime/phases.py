"""The phase mixins: each ``time_*`` method here is exactly what asv times, for every workload
class that lists the mixin among its bases.

A phase reads what ``Workload.setup`` prepared (``self.prepared``, a ``workload.Prepared``): the
program compiled, the inputs on the device, one fresh staged object per cold sample. asv passes
the parameter values to every method; the prepared state already holds the inputs for them, so
the methods take ``*params`` and ignore them. ``monitor.forbid_compile`` wraps a timed method
with two reads of an event counter and fails the benchmark if the call compiled anything.
``CompiledFacts`` adds deterministic ``track_*`` facts of the compiled program.
"""

import re

from . import compat, data, device, monitor
from .workload import DISPATCH_CALLS, cold, cold_reads, phase_setup, skip, warmed_with_setup


class RunPhase:
    @monitor.forbid_compile
    def time_run(self, *params):
        """One call of the compiled program on inputs already on the device, waited for.

        Timed: dispatching the call, the device computing every output, and freeing the
        outputs, dropped as the method returns. Not timed: compiling and placing the inputs
        (setup), reading the outputs back.
        """
        device.block(self.prepared.run(*self.prepared.args))


class DispatchPhase:
    @monitor.forbid_compile
    def time_dispatch_100_calls(self, *params):
        """100 calls of the compiled program on tiny device inputs, queued back to back, then
        one wait for all 100 outputs.

        Timed: JAX's per-call Python and runtime overhead 100 times, the device work of the
        calls still queued at the end, and freeing the 100 tiny outputs.
        Not timed: compiling and placing the inputs (setup).
        """
        run, args = self.prepared.run, self.prepared.tiny_args
        outs = [run(*args) for _ in range(DISPATCH_CALLS)]
        device.block(outs)


class LatencyPhase:
    @monitor.forbid_compile
    def time_latency_100_calls(self, *params):
        """100 calls of the compiled program on tiny device inputs, each waited for before the
        next: the round trip of one call, 100 times.

        Timed: per call, dispatch, the device computing, the wait, and freeing the tiny
        output. Not timed: compiling and placing the inputs (setup), finding the function
        that waits (bound once, before the loop).
        """
        run, args, wait = self.prepared.run, self.prepared.tiny_args, device.waiter()
        for _ in range(DISPATCH_CALLS):
            wait(run(*args))

    # 2: the wait is bound once; looking it up on each call added ~0.3 us, 5-10% of a call
    time_latency_100_calls.version = "2"


class StagePhases:
    @cold
    def time_trace(self, *params):
        """Python -> jaxpr: ``jax.jit(f).trace(*args)`` of a never-seen function object, with
        JAX's in-memory caches cleared (``jax.make_jaxpr`` before jax 0.4.29).

        Timed: tracing the program once. Not timed: building the fresh function and its jit
        wrapper, clearing the caches (setup), lowering, compiling.
        """
        self.prepared.take("trace")()

    @cold
    def time_lower(self, *params):
        """jaxpr -> StableHLO: ``Traced.lower()`` of a fresh trace, caches cleared (skipped
        before jax 0.4.29, which cannot lower without tracing).

        Timed: lowering once. Not timed: the trace it lowers (setup), compiling.
        """
        traced = self.prepared.take("lower")
        if traced is None:
            skip("lowering alone needs jax.jit(f).trace (jax 0.4.29+)")
        traced.lower()

    @cold
    def time_compile(self, *params):
        """StableHLO -> executable: ``Lowered.compile()`` of a fresh lowering, JAX's in-memory
        caches cleared and the persistent compilation cache off.

        Timed: XLA compiling the program once, and loading the executable. Not timed:
        tracing and lowering (setup), running the executable. On a GPU, what XLA kept in
        memory from the process's first compile of the program (docs/phases.md).
        """
        self.prepared.take("compile").compile()


def _device_get(out):
    import jax

    return jax.device_get(out)


class TransferPhases:
    # asv runs a method's own setup after the class's, and only in this method's processes:
    # glibc gave back the heap the class's setup freed and grew it again inside a sample, so a
    # SquareMatmul copy took no page faults in some samples and 945-3875 in others; and asv's
    # warm-up, run without setup, piled up the copies (results/HEAP-FAULTS.md)
    @warmed_with_setup(before=data.keep_heap_resident)
    @monitor.forbid_compile
    def time_to_device(self, *params):
        """``jax.device_put`` of the full-size host inputs, waited for, into memory the C heap
        already holds.

        Timed: the host -> device copy (on CPU, jax may alias the host memory instead).
        Not timed: making the host inputs (setup), freeing the device copies (held until the
        next setup: freeing 64 MB inside the call would time returning pages to the OS), the
        heap policy and the warm-up, a setup before each sample's calls (this method's own
        setup, once per process).
        """
        self.prepared.keep(device.put(self.prepared.transfer_args, self.prepared.device))

    # 2: the copies are freed in the next setup, no longer inside the timed call;
    # 3: the host inputs at one address offset (data.at_fixed_address): an aligned buffer
    # made device_put alias instead of copy, in some processes and not others;
    # 4: the heap kept resident; 5: warmed up by its own setup, a setup before each sample
    time_to_device.version = "5"

    @cold_reads("to_host", _device_get)
    @monitor.forbid_compile
    def time_to_host(self, *params):
        """``jax.device_get`` of an output that setup computed and waited for, never read
        before (a device array caches its host copy after the first read); the mean of
        ``READS_PER_SAMPLE`` calls a sample, each on its own output, after setup read one
        other.

        Timed: the device -> host copy into NumPy arrays. Not timed: computing the outputs
        (setup), freeing them and their host copies (the next setup).
        """
        out = self.prepared.take("to_host")
        self.prepared.keep(out, _device_get(out))

    # 2: the array and its host copy are freed in the next setup, no longer in the timed call;
    # 3: 8 calls a sample, each on its own output, after one read untimed: one call a sample,
    # right after setup computed its output, spread 30-100% within a run
    time_to_host.version = "3"


class ResidentHeapTransferPhases(TransferPhases):
    """The transfer phases, and the class's other phases, in a process whose C heap keeps what
    it frees (``data.keep_heap_resident``) from before the first setup: glibc gave back the
    heap that setup freed and grew it again inside the next sample, so a 1 MB copy took 0 to
    248 page faults a call, by sample (results/HEAP-FAULTS.md). Samples that keep more than the
    touched pool (16 MB copies) still grow the heap now and then, and blocks above 32 MB are
    mmapped, fresh, every time."""

    def configure_process(self):
        # a class's other bases may set process-wide state too (XLA flags)
        super().configure_process()
        data.keep_heap_resident()

    @cold_reads("to_host", _device_get)
    def time_to_host(self, *params):
        """``TransferPhases``' device_get of outputs never read before, into memory the
        heap already holds; the mean of ``READS_PER_SAMPLE`` calls a sample.

        Timed: the device -> host copy into NumPy arrays. Not timed: computing the outputs
        (setup), freeing them and their host copies (the next setup).
        """
        super().time_to_host(*params)

    # 3: the heap kept resident (the phase's own was 2); 4: 8 calls a sample, as the phase's 3
    time_to_host.version = "4"


def _keep_heap_resident(*params):
    data.keep_heap_resident()


class NumpyBaseline:
    def time_numpy(self, *params):
        """The NumPy reference of the same maths on the same host inputs, in the same dtype,
        in a process whose C heap keeps what it frees (``data.keep_heap_resident``).

        Timed: NumPy computing it, with the BLAS threads the profile allows, and freeing its
        result. Not timed: anything JAX does; making the inputs (setup); the heap policy (this
        method's own setup, once per process).
        """
        self.prepared.reference(*self.prepared.host_args)

    # 3 (the pinned layout's is 2): the heap kept resident. glibc gave back the pages of each
    # call's freed outputs and temporaries and the next call faulted them in again: 396-1597
    # faults a call, 14-48% of Svd's, Fft's, Rfft's and MLPTrainStep's time
    # (results/HEAP-FAULTS.md)
    time_numpy.version = "3"
    time_numpy.setup = phase_setup(_keep_heap_resident)


class NumpyBaselinePinnedLayout:
    """For references of one output that take ``out=``: NumPy's loop speed follows where
    malloc put a fresh output and the input, which a process inherits from the heap of its
    fork server, so a plain baseline read two or three speeds from one build
    (results/LAYOUT-MODES.md)."""

    def reference_layout(self, reference, host_args):
        """(inputs, output) of ``time_numpy``, made once per process: the inputs copied onto
        page boundaries, the output half a page past one (``data.OUTPUT_OFFSET``)."""
        import jax

        args = data.on_page_boundaries(host_args)
        out = jax.tree_util.tree_map(
            lambda a: data.empty_at(a.shape, a.dtype, data.PAGE, data.OUTPUT_OFFSET),
            reference(*args))
        return args, out

    def time_numpy(self, *params):
        """The NumPy reference of the same maths on the same host inputs, in the same dtype,
        writing into an output made once.

        Timed: NumPy computing it into that output, with the BLAS threads the profile allows.
        Not timed: anything JAX does; making the inputs and the output (setup, at the same
        offsets in a page in every process: ``reference_layout``).
        """
        self.prepared.reference(*self.prepared.reference_args, out=self.prepared.reference_out)

    # 2 (NumpyBaseline's is 1): the inputs placed and the output preallocated
    time_numpy.version = "2"


def _instruction_count(hlo_text):
    """Instructions in an HLO module's text (one ``name = op(...)`` line each)."""
    return sum(1 for line in hlo_text.splitlines() if _HLO_INSTRUCTION.match(line))


def _equation_count(jaxpr):
    """Equations of a jaxpr, counting those inside sub-jaxprs (jit, scan, cond bodies)."""
    total = 0
    for eqn in jaxpr.eqns:
        total += 1
        for value in eqn.params.values():
            for sub in value if isinstance(value, (list, tuple)) else [value]:
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    total += _equation_count(inner)
    return total


_HLO_INSTRUCTION = re.compile(r"^\s+(ROOT\s+)?%?[\w.\-]+\s*=\s")


class CompiledFacts:
    """Facts of the compiled program that do not jitter, so a change is always real."""

    def track_flops(self, *params):
        """FLOPs of one call, by XLA's cost analysis of the compiled program."""
        return self._cost("flops")

    track_flops.unit = "flops"

    def track_bytes_accessed(self, *params):
        """Bytes one call reads and writes, by XLA's cost analysis of the compiled program."""
        return self._cost("bytes accessed")

    track_bytes_accessed.unit = "bytes"

    def track_hlo_instructions(self, *params):
        """Instructions in the optimized HLO of the compiled program."""
        return _instruction_count(self.prepared.compiled().as_text())

    track_hlo_instructions.unit = "instructions"

    def track_jaxpr_equations(self, *params):
        """Equations of the program's jaxpr, those of nested jaxprs (jit, scan, cond) included."""
        import jax

        return _equation_count(jax.make_jaxpr(self.prepared.program)(*self.prepared.args).jaxpr)

    track_jaxpr_equations.unit = "equations"

    def track_temp_bytes(self, *params):
        """Scratch memory XLA allocates for one call (memory analysis of the executable)."""
        return self._memory("temp_size_in_bytes")

    track_temp_bytes.unit = "bytes"

    def track_output_bytes(self, *params):
        """Memory of one call's outputs (memory analysis of the executable)."""
        return self._memory("output_size_in_bytes")

    track_output_bytes.unit = "bytes"

    def _cost(self, key):
        cost = compat.cost_analysis(self.prepared.compiled())
        if key not in cost:
            skip(f"cost_analysis() of this jax has no {key!r}")
        return cost[key]

    def _memory(self, attribute):
        stats = self.prepared.compiled().memory_analysis()
        value = getattr(stats, attribute, None)
        if value is None or not getattr(stats, "argument_size_in_bytes", 0):
            # jax 0.4.20 reports zero for every buffer, which would read as a real change
            skip(f"memory_analysis() of this jax reports no {attribute}")
        return value
