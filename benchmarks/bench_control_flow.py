"""Structured control flow at steady state: the per-iteration cost of lax loops and branches
with tiny bodies, which the XLA:CPU thunk runtime (jaxlib 0.4.32+) made slower.

Each class runs one lax primitive (scan, fori_loop, while_loop, cond, switch) for many
iterations over a 16-wide state, so the time is the runtime's, not the arithmetic's. Each
program is checked against a NumPy loop in setup; a Python loop is no baseline worth timing.
"""

import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxbench_helpers.runtime import data, phases, workload


def setup_cache():
    workload.warm_module(__name__)


# iterations per call; regular: ~2-10 ms on a 2-core CPU (100-500 ns per iteration)
SIZES = {"quick": 64, "regular": 20000, "large": 200000}

# width of the loop state: small, so the loop machinery dominates
WIDTH = 16


def _steps(profile):
    return SIZES[profile.name]


def _state(dtype):
    return data.normal((WIDTH,), dtype, seed=data.SEED + 1)


def _step_inputs(profile, dtype):
    """One scalar input per iteration."""
    return data.normal((_steps(profile),), dtype)


# branch bodies shared by cond and switch; ``xp`` is jnp or np
def _squash(xp, c, x):
    return xp.tanh(c + x)


def _wave(xp, c, x):
    return 0.5 * xp.sin(c) - x


def _decay(xp, c, x):
    return 0.9 * c + 0.1 * x


BRANCHES = (_squash, _wave, _decay)


class Scan(phases.RunPhase, workload.Workload):
    """lax.scan of an RNN-like step h = tanh(h/2 + x_t), stacking every state."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(h, xs):
        def step(h, x):
            h = jnp.tanh(0.5 * h + x)
            return h, h

        return lax.scan(step, h, xs)

    @staticmethod
    def reference(h, xs):
        states = []
        for x in xs:
            h = np.tanh(0.5 * h + x)
            states.append(h)
        return h, np.stack(states)

    def inputs(self, profile, dtype, dispatch):
        return _state(dtype), data.normal((_steps(profile), WIDTH), dtype)


class ForiLoop(phases.RunPhase, workload.Workload):
    """lax.fori_loop with a static trip count (JAX lowers it to a scan) reading xs[i] each
    iteration."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(c, xs):
        return lax.fori_loop(0, xs.shape[0], lambda i, c: _wave(jnp, c, xs[i]), c)

    @staticmethod
    def reference(c, xs):
        for x in xs:
            c = _wave(np, c, x)
        return c

    def inputs(self, profile, dtype, dispatch):
        return _state(dtype), _step_inputs(profile, dtype)


class WhileLoop(phases.RunPhase, workload.Workload):
    """lax.while_loop whose trip count is a device value, so XLA cannot know or unroll it."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(c, steps):
        def body(state):
            i, c = state
            return i + 1, _wave(jnp, c, 0.25)

        return lax.while_loop(lambda state: state[0] < steps, body, (jnp.int32(0), c))[1]

    @staticmethod
    def reference(c, steps):
        for _ in range(int(steps)):
            c = _wave(np, c, np.float32(0.25))
        return c

    def inputs(self, profile, dtype, dispatch):
        return _state(dtype), np.array(_steps(profile), np.int32)


class Cond(phases.RunPhase, workload.Workload):
    """lax.cond inside a scan: each iteration takes one of two branches by the sign of its
    input (a real conditional per step, not a select)."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(c, xs):
        def step(c, x):
            c = lax.cond(x > 0, lambda c: _squash(jnp, c, x), lambda c: _wave(jnp, c, x), c)
            return c, c

        return lax.scan(step, c, xs)

    @staticmethod
    def reference(c, xs):
        states = []
        for x in xs:
            c = _squash(np, c, x) if x > 0 else _wave(np, c, x)
            states.append(c)
        return c, np.stack(states)

    def inputs(self, profile, dtype, dispatch):
        return _state(dtype), _step_inputs(profile, dtype)


class Switch(phases.RunPhase, workload.Workload):
    """lax.switch inside a scan: each iteration takes one of three branches by an index
    input."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(c, xs, branch):
        def step(c, x_and_branch):
            x, index = x_and_branch
            c = lax.switch(index, [lambda c, f=f: f(jnp, c, x) for f in BRANCHES], c)
            return c, c

        return lax.scan(step, c, (xs, branch))

    @staticmethod
    def reference(c, xs, branch):
        states = []
        for x, index in zip(xs, branch):
            c = BRANCHES[index](np, c, x)
            states.append(c)
        return c, np.stack(states)

    def inputs(self, profile, dtype, dispatch):
        steps = _steps(profile)
        # a seeded, uniform choice among the branches per iteration
        branch = np.argmax(data.normal((steps, len(BRANCHES)), "float64"), axis=1)
        return _state(dtype), _step_inputs(profile, dtype), branch.astype(np.int32)

