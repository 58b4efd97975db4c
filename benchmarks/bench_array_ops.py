"""Array operations at steady state, the XLA:CPU kernel canaries: elementwise fusion,
reductions, matmul shapes, einsum, convolution, FFT, sorting, scans, gather and scatter.

Each class is one jnp/lax operation family: ``time_run`` times one compiled call and, where
NumPy has the same maths, ``time_numpy`` the NumPy baseline on the same inputs. A codegen or
runtime change shows up here first.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxbench_helpers.runtime import counts, data, phases, workload


def setup_cache():
    workload.warm_module(__name__)


# Sizes per profile; regular: each compiled call takes about 0.5-20 ms on a 2-core CPU.
SIZES = {
    "quick": {
        "elementwise": (128, 128),
        "reduce": (64, 128),
        "matmul": {"gemv": ((128, 128), (128,)), "batched": ((4, 32, 32), (4, 32, 32)),
                   "many_small": ((256, 8, 8), (256, 8, 8))},
        "attention": (2, 32, 4, 16),  # batch, sequence, heads, head size
        "chain": (128, 16),  # long side, short side
        "conv": ((2, 8, 8, 4), (3, 3, 4, 8)),  # NHWC image, HWIO kernel
        "rows": (8, 256),  # fft, top_k, cumsum: (rows, row length)
        "sort_rows": (2, 256),  # sort, argsort: XLA:CPU sorts ~100x slower than NumPy
        "table": (128, 16, 512),  # rows, row width, lookups (random rows: scatter-adds collide)
    },
    "regular": {
        "elementwise": (512, 1024),
        "reduce": (1024, 2048),
        "matmul": {"gemv": ((2048, 2048), (2048,)), "batched": ((16, 256, 256), (16, 256, 256)),
                   "many_small": ((16384, 8, 8), (16384, 8, 8))},
        "attention": (4, 256, 8, 64),
        "chain": (2048, 64),
        "conv": ((4, 32, 32, 32), (3, 3, 32, 64)),
        "rows": (256, 4096),
        "sort_rows": (8, 4096),
        "table": (16384, 64, 16384),
    },
    "large": {
        "elementwise": (2048, 4096),
        "reduce": (4096, 8192),
        "matmul": {"gemv": ((8192, 8192), (8192,)), "batched": ((64, 512, 512), (64, 512, 512)),
                   "many_small": ((262144, 8, 8), (262144, 8, 8))},
        "attention": (16, 512, 16, 64),
        "chain": (8192, 128),
        "conv": ((32, 64, 64, 128), (3, 3, 128, 128)),
        "rows": (1024, 16384),
        "sort_rows": (64, 16384),
        "table": (262144, 128, 262144),
    },
}

# axis parameter -> the axis argument of jnp.sum / np.sum
AXES = {"0": 0, "1": 1, "None": None}

# top_k's k (static, so a constant: the number of candidates a beam or sampler keeps)
TOP_K = 16

# segment_sum: rows per segment on average
ROWS_PER_SEGMENT = 16


def _size(profile, name):
    return SIZES[profile.name][name]


def _indices(count, high):
    """Seeded int32 indices in [0, high)."""
    return np.random.default_rng(data.SEED).integers(0, high, count, dtype=np.int32)


def _distinct_rows(shape, dtype):
    """Each row a seeded permutation of 0..n-1: no ties, so sort orders are unique."""
    return np.argsort(data.normal(shape, "float64"), axis=-1).astype(dtype)


class ElementwiseChain(counts.Counts, phases.RunPhase, phases.NumpyBaseline,
                       workload.Workload):
    """A chain of 8 transcendental and arithmetic ops XLA fuses into one loop (512K elements):
    the fusion and vectorised-math canary."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(x):
        y = jnp.tanh(x) * jnp.exp(-0.5 * x * x) + jnp.sin(x) * jnp.cos(0.5 * x)
        return jnp.log1p(y * y) + jnp.sqrt(jnp.abs(x))

    @staticmethod
    def reference(x):
        y = np.tanh(x) * np.exp(-0.5 * x * x) + np.sin(x) * np.cos(0.5 * x)
        return np.log1p(y * y) + np.sqrt(np.abs(x))

    def inputs(self, profile, dtype, dispatch):
        return (data.normal(_size(profile, "elementwise"), dtype),)


class SumOverAxis(phases.RunPhase, phases.NumpyBaselinePinnedLayout, workload.Workload):
    """jnp.sum of a row-major matrix over axis 0 (strided), 1 (contiguous) or all: the
    reduction codegen canary."""

    params = [["float32"], list(AXES)]
    param_names = ["dtype", "axis"]
    # 2: time_run's input on a page boundary (place); time_numpy keeps its own version
    version = "2"

    def static_arguments(self, profile, dtype, axis):
        return {"axis": AXES[axis]}

    @staticmethod
    def program(x, *, axis):
        return jnp.sum(x, axis=axis)

    @staticmethod
    def reference(x, *, axis, out=None):
        return np.sum(x, axis=axis, out=out)

    def inputs(self, profile, dtype, axis, dispatch):
        return (data.normal(_size(profile, "reduce"), dtype),)

    def place(self, host_args, target):
        # XLA:CPU writes the output at one offset in a page in every process (0x400-0x580
        # here); the strided sum ran ~11% slower, by process, where the heap put the input
        # near that offset (4K aliasing, results/LAYOUT-MODES.md). A page-aligned host copy,
        # which device_put aliases on CPU, puts every process's input at the same offset.
        return super().place(data.on_page_boundaries(host_args), target)


class MatmulShapes(counts.Counts, phases.RunPhase, phases.NumpyBaseline, workload.Workload):
    """jnp.matmul off the square path: matrix-vector (memory bound), batched 256x256 and
    many 8x8 products (the shapes where XLA:CPU dot emitters differ)."""

    params = [["float32"], ["gemv", "batched", "many_small"]]
    param_names = ["dtype", "shape"]
    # the shape whose emitter moved most between releases (a batch of 8x8 dots)
    count_params = [("float32", "many_small")]

    @staticmethod
    def program(a, b):
        return jnp.matmul(a, b)

    @staticmethod
    def reference(a, b):
        return np.matmul(a, b)

    def inputs(self, profile, dtype, shape, dispatch):
        a_shape, b_shape = _size(profile, "matmul")[shape]
        return data.normal(a_shape, dtype), data.normal(b_shape, dtype, seed=data.SEED + 1)


class EinsumAttentionScores(phases.RunPhase, phases.NumpyBaseline, workload.Workload):
    """jnp.einsum('bqhd,bkhd->bhqk'): attention logits, a batched contraction whose operands
    need transposing first (einsum's layout handling, not just a dot)."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(q, k):
        return jnp.einsum("bqhd,bkhd->bhqk", q, k)

    @staticmethod
    def reference(q, k):
        return np.matmul(q.transpose(0, 2, 1, 3), k.transpose(0, 2, 3, 1))

    def inputs(self, profile, dtype, dispatch):
        shape = _size(profile, "attention")
        return data.normal(shape, dtype), data.normal(shape, dtype, seed=data.SEED + 1)


class EinsumChain(phases.RunPhase, phases.NumpyBaseline, workload.Workload):
    """jnp.einsum('ij,jk,kl->il') with a long-short-long chain: the contraction order einsum
    picks decides a 16x difference in FLOPs."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(a, b, c):
        return jnp.einsum("ij,jk,kl->il", a, b, c)

    @staticmethod
    def reference(a, b, c):
        return np.einsum("ij,jk,kl->il", a, b, c, optimize=True)

    def inputs(self, profile, dtype, dispatch):
        long, short = _size(profile, "chain")
        return (data.normal((long, short), dtype),
                data.normal((short, long), dtype, seed=data.SEED + 1),
                data.normal((long, short), dtype, seed=data.SEED + 2))


def _conv(x, kernel):
    return lax.conv_general_dilated(x, kernel, window_strides=(1, 1), padding="SAME",
                                    dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _patches(x, kernel_shape):
    """im2col: every SAME-padded kernel window of ``x`` as a row, (N*H*W, kh*kw*C)."""
    kh, kw, channels, _ = kernel_shape
    padded = np.pad(x, ((0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2), (0, 0)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(1, 2))
    return windows.transpose(0, 1, 2, 4, 5, 3).reshape(-1, kh * kw * channels)


def _conv_reference(x, kernel):
    out = _patches(x, kernel.shape) @ kernel.reshape(-1, kernel.shape[-1])
    return out.reshape(x.shape[:3] + kernel.shape[-1:])


def _conv_inputs(profile, dtype):
    image, kernel = _size(profile, "conv")
    scale = 1 / np.sqrt(np.prod(kernel[:3]))
    return (data.normal(image, dtype),
            (data.normal(kernel, "float64", seed=data.SEED + 1) * scale).astype(dtype))


class Conv2d(phases.RunPhase, workload.Workload):
    """lax.conv_general_dilated, 3x3 SAME, NHWC/HWIO, 32->64 channels on 32x32 images: one
    small-CNN layer forward (checked against a NumPy im2col product, not timed: a different
    algorithm)."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(x, kernel):
        return _conv(x, kernel)

    reference = staticmethod(_conv_reference)

    def inputs(self, profile, dtype, dispatch):
        return _conv_inputs(profile, dtype)


class Conv2dKernelGrad(phases.RunPhase, workload.Workload):
    """jax.grad of 0.5*sum(conv(x, k)**2) with respect to the kernel: the same layer's
    backward pass (forward plus kernel-gradient convolution)."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(x, kernel):
        return jax.grad(lambda k: 0.5 * jnp.sum(_conv(x, k) ** 2))(kernel)

    @staticmethod
    def reference(x, kernel):
        patches = _patches(x, kernel.shape)
        out = patches @ kernel.reshape(-1, kernel.shape[-1])
        return (patches.T @ out).reshape(kernel.shape)

    def inputs(self, profile, dtype, dispatch):
        return _conv_inputs(profile, dtype)


class Fft(phases.RunPhase, phases.NumpyBaseline, workload.Workload):
    """jnp.fft.fft of a batch of real rows (complex64 out): the FFT library jaxlib ships."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(x):
        return jnp.fft.fft(x)

    @staticmethod
    def reference(x):
        return np.fft.fft(x).astype(np.complex64)  # NumPy < 2 computes in complex128

    def inputs(self, profile, dtype, dispatch):
        return (data.normal(_size(profile, "rows"), dtype),)


class Rfft(phases.RunPhase, phases.NumpyBaseline, workload.Workload):
    """jnp.fft.rfft of a batch of real rows: the real-input FFT path (half the output)."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(x):
        return jnp.fft.rfft(x)

    @staticmethod
    def reference(x):
        return np.fft.rfft(x).astype(np.complex64)

    def inputs(self, profile, dtype, dispatch):
        return (data.normal(_size(profile, "rows"), dtype),)


class Sort(phases.RunPhase, phases.NumpyBaseline, workload.Workload):
    """jnp.sort along rows: XLA's sort (a comparator loop on CPU), a known slow spot."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(x):
        return jnp.sort(x, axis=-1)

    @staticmethod
    def reference(x):
        return np.sort(x, axis=-1)

    def inputs(self, profile, dtype, dispatch):
        return (data.normal(_size(profile, "sort_rows"), dtype),)


class Argsort(phases.RunPhase, phases.NumpyBaseline, workload.Workload):
    """jnp.argsort along rows: a two-operand (key, index) sort."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(x):
        return jnp.argsort(x, axis=-1)

    @staticmethod
    def reference(x):
        return np.argsort(x, axis=-1).astype(np.int32)

    def inputs(self, profile, dtype, dispatch):
        return (_distinct_rows(_size(profile, "sort_rows"), dtype),)


class TopK(phases.RunPhase, phases.NumpyBaseline, workload.Workload):
    """lax.top_k of each row (values and indices): the partial sort behind beam search and
    sampling."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(x):
        return lax.top_k(x, TOP_K)

    @staticmethod
    def reference(x):
        order = np.argsort(-x, axis=-1)[:, :TOP_K]
        return np.take_along_axis(x, order, axis=-1), order.astype(np.int32)

    def inputs(self, profile, dtype, dispatch):
        return (_distinct_rows(_size(profile, "rows"), dtype),)


class Cumsum(phases.RunPhase, phases.NumpyBaseline, workload.Workload):
    """jnp.cumsum along rows: a prefix scan, lowered by XLA as a reduce-window."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(x):
        return jnp.cumsum(x, axis=-1)

    @staticmethod
    def reference(x):
        return np.cumsum(x, axis=-1)

    def inputs(self, profile, dtype, dispatch):
        return (data.normal(_size(profile, "rows"), dtype),)


def _table_inputs(profile, dtype):
    """(table, row indices, one update row per index) for gather / scatter."""
    rows, width, lookups = _size(profile, "table")
    return (data.normal((rows, width), dtype), _indices(lookups, rows),
            data.normal((lookups, width), dtype, seed=data.SEED + 1))


class Gather(phases.RunPhase, phases.NumpyBaseline, workload.Workload):
    """table[idx]: an embedding lookup of random rows (XLA gather)."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(table, idx):
        return table[idx]

    @staticmethod
    def reference(table, idx):
        return table[idx]

    def inputs(self, profile, dtype, dispatch):
        return _table_inputs(profile, dtype)[:2]


class ScatterAdd(phases.RunPhase, phases.NumpyBaseline, workload.Workload):
    """table.at[idx].add(updates) with repeated random rows: an embedding-gradient update
    (XLA scatter, a thunk-runtime canary)."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(table, idx, updates):
        return table.at[idx].add(updates)

    @staticmethod
    def reference(table, idx, updates):
        out = table.copy()
        np.add.at(out, idx, updates)
        return out

    def inputs(self, profile, dtype, dispatch):
        return _table_inputs(profile, dtype)


class SegmentSum(phases.RunPhase, phases.NumpyBaseline, workload.Workload):
    """jax.ops.segment_sum of rows into unsorted segments (16 rows each on average): graph
    network message aggregation."""

    params = [["float32"]]
    param_names = ["dtype"]

    def static_arguments(self, profile, dtype):
        _, _, lookups = _size(profile, "table")
        return {"num_segments": lookups // ROWS_PER_SEGMENT}

    @staticmethod
    def program(rows, segment_ids, *, num_segments):
        return jax.ops.segment_sum(rows, segment_ids, num_segments=num_segments)

    @staticmethod
    def reference(rows, segment_ids, *, num_segments):
        out = np.zeros((num_segments,) + rows.shape[1:], rows.dtype)
        np.add.at(out, segment_ids, rows)
        return out

    def inputs(self, profile, dtype, dispatch):
        _, width, lookups = _size(profile, "table")
        return (data.normal((lookups, width), dtype),
                _indices(lookups, lookups // ROWS_PER_SEGMENT))
