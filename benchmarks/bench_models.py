"""Realistic models in every phase: what a JAX user's training step or simulation costs.

Each class is one model (an MLP and a CNN SGD step, a transformer block's forward and
backward pass, an RK4 integration of the Lorenz system); its ``time_*`` methods are the phases
it lists (run, dispatch, latency, trace, lower, compile, transfers, NumPy baseline) and its
``track_*`` methods the facts of the compiled program (FLOPs, bytes, instructions, buffers).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxbench_helpers.runtime import counts, data, phases, workload


def setup_cache():
    workload.warm_module(__name__)


# Per model and profile; "tiny" is the dispatch size, small enough that Python overhead shows.
SIZES = {
    # (batch, width): a 3-layer MLP width -> width -> width -> MLP_OUTPUTS
    "mlp": {"tiny": (8, 16), "quick": (64, 64), "regular": (256, 512), "large": (1024, 2048)},
    # (batch, sequence, model width), TRANSFORMER_HEADS heads, MLP 4x wider
    "transformer": {"tiny": (1, 8, 16), "quick": (2, 32, 64), "regular": (4, 128, 128),
                    "large": (8, 512, 1024)},
    # (batch, image side, channels of the first conv; the second has twice as many)
    "cnn": {"tiny": (2, 8, 4), "quick": (8, 16, 8), "regular": (32, 32, 16),
            "large": (256, 64, 64)},
    # (systems, RK4 steps)
    "ode": {"tiny": (8, 10), "quick": (64, 100), "regular": (512, 500),
            "large": (32768, 500)},
}

LEARNING_RATE = 0.05
MLP_OUTPUTS = 10
TRANSFORMER_HEADS = 4
CNN_CLASSES = 10
IMAGE_CHANNELS = 3
# Lorenz-63 with the classic chaotic parameters; 500 steps of dt span 2.5 time units, short
# enough that float32 roundoff in JAX and NumPy stays far from diverging (chaos amplifies it)
LORENZ_SIGMA, LORENZ_RHO, LORENZ_BETA = 10.0, 28.0, 8.0 / 3.0
ODE_DT = 0.005


def _size(model, profile, dispatch):
    return SIZES[model]["tiny" if dispatch else profile.name]


def _weight(shape, dtype, seed, fan_in):
    """A seeded weight matrix scaled by 1/sqrt(fan_in), so activations stay of order one."""
    return data.normal(shape, dtype, seed=data.SEED + seed) / np.asarray(
        math.sqrt(fan_in), dtype)


def _sgd(params, grads):
    return jax.tree_util.tree_map(lambda p, g: p - LEARNING_RATE * g, params, grads)


# ---- MLP ------------------------------------------------------------------------------------

def _mlp_loss(params, x, y):
    h1 = jnp.tanh(x @ params["w1"] + params["b1"])
    h2 = jnp.tanh(h1 @ params["w2"] + params["b2"])
    out = h2 @ params["w3"] + params["b3"]
    return jnp.mean((out - y) ** 2)


class MLPTrainStep(counts.Counts, phases.RunPhase, phases.DispatchPhase, phases.LatencyPhase,
                   phases.StagePhases, phases.TransferPhases, phases.NumpyBaseline,
                   phases.CompiledFacts, workload.Workload):
    """One SGD step of a 3-layer tanh MLP on a regression batch (256x512 regular): the smallest
    realistic training loop, value_and_grad plus a pytree update."""

    params = [["float32"]]
    param_names = ["dtype"]
    # the one model whose compile is counted: ~0.9 G instructions, 20-30 s a sample under
    # callgrind (the others' are billions); 2% moves with the MLIR contexts XLA's compile
    # threads happen to make (docs/counts.md)

    @staticmethod
    def program(x, y, params):
        loss, grads = jax.value_and_grad(_mlp_loss)(params, x, y)
        return _sgd(params, grads), loss

    @staticmethod
    def reference(x, y, params):
        """The same step with hand-written backpropagation."""
        h1 = np.tanh(x @ params["w1"] + params["b1"])
        h2 = np.tanh(h1 @ params["w2"] + params["b2"])
        diff = h2 @ params["w3"] + params["b3"] - y
        d_out = diff * np.asarray(2 / diff.size, diff.dtype)
        d_h2 = (d_out @ params["w3"].T) * (1 - h2 ** 2)
        d_h1 = (d_h2 @ params["w2"].T) * (1 - h1 ** 2)
        grads = {"w1": x.T @ d_h1, "b1": d_h1.sum(axis=0),
                 "w2": h1.T @ d_h2, "b2": d_h2.sum(axis=0),
                 "w3": h2.T @ d_out, "b3": d_out.sum(axis=0)}
        new = {k: params[k] - np.asarray(LEARNING_RATE, x.dtype) * grads[k] for k in params}
        return new, np.mean(diff ** 2)

    def inputs(self, profile, dtype, dispatch):
        batch, width = _size("mlp", profile, dispatch)
        params = {"w1": _weight((width, width), dtype, 1, width),
                  "b1": np.zeros(width, dtype),
                  "w2": _weight((width, width), dtype, 2, width),
                  "b2": np.zeros(width, dtype),
                  "w3": _weight((width, MLP_OUTPUTS), dtype, 3, width),
                  "b3": np.zeros(MLP_OUTPUTS, dtype)}
        return (data.normal((batch, width), dtype),
                data.normal((batch, MLP_OUTPUTS), dtype, seed=data.SEED + 4), params)


# ---- transformer block ----------------------------------------------------------------------

def _layer_norm(x, scale, bias):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + 1e-5) * scale + bias


def _attention(x, p):
    """Causal multi-head self-attention."""
    batch, seq, width = x.shape
    head = width // TRANSFORMER_HEADS

    def heads(t):
        return t.reshape(batch, seq, TRANSFORMER_HEADS, head).transpose(0, 2, 1, 3)

    q, k, v = heads(x @ p["wq"]), heads(x @ p["wk"]), heads(x @ p["wv"])
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head)
    causal = jnp.tril(jnp.ones((seq, seq), dtype=bool))
    weights = jax.nn.softmax(jnp.where(causal, scores, -1e9), axis=-1)
    return (weights @ v).transpose(0, 2, 1, 3).reshape(batch, seq, width) @ p["wo"]


def _transformer_block(x, p):
    """One pre-layer-norm block: x + attention(LN(x)), then + MLP(LN(.)) with a GELU."""
    x = x + _attention(_layer_norm(x, p["ln1_scale"], p["ln1_bias"]), p)
    hidden = jax.nn.gelu(_layer_norm(x, p["ln2_scale"], p["ln2_bias"]) @ p["w_up"] + p["b_up"])
    return x + hidden @ p["w_down"] + p["b_down"]


def _transformer_loss(params, x):
    return jnp.mean(_transformer_block(x, params) ** 2)


class TransformerBlock(counts.Counts, phases.RunPhase, phases.DispatchPhase, phases.LatencyPhase,
                       phases.StagePhases, phases.TransferPhases, phases.CompiledFacts,
                       workload.Workload):
    """Forward and backward pass of one pre-LN transformer block (4 heads, 4x128x128 regular):
    the unit every large model repeats, attention and MLP under value_and_grad."""

    params = [["float32"]]
    param_names = ["dtype"]
    # a compile of this model is billions of instructions, minutes under callgrind
    count_phases = tuple(p for p in counts.DEFAULT_PHASES if p != "time_compile")

    @staticmethod
    def program(x, params):
        return jax.value_and_grad(_transformer_loss)(params, x)

    def inputs(self, profile, dtype, dispatch):
        batch, seq, width = _size("transformer", profile, dispatch)
        wide = 4 * width
        params = {"ln1_scale": np.ones(width, dtype), "ln1_bias": np.zeros(width, dtype),
                  "wq": _weight((width, width), dtype, 11, width),
                  "wk": _weight((width, width), dtype, 12, width),
                  "wv": _weight((width, width), dtype, 13, width),
                  "wo": _weight((width, width), dtype, 14, width),
                  "ln2_scale": np.ones(width, dtype), "ln2_bias": np.zeros(width, dtype),
                  "w_up": _weight((width, wide), dtype, 15, width),
                  "b_up": np.zeros(wide, dtype),
                  "w_down": _weight((wide, width), dtype, 16, wide),
                  "b_down": np.zeros(width, dtype)}
        return (data.normal((batch, seq, width), dtype), params)


# ---- CNN --------------------------------------------------------------------------------------

def _conv(x, w, stride):
    return lax.conv_general_dilated(x, w, (stride, stride), "SAME",
                                    dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _cnn_loss(params, images, labels):
    h = jax.nn.relu(_conv(images, params["conv1"], 1) + params["b1"])
    h = jax.nn.relu(_conv(h, params["conv2"], 2) + params["b2"])
    logits = h.reshape(h.shape[0], -1) @ params["dense"] + params["b3"]
    return -jnp.mean(jnp.sum(labels * jax.nn.log_softmax(logits), axis=-1))


class CNNTrainStep(counts.Counts, phases.RunPhase, phases.DispatchPhase, phases.LatencyPhase,
                   phases.StagePhases, phases.TransferPhases, phases.CompiledFacts,
                   workload.Workload):
    """One SGD step of a small CNN (two 3x3 convolutions, the second strided, and a dense
    softmax layer; 32 RGB 32x32 images regular): convolutions forward and backward."""

    params = [["float32"]]
    param_names = ["dtype"]
    # a compile of this model is billions of instructions, minutes under callgrind; the other
    # models count the transfers
    count_phases = ("time_run", "time_dispatch_100_calls", "time_latency_100_calls",
                    "time_trace", "time_lower")

    @staticmethod
    def program(images, labels, params):
        loss, grads = jax.value_and_grad(_cnn_loss)(params, images, labels)
        return _sgd(params, grads), loss

    def inputs(self, profile, dtype, dispatch):
        batch, side, channels = _size("cnn", profile, dispatch)
        flat = (side // 2) ** 2 * 2 * channels
        params = {"conv1": _weight((3, 3, IMAGE_CHANNELS, channels), dtype, 21,
                                   9 * IMAGE_CHANNELS),
                  "b1": np.zeros(channels, dtype),
                  "conv2": _weight((3, 3, channels, 2 * channels), dtype, 22, 9 * channels),
                  "b2": np.zeros(2 * channels, dtype),
                  "dense": _weight((flat, CNN_CLASSES), dtype, 23, flat),
                  "b3": np.zeros(CNN_CLASSES, dtype)}
        labels = np.eye(CNN_CLASSES, dtype=dtype)[np.arange(batch) % CNN_CLASSES]
        return (data.normal((batch, side, side, IMAGE_CHANNELS), dtype), labels, params)


# ---- ODE ----------------------------------------------------------------------------------------

def _lorenz(xp, state):
    x, y, z = state
    return xp.stack([LORENZ_SIGMA * (y - x), x * (LORENZ_RHO - z) - y, x * y - LORENZ_BETA * z])


def _rk4_step(xp, state, dt):
    """One classic Runge-Kutta step of the Lorenz system, in NumPy or jax.numpy (``xp``)."""
    k1 = _lorenz(xp, state)
    k2 = _lorenz(xp, state + dt / 2 * k1)
    k3 = _lorenz(xp, state + dt / 2 * k2)
    k4 = _lorenz(xp, state + dt * k3)
    return state + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


class ODEIntegration(counts.Counts, phases.RunPhase, phases.DispatchPhase, phases.LatencyPhase,
                     phases.StagePhases, phases.TransferPhases, phases.NumpyBaseline,
                     phases.CompiledFacts, workload.Workload):
    """RK4 integration of a batch of Lorenz-63 systems over a time grid (512 systems, 500
    steps regular) in lax.fori_loop: a simulation loop of small fused steps."""

    params = [["float32"]]
    param_names = ["dtype"]
    # a compile of this model is billions of instructions, minutes under callgrind; the other
    # models count the transfers
    count_phases = ("time_run", "time_dispatch_100_calls", "time_latency_100_calls",
                    "time_trace", "time_lower")

    @staticmethod
    def program(state, times):
        def step(i, s):
            return _rk4_step(jnp, s, times[i + 1] - times[i])

        return lax.fori_loop(0, times.shape[0] - 1, step, state)

    @staticmethod
    def reference(state, times):
        for i in range(times.shape[0] - 1):
            state = _rk4_step(np, state, times[i + 1] - times[i])
        return state

    def inputs(self, profile, dtype, dispatch):
        systems, steps = _size("ode", profile, dispatch)
        # (x, y, z) rows; start near the attractor, spread out by seeded noise
        start = data.normal((3, systems), dtype) + np.asarray([[1.0], [1.0], [25.0]], dtype)
        return (start, (np.arange(steps + 1) * ODE_DT).astype(dtype))
