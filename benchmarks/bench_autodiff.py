"""Automatic differentiation at steady state: the compiled derivative programs, where a
transpose rule that stops fusing or a remat that recomputes too much shows.

Each class is one transformation (grad, jvp, vjp, jacfwd, jacrev, hessian, vmap of a
per-example grad, grad through jax.checkpoint) of a small MLP or tanh layer; ``time_run`` times
the compiled derivative. Every output is checked against a hand-derived NumPy gradient in
setup, so a wrong derivative rule fails before anything is timed.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxbench_helpers.runtime import data, phases, workload


def setup_cache():
    workload.warm_module(__name__)


# regular: each compiled derivative takes ~1-20 ms on a 2-core CPU
SIZES = {
    "quick": {"mlp": (64, 16, 32), "layer": (48, 32), "per_example": (16, 8, 16),
              "deep": (16, 32, 4)},
    "regular": {"mlp": (2048, 128, 256), "layer": (512, 256), "per_example": (256, 32, 64),
                "deep": (256, 256, 8)},
    "large": {"mlp": (8192, 512, 1024), "layer": (2048, 1024), "per_example": (1024, 64, 128),
              "deep": (1024, 1024, 16)},
}
# mlp and per_example: (batch, inputs, hidden units); layer: (outputs, inputs) of tanh(W x);
# deep: (batch, width, layers)


def _size(profile, name):
    return SIZES[profile.name][name]


def _weights(shape, dtype, fan_in, seed):
    """Seeded weights scaled by 1/sqrt(fan_in), so tanh stays out of saturation."""
    return (data.normal(shape, "float64", seed=seed) / np.sqrt(fan_in)).astype(dtype)


def _mlp_params(inputs, hidden, dtype, seed=data.SEED + 1):
    return {"w1": _weights((inputs, hidden), dtype, inputs, seed),
            "b1": _weights((hidden,), dtype, 1, seed + 1),
            "w2": _weights((hidden,), dtype, hidden, seed + 2)}


def _mlp_data(batch, inputs, dtype):
    """Inputs x (batch, inputs) and targets y (batch,)."""
    return data.normal((batch, inputs), dtype), data.normal((batch,), dtype, seed=data.SEED + 9)


# ---- the functions differentiated, and their derivatives by hand --------------------------

def _predict(params, x):
    return jnp.tanh(x @ params["w1"] + params["b1"]) @ params["w2"]


def _loss(params, x, y):
    return 0.5 * jnp.mean((_predict(params, x) - y) ** 2)


def _hidden_np(params, x):
    return np.tanh(x @ params["w1"] + params["b1"])


def _pullback_np(params, x, hidden, cotangent):
    """Gradients of sum(cotangent * predict(params, x)) for every parameter."""
    pre = np.outer(cotangent, params["w2"]) * (1 - hidden * hidden)
    return {"b1": pre.sum(axis=0), "w1": x.T @ pre, "w2": hidden.T @ cotangent}


def _loss_and_grads_np(params, x, y):
    hidden = _hidden_np(params, x)
    residual = hidden @ params["w2"] - y
    loss = np.asarray(0.5 * np.mean(residual * residual), x.dtype)  # NumPy 1 makes float64
    return loss, _pullback_np(params, x, hidden, residual / len(y))


def _layer(w, x):
    return jnp.tanh(w @ x)


def _layer_inputs(profile, dtype):
    outputs, inputs = _size(profile, "layer")
    return _weights((outputs, inputs), dtype, inputs, data.SEED), data.normal((inputs,), dtype)


def _layer_jacobian_np(w, x):
    t = np.tanh(w @ x)
    return (1 - t * t)[:, None] * w


def _deep_loss(ws, x):
    layer = jax.checkpoint(lambda h, w: jnp.tanh(h @ w))
    for w in ws:
        x = layer(x, w)
    return 0.5 * jnp.sum(x * x)


def _deep_grads_np(ws, x):
    states = [x]
    for w in ws:
        states.append(np.tanh(states[-1] @ w))
    grads, upstream = [], states[-1]
    for w, h_in, h_out in reversed(list(zip(ws, states, states[1:]))):
        pre = upstream * (1 - h_out * h_out)
        grads.append(h_in.T @ pre)
        upstream = pre @ w.T
    return np.stack(grads[::-1])


# ---- workloads ----------------------------------------------------------------------------

class Grad(phases.RunPhase, workload.Workload):
    """jax.grad of a one-hidden-layer MLP's mean squared error: the training step's core."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(params, x, y):
        return jax.grad(_loss)(params, x, y)

    @staticmethod
    def reference(params, x, y):
        return _loss_and_grads_np(params, x, y)[1]

    def inputs(self, profile, dtype, dispatch):
        batch, inputs, hidden = _size(profile, "mlp")
        return (_mlp_params(inputs, hidden, dtype),) + _mlp_data(batch, inputs, dtype)


class Jvp(phases.RunPhase, workload.Workload):
    """jax.jvp of the MLP loss along a parameter direction: forward mode, value and
    directional derivative together."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(params, direction, x, y):
        return jax.jvp(lambda p: _loss(p, x, y), (params,), (direction,))

    @staticmethod
    def reference(params, direction, x, y):
        loss, grads = _loss_and_grads_np(params, x, y)
        slope = sum(np.vdot(grads[k], direction[k]) for k in grads)
        return loss, np.asarray(slope, x.dtype)

    def inputs(self, profile, dtype, dispatch):
        batch, inputs, hidden = _size(profile, "mlp")
        params = _mlp_params(inputs, hidden, dtype)
        direction = _mlp_params(inputs, hidden, dtype, seed=data.SEED + 5)
        return (params, direction) + _mlp_data(batch, inputs, dtype)


class Vjp(phases.RunPhase, workload.Workload):
    """jax.vjp of the MLP's predictions, pulled back with a given cotangent: reverse mode
    with the forward output kept."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(params, x, cotangent):
        out, pullback = jax.vjp(lambda p: _predict(p, x), params)
        return out, pullback(cotangent)[0]

    @staticmethod
    def reference(params, x, cotangent):
        hidden = _hidden_np(params, x)
        return hidden @ params["w2"], _pullback_np(params, x, hidden, cotangent)

    def inputs(self, profile, dtype, dispatch):
        batch, inputs, hidden = _size(profile, "mlp")
        return (_mlp_params(inputs, hidden, dtype),) + _mlp_data(batch, inputs, dtype)


class _OfLayer:
    """Workloads differentiating tanh(W x) in x: the same inputs."""

    def inputs(self, profile, dtype, dispatch):
        return _layer_inputs(profile, dtype)


class Jacfwd(_OfLayer, phases.RunPhase, workload.Workload):
    """jax.jacfwd of tanh(W x), 512x256 Jacobian (regular profile): one vmapped JVP per input."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(w, x):
        return jax.jacfwd(_layer, argnums=1)(w, x)

    reference = staticmethod(_layer_jacobian_np)


class Jacrev(_OfLayer, phases.RunPhase, workload.Workload):
    """jax.jacrev of tanh(W x), 512x256 Jacobian (regular profile): one vmapped VJP per output."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(w, x):
        return jax.jacrev(_layer, argnums=1)(w, x)

    reference = staticmethod(_layer_jacobian_np)


class Hessian(_OfLayer, phases.RunPhase, workload.Workload):
    """jax.hessian of sum(tanh(W x)) in x (256x256): forward-over-reverse, vmapped."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(w, x):
        return jax.hessian(lambda x: jnp.sum(_layer(w, x)))(x)

    @staticmethod
    def reference(w, x):
        t = np.tanh(w @ x)
        return (w.T * (-2 * t * (1 - t * t))) @ w


class PerExampleGrads(phases.RunPhase, workload.Workload):
    """jax.vmap of jax.grad over a batch: one MLP gradient per example (DP-SGD, influence
    functions), where vmap must batch the transposed program."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(params, x, y):
        return jax.vmap(jax.grad(_loss), in_axes=(None, 0, 0))(params, x, y)

    @staticmethod
    def reference(params, x, y):
        hidden = _hidden_np(params, x)
        residual = hidden @ params["w2"] - y
        pre = residual[:, None] * params["w2"] * (1 - hidden * hidden)
        return {"b1": pre, "w1": np.einsum("bi,bh->bih", x, pre),
                "w2": hidden * residual[:, None]}

    def inputs(self, profile, dtype, dispatch):
        batch, inputs, hidden = _size(profile, "per_example")
        return (_mlp_params(inputs, hidden, dtype),) + _mlp_data(batch, inputs, dtype)


class RematGrad(phases.RunPhase, workload.Workload):
    """jax.grad through a chain of tanh layers, each under jax.checkpoint: the backward pass
    recomputes each layer instead of storing it (memory for FLOPs)."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(ws, x):
        return jax.grad(_deep_loss)(ws, x)

    reference = staticmethod(_deep_grads_np)

    def inputs(self, profile, dtype, dispatch):
        batch, width, layers = _size(profile, "deep")
        return (_weights((layers, width, width), dtype, width, data.SEED + 1),
                data.normal((batch, width), dtype))
