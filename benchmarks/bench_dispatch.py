"""Dispatch: what it costs Python to hand an already-compiled program to the device.

Every workload here is tiny (device scalars or 8-element vectors), so its two phases measure
JAX's own per-call overhead: ``time_dispatch_100_calls`` (100 calls queued, one wait) and
``time_latency_100_calls`` (100 calls, each waited for). The cases follow JAX's
``api_benchmark.py`` and ``random_benchmark.py``: the jit fast path, argument count, pytree
flattening, static and keyword arguments, Python scalars, host inputs, PRNG keys, jitted
methods, donated buffers, and eager (op-by-op) operations.

Where the timed call differs from ``run(*device inputs)`` (Python scalars, NumPy inputs, typed
keys), the class's ``call_arguments`` names what the dispatch phases pass instead; call styles
the suite's runner cannot express (static, keyword, bound-method calls) go through one plain
Python function that calls a jitted function the way user code does, which adds one Python
call (~0.1 us).
"""

import dataclasses
import functools
import warnings

import jax
import numpy as np
from jax import lax

from jaxbench_helpers.runtime import counts, data, device, monitor, phases, workload


def setup_cache():
    workload.warm_module(__name__)


NUM_ARGS = [10, 100, 1000]
PYTREE_NODES = ["dict", "list", "custom_class", "dataclass"]
SIMPLE_INPUTS = ["device", "host", "python_scalar"]
KEY_KINDS = ["raw", "typed"]

# leaves of the pytree workloads: 8 records of two scalars each
PYTREE_RECORDS = 8
PYTHON_SCALAR = 2.0
STATIC_FACTOR = 3
KEY_SEED = 42


def _scalar(dtype, seed=data.SEED):
    return data.normal((), dtype, seed)


def _scalars(count, dtype, seed=data.SEED):
    """``count`` host 0-d arrays (one seeded vector, split)."""
    return [np.asarray(v) for v in data.normal((count,), dtype, seed)]


def _vector(profile, dtype, seed=data.SEED):
    return data.normal((profile.dispatch_side,), dtype, seed)


# ---- the jit fast path --------------------------------------------------------------------


class JitTrivial(counts.Counts, phases.DispatchPhase, phases.LatencyPhase, workload.Workload):
    """jit of a function that swaps its two arguments (api_benchmark's jit_trivial): the floor
    of a jitted call, no computation, two outputs; once 246 us, fixed to 4 us in 0.4.15."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(x, y):
        return y, x

    @staticmethod
    def reference(x, y):
        return y, x

    def inputs(self, profile, dtype, dispatch):
        return _scalar(dtype), _scalar(dtype, data.SEED + 1)


class JitSimple(phases.DispatchPhase, phases.LatencyPhase, workload.Workload):
    """jit of x + y on scalars (api_benchmark's jit_simple) with y a device array, both NumPy
    arrays (host-to-device transfer inside the call), or a weak-typed Python float."""

    params = [["float32"], SIMPLE_INPUTS]
    param_names = ["dtype", "inputs"]
    # 2: the host inputs at one address offset (call_arguments)
    version = "2"

    @staticmethod
    def program(x, y):
        return x + y

    @staticmethod
    def reference(x, y):
        return x + y

    def inputs(self, profile, dtype, inputs, dispatch):
        return _scalar(dtype), _scalar(dtype, data.SEED + 1)

    def time_latency_100_calls(self, *params):
        """``phases.LatencyPhase``'s 100 calls, each waited for before the next (a method of
        its own for a version of its own: the host inputs moved).

        Timed: per call, dispatch (with the 'host' inputs, their copy to the device), the
        device computing, the wait, and freeing the tiny output. Not timed: compiling and
        placing the inputs (setup), finding the function that waits.
        """
        super().time_latency_100_calls(*params)

    # 3: the host inputs at one address offset (call_arguments); the phase's own is 2
    time_latency_100_calls.version = "3"

    def call_arguments(self, prepared, dtype, inputs):
        if inputs == "host":
            # at one offset from a 64-byte boundary in every process: jax aliases an aligned
            # host array and copies others, ~9% apart over 100 calls (results/LAYOUT-MODES.md)
            return prepared.transfer_args
        if inputs == "python_scalar":
            return prepared.tiny_args[0], PYTHON_SCALAR
        return None


# ---- arguments: count, pytrees, static, keyword ------------------------------------------


class JitManyArgs(phases.DispatchPhase, phases.LatencyPhase, workload.Workload):
    """jit of x + sum(xs) with xs a list of num_args device scalars (api_benchmark's
    jit_simple_many_args): flattening and per-argument checks, linear in num_args."""

    params = [["float32"], NUM_ARGS]
    param_names = ["dtype", "num_args"]

    @staticmethod
    def program(x, xs):
        return x + sum(xs)

    @staticmethod
    def reference(x, xs):
        return x + np.sum(xs, dtype=x.dtype)

    def inputs(self, profile, dtype, num_args, dispatch):
        return _scalar(dtype), _scalars(num_args, dtype, data.SEED + 1)


@jax.tree_util.register_pytree_node_class
class Pair:
    """A user-defined pytree container of two arrays (registered by class decorator)."""

    def __init__(self, a, b):
        self.a = a
        self.b = b

    def tree_flatten(self):
        return (self.a, self.b), None

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        return cls(*children)


@dataclasses.dataclass
class Record:
    """A dataclass of two arrays, registered as a pytree by hand (register_dataclass is newer
    than the oldest supported jax)."""

    a: object
    b: object


jax.tree_util.register_pytree_node(
    Record, lambda r: ((r.a, r.b), None), lambda _, children: Record(*children)
)

_RECORD_MAKERS = {
    "dict": lambda a, b: {"a": a, "b": b},
    "list": lambda a, b: [a, b],
    "custom_class": Pair,
    "dataclass": Record,
}


def _records(node, leaves):
    """A list of records of the kind ``node``, two leaves each."""
    make = _RECORD_MAKERS[node]
    return [make(a, b) for a, b in zip(leaves[::2], leaves[1::2])]


class JitPytreeArgs(phases.DispatchPhase, phases.LatencyPhase, workload.Workload):
    """jit of a device scalar added to every leaf of a list of 8 records (dicts, lists, a
    registered class or a dataclass) of two scalars: pytree flatten in, unflatten out."""

    params = [["float32"], PYTREE_NODES]
    param_names = ["dtype", "node"]

    @staticmethod
    def program(x, records):
        return jax.tree_util.tree_map(lambda leaf: leaf + x, records)

    @staticmethod
    def reference(x, records):
        return jax.tree_util.tree_map(lambda leaf: leaf + x, records)

    def inputs(self, profile, dtype, node, dispatch):
        leaves = _scalars(2 * PYTREE_RECORDS, dtype, data.SEED + 1)
        return _scalar(dtype), _records(node, leaves)


def _scale(x, factor):
    return x * factor


_SCALE_STATIC = jax.jit(_scale, static_argnums=1)


class JitStaticArg(phases.DispatchPhase, phases.LatencyPhase, workload.Workload):
    """A jitted f(x, 3) with the int static (static_argnums): hashing and comparing the static
    argument on every call, through one plain Python call."""

    params = [["float32"]]
    param_names = ["dtype"]
    jit_program = False

    @staticmethod
    def program(x):
        return _SCALE_STATIC(x, STATIC_FACTOR)

    @staticmethod
    def reference(x):
        return x * np.asarray(STATIC_FACTOR, x.dtype)

    def inputs(self, profile, dtype, dispatch):
        return (_scalar(dtype),)


def _add(x, y):
    return x + y


_ADD = jax.jit(_add)


class JitKeywordArgs(phases.DispatchPhase, phases.LatencyPhase, workload.Workload):
    """A jitted x + y called as f(x=x, y=y): the keyword-argument path of a jit call, through
    one plain Python call (compare with JitSimple at inputs=device)."""

    params = [["float32"]]
    param_names = ["dtype"]
    jit_program = False

    @staticmethod
    def program(x, y):
        return _ADD(x=x, y=y)

    @staticmethod
    def reference(x, y):
        return x + y

    def inputs(self, profile, dtype, dispatch):
        return _scalar(dtype), _scalar(dtype, data.SEED + 1)


# ---- PRNG keys ------------------------------------------------------------------------------


class JitRandomKey(phases.DispatchPhase, phases.LatencyPhase, workload.Workload):
    """jit of a step that splits a PRNG key and adds normal noise, called with a typed
    jax.random.key or a raw uint32 PRNGKey (random_benchmark): typed keys once fell off the C++
    fast path (fixed in 0.4.16)."""

    params = [["float32"], KEY_KINDS]
    param_names = ["dtype", "key"]

    @staticmethod
    def program(x, key):
        sample_key, next_key = jax.random.split(key)
        return x + jax.random.normal(sample_key, x.shape, x.dtype), next_key

    def inputs(self, profile, dtype, key, dispatch):
        if key == "typed" and not hasattr(jax.random, "key"):
            raise NotImplementedError("typed PRNG keys need jax.random.key (jax 0.4.16+)")
        # the raw key's bits: what jax.random.PRNGKey(KEY_SEED) gives (threefry)
        return _vector(profile, dtype), np.array([0, KEY_SEED], np.uint32)

    def call_arguments(self, prepared, dtype, key):
        if key == "typed":
            return prepared.tiny_args[0], device.put(jax.random.key(KEY_SEED), prepared.device)
        return None


# ---- eager (op-by-op) ---------------------------------------------------------------------


class EagerUnary(phases.DispatchPhase, phases.LatencyPhase, workload.Workload):
    """lax.neg on a device scalar, not jitted (api_benchmark's eager_unary): one primitive
    through the op-by-op path (-40% when eager became a jit, 2023-11)."""

    params = [["float32"]]
    param_names = ["dtype"]
    jit_program = False

    @staticmethod
    def program(x):
        return lax.neg(x)

    @staticmethod
    def reference(x):
        return -x

    def inputs(self, profile, dtype, dispatch):
        return (_scalar(dtype),)


class EagerBinary(counts.Counts, phases.DispatchPhase, phases.LatencyPhase, workload.Workload):
    """x + y on two device scalars, not jitted (api_benchmark's eager_binary): operator
    overloading, dtype promotion and one primitive, op by op."""

    params = [["float32"]]
    param_names = ["dtype"]
    jit_program = False

    @staticmethod
    def program(x, y):
        return x + y

    @staticmethod
    def reference(x, y):
        return x + y

    def inputs(self, profile, dtype, dispatch):
        return _scalar(dtype), _scalar(dtype, data.SEED + 1)


class EagerIndexing(phases.DispatchPhase, phases.LatencyPhase, workload.Workload):
    """x[3] and x[2:5] on a device vector, not jitted (api_benchmark's repeated static
    indexing and slicing): NumPy-style indexing, two eager operations per call."""

    params = [["float32"]]
    param_names = ["dtype"]
    jit_program = False

    @staticmethod
    def program(x):
        return x[3], x[2:5]

    @staticmethod
    def reference(x):
        return x[3], x[2:5]

    def inputs(self, profile, dtype, dispatch):
        return (_vector(profile, dtype),)


# ---- jitted methods, donated buffers ------------------------------------------------------


class Scaler:
    """A model object whose method is jitted with the instance static (the JAX FAQ's
    functools.partial(jax.jit, static_argnums=0) idiom)."""

    def __init__(self, factor):
        self.factor = factor

    @functools.partial(jax.jit, static_argnums=0)
    def apply(self, x):
        return x * self.factor


_SCALER = Scaler(STATIC_FACTOR)


class JitMethod(phases.DispatchPhase, phases.LatencyPhase, workload.Workload):
    """model.apply(x) with apply a jitted method: binding the method and hashing the static
    instance on every call, through one plain Python call."""

    params = [["float32"]]
    param_names = ["dtype"]
    jit_program = False

    @staticmethod
    def program(x):
        return _SCALER.apply(x)

    @staticmethod
    def reference(x):
        return x * np.asarray(STATIC_FACTOR, x.dtype)

    def inputs(self, profile, dtype, dispatch):
        return (_scalar(dtype),)


# where a backend cannot donate, jax warns when it compiles the program
_DONATION_WARNING = "Some donated buffers were not usable"


class JitDonated(workload.Workload):
    """jit of x + 1 with x donated (donate_argnums), each output fed back as the next input
    (a training-loop state update): donation bookkeeping on every call."""

    params = [["float32"]]
    param_names = ["dtype"]
    jit_options = {"donate_argnums": (0,)}

    def warm_compilation_cache(self):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_DONATION_WARNING)
            super().warm_compilation_cache()

    def setup(self, *params):
        warnings.filterwarnings("ignore", message=_DONATION_WARNING)
        super().setup(*params)
        if not params:
            return  # asv_runner's parameter-free call before setup_cache
        # warming donated the inputs: give the chain (and anything else) live ones
        prepared = self.prepared
        if prepared.args[0].is_deleted():
            prepared.args = self.place(prepared.host_args, prepared.device)
        if prepared.tiny_args[0].is_deleted():
            prepared.tiny_args = self.place(prepared.host_args, prepared.device)

    def place(self, host_args, target):
        # private copies: jax 0.4.26-0.5.2 device_put aliases an aligned NumPy array on CPU, and
        # a donated alias lets XLA write the output over the input the NumPy check then reads
        copies = jax.tree_util.tree_map(lambda a: np.array(a, copy=True), host_args)
        return super().place(copies, target)

    @staticmethod
    def program(x):
        return x + 1

    @staticmethod
    def reference(x):
        return x + np.asarray(1, x.dtype)

    def inputs(self, profile, dtype, dispatch):
        return (_vector(profile, dtype),)

    @monitor.forbid_compile
    def time_dispatch_100_calls(self, *params):
        """100 calls queued back to back, each donating its input and passing its output to
        the next, then one wait for the last output.

        Timed: per call, JAX's overhead with the donation bookkeeping; the device work still
        queued at the end. Not timed: compiling and placing the first input (setup).
        """
        run, (x,) = self.prepared.run, self.prepared.tiny_args
        for _ in range(workload.DISPATCH_CALLS):
            x = run(x)
        self.prepared.tiny_args = (device.block(x),)

    @monitor.forbid_compile
    def time_latency_100_calls(self, *params):
        """100 calls, each donating its input and passing its output to the next, each
        waited for before the next.

        Timed: per call, dispatch with the donation bookkeeping, the device computing, the
        wait. Not timed: compiling and placing the first input (setup), finding the function
        that waits (bound once, before the loop).
        """
        run, (x,), wait = self.prepared.run, self.prepared.tiny_args, device.waiter()
        for _ in range(workload.DISPATCH_CALLS):
            x = wait(run(x))
        self.prepared.tiny_args = (x,)

    # 2: the wait is bound once, as in phases.LatencyPhase
    time_latency_100_calls.version = "2"
