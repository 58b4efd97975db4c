"""The phases a workload mixes in: each ``time_*`` method here is exactly what asv times.

``AllPhases`` gives every phase; smaller sets: ``RunPhase``, ``DispatchPhases``, ``StagePhases``
(trace, lower, compile), ``TransferPhases``, ``NumpyBaseline``. ``CompiledFacts`` adds
deterministic ``track_*`` facts of the compiled program. A phase reads what ``setup`` prepared
(``self.prepared``, a ``workload.Prepared``): the program compiled, the inputs on the device,
one fresh staged object per cold sample.
"""

import re

from . import compat, device, monitor
from .workload import DISPATCH_CALLS, cold, skip

# ---- phases -----------------------------------------------------------------------------
# Each method takes *params (asv passes the parameter values) and ignores them: the prepared
# state already holds the inputs for those values.


class RunPhase:
    @monitor.forbid_compile
    def time_run(self, *params):
        device.block(self.prepared.run(*self.prepared.args))


class DispatchPhases:
    @monitor.forbid_compile
    def time_dispatch_100_calls(self, *params):
        run, args = self.prepared.run, self.prepared.tiny_args
        outs = [run(*args) for _ in range(DISPATCH_CALLS)]
        device.block(outs)

    @monitor.forbid_compile
    def time_latency_100_calls(self, *params):
        run, args = self.prepared.run, self.prepared.tiny_args
        for _ in range(DISPATCH_CALLS):
            device.block(run(*args))


class StagePhases:
    @cold
    def time_trace(self, *params):
        self.prepared.take("trace")()

    @cold
    def time_lower(self, *params):
        traced = self.prepared.take("lower")
        if traced is None:
            skip("lowering alone needs jax.jit(f).trace (jax 0.4.29+)")
        traced.lower()

    @cold
    def time_compile(self, *params):
        self.prepared.take("compile").compile()


class TransferPhases:
    @monitor.forbid_compile
    def time_to_device(self, *params):
        device.put(self.prepared.host_args, self.prepared.device)

    @cold
    @monitor.forbid_compile
    def time_to_host(self, *params):
        import jax

        out = self.prepared.take("to_host")
        self.prepared.keep(out, jax.device_get(out))

    # 2: the array and its host copy are freed in the next setup, no longer in the timed call
    time_to_host.version = "2"


class NumpyBaseline:
    def time_numpy(self, *params):
        self.reference(*self.prepared.host_args)


class AllPhases(RunPhase, DispatchPhases, StagePhases, TransferPhases, NumpyBaseline):
    pass


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
        return self._cost("flops")

    track_flops.unit = "flops"

    def track_bytes_accessed(self, *params):
        return self._cost("bytes accessed")

    track_bytes_accessed.unit = "bytes"

    def track_hlo_instructions(self, *params):
        return _instruction_count(self.prepared.compiled().as_text())

    track_hlo_instructions.unit = "instructions"

    def track_jaxpr_equations(self, *params):
        import jax

        return _equation_count(jax.make_jaxpr(self.program)(*self.prepared.args).jaxpr)

    track_jaxpr_equations.unit = "equations"

    def track_temp_bytes(self, *params):
        return self._memory("temp_size_in_bytes")

    track_temp_bytes.unit = "bytes"

    def track_output_bytes(self, *params):
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
