"""Multi-device programs: a sharded matmul, a psum and an all-gather through shard_map, and a
data-parallel training step, each over a mesh of 8 devices.

On CPU the 8 devices are simulated (``--xla_force_host_platform_device_count=8``, added to
XLA_FLAGS in ``setup`` before JAX's backend starts); on a GPU machine they are the real ones.
With fewer devices the benchmarks skip. Inputs are placed on the mesh by each workload's
partition specs, and every program is warmed with exactly those placed inputs. Programs with
collectives list the latency phase alone: more than about 32 of them in flight deadlock
XLA:CPU's simulated devices (seen on 0.4.20 and 0.10.2), so the queued dispatch phase would
hang.
"""

import os

import numpy as np

from jaxbench_helpers.runtime import data, device, phases, platform, workload


def setup_cache():
    workload.warm_module(__name__)


DEVICES = 8
HOST_DEVICES_FLAG = "--xla_force_host_platform_device_count"

# side of the square matrices of the sharded matmul
MATMUL_SIDE = {"quick": 128, "regular": 768, "large": 4096}
# side of the square block each device holds: psum input, and all-gather input (whose output
# is DEVICES times larger on every device)
PSUM_BLOCK = {"quick": 32, "regular": 512, "large": 2048}
GATHER_BLOCK = {"quick": 32, "regular": 128, "large": 512}
# global batch and layer width of the data-parallel MLP step
BATCH = {"quick": 64, "regular": 1024, "large": 16384}
WIDTH = {"quick": 32, "regular": 256, "large": 1024}
LEARNING_RATE = 1.0  # large enough that a wrong gradient moves the parameters visibly


def ask_for_host_devices():
    """Have XLA simulate DEVICES CPU devices; takes effect only if the backend has not started."""
    if platform.selected() != "cpu":
        return
    flags = os.environ.get("XLA_FLAGS", "")
    if HOST_DEVICES_FLAG not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {HOST_DEVICES_FLAG}={DEVICES}".strip()


def mesh_devices():
    """DEVICES devices of the selected platform, or NotImplementedError to skip."""
    import jax

    kind = platform.device().platform
    devices = jax.devices(kind)
    if len(devices) < DEVICES:
        hint = ""
        if kind == "cpu":
            hint = (f": {HOST_DEVICES_FLAG}={DEVICES} must be in XLA_FLAGS before JAX's CPU "
                    "backend starts (it had already started in this process, or the flag "
                    "asks for fewer)")
        raise NotImplementedError(
            f"needs {DEVICES} {kind} devices, this process has {len(devices)}{hint}")
    return devices[:DEVICES]


def mesh(shape, axis_names):
    import jax

    return jax.sharding.Mesh(np.array(mesh_devices()).reshape(shape), axis_names)


def shard_map(fn, on, in_specs, out_specs):
    """``fn`` mapped over the mesh ``on`` by jax.shard_map (0.6.1+), else by
    jax.experimental.shard_map.shard_map: that one is used only before its deprecation (0.8),
    so it never warns. Keywords suit both signatures."""
    import jax

    mapper = getattr(jax, "shard_map", None)
    if mapper is None:
        from jax.experimental.shard_map import shard_map as mapper
    return mapper(fn, mesh=on, in_specs=in_specs, out_specs=out_specs)


class _MeshWorkload(workload.Workload):
    """Base of this module's workloads: the backend gets DEVICES devices, and inputs go onto
    the mesh by the workload's partition specs."""

    mesh_shape = (DEVICES,)
    axis_names = ("devices",)
    # partition specs as axis-name tuples (PartitionSpec needs jax: built in in_shardings):
    # one per program argument (a prefix of its pytree), and one for the output
    in_specs = ()
    out_spec = None

    def in_shardings(self):
        return tuple(self._sharding(spec) for spec in self.in_specs)

    @property
    def jit_options(self):
        options = {"in_shardings": self.in_shardings()}
        if self.out_spec is not None:
            options["out_shardings"] = self._sharding(self.out_spec)
        return options

    def _sharding(self, spec):
        import jax

        return jax.sharding.NamedSharding(
            mesh(self.mesh_shape, self.axis_names), jax.sharding.PartitionSpec(*spec))

    def configure_process(self):
        ask_for_host_devices()

    def place(self, host_args, target):
        return device.put(host_args, self.in_shardings())


class ShardedMatmul(phases.RunPhase, phases.DispatchPhase, phases.LatencyPhase,
                    _MeshWorkload):
    """x @ w on a 4x2 mesh, x split by rows and w by columns: each device computes its own
    output block, no collective, so the dispatch phases time sharded dispatch to 8 devices."""

    params = [["float32"]]
    param_names = ["dtype"]
    mesh_shape = (DEVICES // 2, 2)
    axis_names = ("rows", "cols")
    in_specs = (("rows", None), (None, "cols"))
    out_spec = ("rows", "cols")

    @staticmethod
    def program(x, w):
        import jax.numpy as jnp

        return jnp.dot(x, w)

    @staticmethod
    def reference(x, w):
        return np.dot(x, w)

    def inputs(self, profile, dtype, dispatch):
        side = profile.dispatch_side if dispatch else MATMUL_SIDE[profile.name]
        return (data.normal((side, side), dtype), data.normal((side, side), dtype, data.SEED + 1))


def _blocks(sides, profile, dtype, dispatch):
    """One square block per device, stacked on the leading axis; ``sides`` is a size table."""
    side = profile.dispatch_side if dispatch else sides[profile.name]
    return (data.normal((DEVICES, side, side), dtype),)


class ShardMapPsum(phases.RunPhase, phases.LatencyPhase, _MeshWorkload):
    """psum of one block per device inside shard_map: the all-reduce of data-parallel
    gradients, written by hand; tiny calls measure a collective's round trip."""

    params = [["float32"]]
    param_names = ["dtype"]
    in_specs = (("devices",),)

    @staticmethod
    def program(x):
        import jax
        from jax.sharding import PartitionSpec

        def body(block):
            return jax.lax.psum(block, "devices")

        on = mesh((DEVICES,), ("devices",))
        return shard_map(body, on, PartitionSpec("devices"), PartitionSpec())(x)

    @staticmethod
    def reference(x):
        return x.sum(axis=0, keepdims=True)

    def inputs(self, profile, dtype, dispatch):
        return _blocks(PSUM_BLOCK, profile, dtype, dispatch)


class ShardMapAllGather(phases.RunPhase, _MeshWorkload):
    """all_gather of one block per device inside shard_map: every device ends with all
    blocks (parameter gathering in fully sharded data parallelism)."""

    params = [["float32"]]
    param_names = ["dtype"]
    in_specs = (("devices",),)

    @staticmethod
    def program(x):
        import jax
        from jax.sharding import PartitionSpec

        def body(block):
            return jax.lax.all_gather(block, "devices", tiled=True)

        # each device's output is its gathered copy: out_specs=P() would need shard_map's
        # replication check to infer replication from all_gather, which it cannot
        on = mesh((DEVICES,), ("devices",))
        return shard_map(body, on, PartitionSpec("devices"), PartitionSpec("devices"))(x)

    @staticmethod
    def reference(x):
        return np.concatenate([x] * x.shape[0])

    def inputs(self, profile, dtype, dispatch):
        return _blocks(GATHER_BLOCK, profile, dtype, dispatch)


class DataParallelStep(phases.RunPhase, phases.LatencyPhase, _MeshWorkload):
    """One SGD step of a tanh MLP, batch split over 8 devices, parameters replicated: XLA
    all-reduces the gradients (the data-parallel training loop's step)."""

    params = [["float32"]]
    param_names = ["dtype"]
    in_specs = (("devices",), ("devices",), ())
    out_spec = ()

    @staticmethod
    def program(x, y, params):
        import jax
        import jax.numpy as jnp

        def loss(params):
            w1, b1, w2, b2 = params
            out = jnp.tanh(x @ w1 + b1) @ w2 + b2
            return 0.5 * jnp.sum((out - y) ** 2) / x.shape[0]

        value, grads = jax.value_and_grad(loss)(params)
        step = tuple(p - LEARNING_RATE * g for p, g in zip(params, grads))
        return step, value

    @staticmethod
    def reference(x, y, params):
        w1, b1, w2, b2 = params
        hidden = np.tanh(x @ w1 + b1)
        err = hidden @ w2 + b2 - y
        value = 0.5 * np.sum(err**2) / x.shape[0]
        d_out = err / x.shape[0]
        d_pre = (d_out @ w2.T) * (1 - hidden**2)
        grads = (x.T @ d_pre, d_pre.sum(axis=0), hidden.T @ d_out, d_out.sum(axis=0))
        step = tuple(p - LEARNING_RATE * g for p, g in zip(params, grads))
        return step, np.asarray(value, dtype=x.dtype)

    def inputs(self, profile, dtype, dispatch):
        batch = DEVICES if dispatch else BATCH[profile.name]
        width = profile.dispatch_side if dispatch else WIDTH[profile.name]
        scale = np.asarray(width**-0.5, dtype)

        def normal(shape, offset):
            return data.normal(shape, dtype, data.SEED + offset)

        params = (normal((width, width), 2) * scale, normal((width,), 3) * scale,
                  normal((width, width), 4) * scale, normal((width,), 5) * scale)
        return normal((batch, width), 0), normal((batch, width), 1), params
