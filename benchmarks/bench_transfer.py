"""Host <-> device transfers: one float32 array from 1 KB to 64 MB each way, a pytree of 100
small arrays, and the bandwidth of each direction.

Here the byte size is the parameter on purpose: it is the workload, the same on every profile.
Every output read back is a freshly computed device array (a device array caches its host copy
after the first conversion). On CPU, JAX may alias host memory instead of copying (np.asarray of
a CPU array does; device_put did up to some releases), so CPU figures show JAX's overhead and
GPU figures the bus.
"""

import statistics
import time

import numpy as np

from jaxbench_helpers.runtime import counts, data, device, monitor, phases, workload


def setup_cache():
    workload.warm_module(__name__)


BYTES = {"1KB": 1 << 10, "64KB": 64 << 10, "1MB": 1 << 20, "16MB": 16 << 20, "64MB": 64 << 20}
DTYPE = "float32"
PYTREE_LEAVES = 100
PYTREE_LEAF_SHAPE = (16, 16)  # 1 KB of float32, about a small layer's bias or norm scale
# blocking transfers per bandwidth figure; the median of them is reported
BANDWIDTH_TRANSFERS = 5


def _one_array(size):
    """The seeded float32 array of ``size`` (a key of BYTES), flat."""
    return data.normal((BYTES[size] // np.dtype(DTYPE).itemsize,), DTYPE)


def _doubled(x):
    # jit returns an input it merely forwards as the same array, host copy included: compute
    return x * 2


def _shares_buffer(array, host):
    """Whether the device array ``array`` and the NumPy array ``host`` are one buffer."""
    pointer = getattr(array, "unsafe_buffer_pointer", None)
    return pointer is not None and pointer() == host.__array_interface__["data"][0]


def _aliases_host(host, target):
    """Whether ``device_put`` of ``host`` gives a device array over ``host``'s own memory."""
    return _shares_buffer(device.put(host, target), host)


def _host_copy_aliases(out):
    """Whether ``jax.device_get`` of the device array ``out`` gives NumPy ``out``'s own
    buffer (no copy)."""
    import jax

    return _shares_buffer(out, jax.device_get(out))


def _median_seconds(transfers):
    """Median wall time of calling each zero-argument blocking callable in ``transfers``.
    Each result is held until all are timed: freeing the last 64 MB copy inside the next
    timing read about 10% off the to-device bandwidth on CPU."""
    seconds, results = [], []
    for transfer in transfers:
        start = time.perf_counter()
        results.append(transfer())
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


class ArrayTransfer(counts.Counts, phases.ResidentHeapTransferPhases, workload.Workload):
    """One float32 array, 1 KB to 64 MB, to the device (device_put) and back (device_get,
    np.asarray): the cost of feeding a model and reading its result."""

    params = [list(BYTES)]
    param_names = ["size"]
    # JAX's work per transfer, not the copy's (which callgrind would run 50 times slower)
    count_params = [("64KB",)]

    program = staticmethod(_doubled)

    def inputs(self, profile, size, dispatch):
        return (_one_array(size),)

    @workload.cold_reads("np_asarray", np.asarray)
    @monitor.forbid_compile
    def time_np_asarray(self, size):
        """``np.asarray`` of an output that setup computed and waited for, never converted
        before; the mean of ``READS_PER_SAMPLE`` calls a sample, each on its own output,
        after setup read one other (as for time_to_host).

        Timed: the conversion to a NumPy array (on CPU an alias of the buffer, elsewhere a
        device -> host copy). Not timed: computing the outputs (setup), freeing them and
        their host copies (the next setup).
        """
        array = self.prepared.take("np_asarray")
        self.prepared.keep(array, np.asarray(array))

    # 2: the array is freed in the next setup; freeing 64 MB in the timed call made the
    # median flip between about 70 us and 2.7 ms; 3: the heap kept resident; 4: 8 calls a
    # sample, each on its own output, after one read untimed (as time_to_host)
    time_np_asarray.version = "4"


class PytreeTransfer(counts.Counts, phases.ResidentHeapTransferPhases, workload.Workload):
    """A pytree of 100 arrays of 1 KB to the device and back: the per-leaf overhead of moving
    a model's parameters or a batch of features."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(*leaves):
        return [_doubled(leaf) for leaf in leaves]

    def inputs(self, profile, dtype, dispatch):
        rows = data.normal((PYTREE_LEAVES, int(np.prod(PYTREE_LEAF_SHAPE))), dtype)
        return tuple(row.reshape(PYTREE_LEAF_SHAPE) for row in rows)


class Bandwidth(workload.Workload):
    """Host<->device bandwidth with one 64 MB float32 array, median of 5 blocking transfers:
    the figure to compare with the hardware's bus."""

    params = [["64MB"]]
    param_names = ["size"]
    unit = "bytes/s"
    # 2: transfers' results are freed after all are timed, no longer inside the next timing;
    # 3: a device_put that aliases the host memory is n/a, not a bandwidth;
    # 4: the host array at one address offset in every process (data.at_fixed_address), and
    # a device_get that hands NumPy the device buffer is n/a too
    version = "4"

    program = staticmethod(_doubled)

    def inputs(self, profile, size, dispatch):
        return (_one_array(size),)

    @monitor.forbid_compile
    def track_to_device_bytes_per_second(self, size):
        """Bytes over the median time of 5 ``device_put`` calls of the 64 MB array, each waited
        for; n/a where ``device_put`` copies nothing (see ``track_to_device_aliases_host``).

        Timed, per transfer: the host -> device copy and the wait. Not timed: freeing the
        copies (after all five are timed).
        """
        host = self.prepared.transfer_args[0]
        target = self.prepared.device
        if _aliases_host(host, target):
            workload.skip("device_put hands the device the host array's own memory here (jax "
                          "on CPU aliases aligned arrays): no bytes move, so there is no "
                          "bandwidth to measure")
        seconds = _median_seconds(
            [lambda: device.put(host, target)] * BANDWIDTH_TRANSFERS)
        return host.nbytes / seconds

    def track_to_device_aliases_host(self, size):
        """1 when ``device_put`` of the 64 MB array returns a device array over the host array's
        own memory (no copy: jax on CPU does this for arrays its alignment rule accepts; the
        host array starts 16 bytes past a 64-byte boundary, as malloc gives large buffers),
        0 when it copies. A fact of the release, not a speed."""
        return int(_aliases_host(self.prepared.transfer_args[0], self.prepared.device))

    track_to_device_aliases_host.unit = "aliasing"

    @monitor.forbid_compile
    def track_to_host_bytes_per_second(self, size):
        """Bytes over the median time of 5 ``jax.device_get`` calls, each of a different
        64 MB output computed and waited for before any timing.

        Timed, per transfer: the device -> host copy into a NumPy array. Not timed: computing
        the outputs, freeing them and their copies (after all five are timed).
        """
        import jax

        run, args = self.prepared.run, self.prepared.args
        # fresh outputs, computed and waited for before any timing
        fresh = [device.block(run(*args)) for _ in range(BANDWIDTH_TRANSFERS + 1)]
        if _host_copy_aliases(fresh.pop()):
            workload.skip("jax.device_get returns a view of the device buffer here (jax on "
                          "CPU hands NumPy the device memory): no bytes move, so there is no "
                          "bandwidth to measure")
        seconds = _median_seconds([lambda out=out: jax.device_get(out) for out in fresh])
        return fresh[0].nbytes / seconds
