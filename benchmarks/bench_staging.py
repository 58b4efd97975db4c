"""Staging: tracing, lowering and compiling, cold, and how their cost grows with program size.

Each class is one program; ``time_trace``, ``time_lower`` and ``time_compile``
(``phases.StagePhases``) each stage a never-seen function object with JAX's in-memory caches
cleared and the persistent cache off. ``AddChain`` runs the same program at 10, 100 and 1000
equations, so a stage whose cost turns superlinear in program size shows as a changed ratio
between its rows. The other programs are the shapes that have regressed before: nested jit
calls, scan and while bodies, grad of vmap of remat, an unrolled integrator.
``PersistentCache`` times what a warm on-disk compilation cache saves over a fresh compile.
"""

import atexit
import functools
import os
import shutil
import tempfile

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxbench_helpers.runtime import compat, compile_cache, counts, data, phases, workload


def setup_cache():
    workload.warm_module(__name__)


# elements of the element-wise programs (add chains, Kepler solve, RK4) per profile
ELEMENTS = {"quick": 1024, "regular": 65536, "large": 1 << 20}
# (batch, width, steps) of the scanned MLP
SCAN = {"quick": (8, 32, 16), "regular": (16, 128, 100), "large": (64, 512, 100)}
# trajectories in the Lorenz-63 batch
TRAJECTORIES = {"quick": 8, "regular": 64, "large": 1024}

NESTED_CALLS = 100
# Unrolled steps of the staged loops: program structure, so fixed on every profile. XLA:CPU's
# compile time grows steeply with the Lorenz unroll (about 0.6 s at 10 steps, 1.1 s at 20).
LORENZ_STEPS = 10
RK4_STEPS = 4
RK4_DT = 0.05
VAN_DER_POL_MU = 1.5
KEPLER_MAX_ITERATIONS = 30
# well above float32 rounding of the Newton step, so convergence never depends on noise
KEPLER_TOLERANCE = 1e-4


class AddChain(counts.Counts, phases.StagePhases, workload.Workload):
    """x + y repeated 10, 100 or 1000 times (JAX's tracing_benchmark equation chain): staging
    cost per equation, where a superlinear regression shows first."""

    params = [[10, 100, 1000]]
    param_names = ["equations"]
    # one length: each stage's count grows with the chain, so one row shows a change per
    # equation; the others would triple the child's time. Its compile is left to the seed
    # matmul's and the MLP's counts: under callgrind it costs 30 s a commit
    count_params = [(100,)]
    count_phases = ("time_trace", "time_lower")
    # 2: the length is a static argument, no longer a zero-size third input, so tracing
    # flattens one argument fewer (about 6% less tracing at 10 equations); the lowered and
    # compiled programs are the same, but the version is the class's, so all three phases
    # start a new series
    version = "2"

    def static_arguments(self, profile, equations):
        return {"equations": equations}

    @staticmethod
    def program(x, y, *, equations):
        for _ in range(equations):
            x = x + y
        return x

    @staticmethod
    def reference(x, y, *, equations):
        return x + equations * y

    def inputs(self, profile, equations, dispatch):
        return tuple(data.normal((2, ELEMENTS[profile.name]), "float32"))


def _add(x, y):
    return lax.add(x, y)


# At module level, as users define helpers: its caches live as long as the module, and the
# workload's cache clearing before each sample leaves it as cold as the outer function.
_add_jit = jax.jit(_add)


class NestedJitCalls(phases.StagePhases, workload.Workload):
    """An outer jit calling one module-level jitted add 100 times (JAX's jit_add_chain): tracing
    through nested jit cache hits, which pjit's caching work sped up."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(x, y):
        for _ in range(NESTED_CALLS):
            x = _add_jit(x, y)
        return x

    @staticmethod
    def reference(x, y):
        return x + NESTED_CALLS * y

    def inputs(self, profile, dtype, dispatch):
        return tuple(data.normal((2, ELEMENTS[profile.name]), dtype))


class _ScannedMlp:
    """A recurrent MLP step under lax.scan; shared by ScanMlp and PersistentCache."""

    @staticmethod
    def program(h, xs, w, u, b):
        def step(h, x):
            h = jnp.tanh(h @ w + x @ u + b)
            return h, h.mean(axis=-1)

        return lax.scan(step, h, xs)

    @staticmethod
    def reference(h, xs, w, u, b):
        means = []
        for x in xs:
            h = np.tanh(h @ w + x @ u + b)
            means.append(h.mean(axis=-1))
        return h, np.stack(means)

    def inputs(self, profile, dtype, dispatch):
        batch, width, steps = SCAN[profile.name]
        w, u = data.normal((2, width, width), dtype) / width**0.5
        return (data.normal((batch, width), dtype), data.normal((steps, batch, width), dtype),
                w, u, data.normal((width,), dtype))


class ScanMlp(_ScannedMlp, phases.StagePhases, phases.RunPhase, workload.Workload):
    """A recurrent MLP step under lax.scan (16x128, 100 steps in the regular profile): staging
    a loop body once, however many steps it runs."""

    params = [["float32"]]
    param_names = ["dtype"]


class WhileLoopKepler(phases.StagePhases, phases.RunPhase, workload.Workload):
    """Newton's method on Kepler's equation under lax.while_loop, stopping when every element
    has converged: a data-dependent loop condition."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(mean_anomaly, eccentricity):
        def unconverged(state):
            i, _, step = state
            return (i < KEPLER_MAX_ITERATIONS) & (jnp.max(jnp.abs(step)) > KEPLER_TOLERANCE)

        def newton(state):
            i, anomaly, _ = state
            step = ((anomaly - eccentricity * jnp.sin(anomaly) - mean_anomaly)
                    / (1 - eccentricity * jnp.cos(anomaly)))
            return i + 1, anomaly - step, step

        start = (0, mean_anomaly, jnp.full_like(mean_anomaly, jnp.inf))
        return lax.while_loop(unconverged, newton, start)[1]

    @staticmethod
    def reference(mean_anomaly, eccentricity):
        anomaly = mean_anomaly
        for _ in range(KEPLER_MAX_ITERATIONS):
            step = ((anomaly - eccentricity * np.sin(anomaly) - mean_anomaly)
                    / (1 - eccentricity * np.cos(anomaly)))
            anomaly = anomaly - step
            if np.max(np.abs(step)) <= KEPLER_TOLERANCE:
                break
        return anomaly

    def inputs(self, profile, dtype, dispatch):
        # mean anomalies in (0, 2 pi), eccentricities in (0, 0.9)
        z = np.tanh(data.normal((2, ELEMENTS[profile.name]), dtype))
        return np.pi * (1 + z[0]), 0.45 * (1 + z[1])


def _lorenz63_step(x, y, z):
    """One Euler step of the Lorenz-63 system, one array per coordinate."""
    dt, sigma, beta, rho = 0.01, 10.0, 8.0 / 3.0, 28.0
    return x + sigma * (y - x) * dt, y + ((rho - z) * x - y) * dt, z + (x * y - beta * z) * dt


# module level, like the jitted step of JAX's lorentz63 benchmark
_lorenz63_step_jit = jax.jit(_lorenz63_step)


class GradVmapRemat(phases.StagePhases, phases.RunPhase, workload.Workload):
    """value_and_grad(vmap(checkpoint(10 jitted Lorenz-63 steps))), JAX's lorentz63 case:
    nested transformations over cached jit calls, where tracing once regressed 10x."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(x, y, z):
        def simulate(x, y, z):
            for _ in range(LORENZ_STEPS):
                x, y, z = _lorenz63_step_jit(x, y, z)
            return x, y, z

        def loss(x, y, z):
            final = jax.vmap(jax.checkpoint(simulate))(x, y, z)
            return sum(jnp.square(c).sum() for c in final)

        return jax.value_and_grad(loss, argnums=(0, 1, 2))(x, y, z)

    def inputs(self, profile, dtype, dispatch):
        return tuple(data.normal((3, TRAJECTORIES[profile.name]), dtype))


def _rk4_steps(p, q):
    """Classic RK4 on the Van der Pol oscillator, unrolled. Only arithmetic operators, so the
    same code runs on NumPy arrays as the reference."""

    def field(p, q):
        return q, VAN_DER_POL_MU * (1 - p * p) * q - p

    h = RK4_DT
    for _ in range(RK4_STEPS):
        k1 = field(p, q)
        k2 = field(p + h / 2 * k1[0], q + h / 2 * k1[1])
        k3 = field(p + h / 2 * k2[0], q + h / 2 * k2[1])
        k4 = field(p + h * k3[0], q + h * k3[1])
        p = p + h / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        q = q + h / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
    return p, q


class Rk4Steps(phases.StagePhases, phases.RunPhase, workload.Workload):
    """Four unrolled RK4 steps of the Van der Pol oscillator over a batch of states: an ODE
    integrator, a long chain of fusible element-wise work."""

    params = [["float32"]]
    param_names = ["dtype"]

    program = staticmethod(_rk4_steps)
    reference = staticmethod(_rk4_steps)

    def inputs(self, profile, dtype, dispatch):
        return tuple(data.normal((2, ELEMENTS[profile.name]), dtype))


# ---- the persistent compilation cache ----------------------------------------------------


@functools.cache
def _private_cache_dir():
    """This process's own persistent-cache folder, shared with nothing, removed at exit."""
    path = tempfile.mkdtemp(prefix="jaxbench-staging-cache-")
    atexit.register(shutil.rmtree, path, True)
    return path


def _has_entries(path):
    return any(not name.startswith(".") for name in os.listdir(path))


def _increment(x):
    return x + 1


def _settle_cache_state():
    """JAX decides once, at the next compile, whether the persistent cache is in use (and
    opens it): a tiny compile makes that decision here, outside the timed call."""
    jax.jit(workload.fresh_function(_increment)).lower(np.float32(0)).compile()


@workload.phase_setup
def _open_private_cache(*params):
    """Setup of the load phase only, after the class setup: the cache on and open, so the
    timed call does nothing but look up, read and load."""
    compile_cache.enable(_private_cache_dir())
    _settle_cache_state()


class PersistentCache(_ScannedMlp, workload.Workload):
    """The scanned MLP loaded from JAX's persistent compilation cache vs compiled afresh: what
    a warm on-disk cache saves every new process."""

    params = [["float32"]]
    param_names = ["dtype"]

    def setup(self, *params):
        super().setup(*params)
        if not params:
            return
        self._fill_private_cache()
        # the base refills the "compile" slot (this class has a time_compile phase)
        if not self.prepared.slots.get("load"):
            self.prepared.slots["load"] = [self._fresh_lowered()]
            compat.clear_caches()
        _settle_cache_state()  # off, as for every other compile phase

    def teardown(self, *params):
        # the cache is on only between the load phase's setup and here
        compile_cache.disable()

    def _fresh_lowered(self):
        return jax.jit(self.prepared.fresh_program()).lower(*self.prepared.args)

    def _fill_private_cache(self):
        """Compile once with the cache on; skip where this jax writes nothing to disk."""
        path = _private_cache_dir()
        if _has_entries(path):
            return
        compile_cache.enable(path)
        try:
            self._fresh_lowered().compile()
        finally:
            compile_cache.disable()
        if not _has_entries(path):
            raise NotImplementedError(
                "this jax writes no persistent compilation cache entries for this platform "
                "(CPU: before 0.4.26)"
            )

    @workload.cold
    def time_load_from_persistent_cache(self, *params):
        """``Lowered.compile()`` of a fresh lowering with the persistent cache on and holding
        this program, in-memory caches cleared: a cache hit.

        Timed: the cache lookup (hashing the module), reading the entry from disk and
        loading the executable. Not timed: tracing and lowering, filling the cache and
        opening it (setup), turning it off again (teardown).
        """
        self.prepared.take("load").compile()

    time_load_from_persistent_cache.setup = _open_private_cache

    @workload.cold
    def time_compile(self, *params):
        """``Lowered.compile()`` of a fresh lowering, in-memory caches cleared and the
        persistent cache off: the fresh compile the cache saves.

        Timed: XLA compiling the program once, and loading the executable. Not timed:
        tracing and lowering (setup).
        """
        self.prepared.take("compile").compile()
