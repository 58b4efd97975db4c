"""Seeded host data: the same bytes on every machine, every version, every run; and where the
host memory it lives in comes from (an address offset, a page boundary, a resident heap).

Generators are only ever appended to; changing one would make old results incomparable.
"""

import ctypes
import functools

import numpy as np

SEED = 20231029

# jax.device_put on CPU gives the device a NumPy array's own memory (no copy) when its address
# suits XLA and copies it otherwise: 64-byte aligned from jax 0.4.35 (any 16-byte aligned one
# before), 20 us against 100 us for 4 MB. Where malloc puts a buffer depends on what the process
# allocated before, so what the to-device phases put starts at one offset from a 64-byte
# boundary: 16 bytes, where glibc puts a large allocation (a page plus its header), as a user's
# big arrays get.
ALIGNMENT = 64
ADDRESS_OFFSET = 16
# A NumPy loop's speed follows where its input and output start: an output 16 bytes past a
# 64-byte boundary is slow, and one at the same offset in a page as the input rows stalls on
# 4K aliasing now and then (results/LAYOUT-MODES.md). A baseline that pins its layout puts the
# inputs on a page boundary and the output half a page past one.
PAGE = 4096
OUTPUT_OFFSET = PAGE // 2


@functools.cache
def _normal(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    out = rng.standard_normal(shape, dtype=np.float64).astype(dtype)
    out.setflags(write=False)
    return out


def normal(shape, dtype, seed=SEED):
    """A read-only standard-normal array of ``shape`` and ``dtype`` (cached per process)."""
    return _normal(tuple(shape), np.dtype(dtype).name, seed)


def empty_at(shape, dtype, alignment=ALIGNMENT, offset=ADDRESS_OFFSET):
    """An uninitialised writable array whose data starts ``offset`` bytes past an
    ``alignment``-byte boundary."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + alignment, np.uint8)
    start = (offset - raw.ctypes.data) % alignment
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def at_fixed_address(array, alignment=ALIGNMENT, offset=ADDRESS_OFFSET):
    """``array`` itself if its data starts ``offset`` bytes past an ``alignment``-byte
    boundary, else a copy that does (same values, shape, dtype and writability); anything other
    than a NumPy array is returned as it is."""
    if not isinstance(array, np.ndarray) or array.ctypes.data % alignment == offset:
        return array
    out = empty_at(array.shape, array.dtype, alignment, offset)
    out[...] = array
    out.setflags(write=array.flags.writeable)
    return out


def on_page_boundaries(arrays):
    """``arrays`` (a pytree) with every NumPy array starting on a page boundary: the layout a
    pinned NumPy baseline's inputs and a pinned device input share (copies where needed)."""
    import jax

    return jax.tree_util.tree_map(lambda a: at_fixed_address(a, PAGE, 0), arrays)


# glibc's mallopt parameters, and its largest mmap threshold on 64-bit (larger blocks are always
# mmapped, so always fresh pages)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD_MAX = 32 << 20
# 256 MB made ab's rounds in new processes resolve fewer transfer cases (results/HEAP-FAULTS.md)
RESIDENT_HEAP_BYTES = 64 << 20


@functools.cache
def keep_heap_resident(nbytes=RESIDENT_HEAP_BYTES):
    """Make the C heap keep what it frees and grow it by ``nbytes`` of touched memory now, once
    per process; True where it could (glibc), False where the C library refused.

    glibc gives the free top of its heap back to the system and moves its mmap threshold with
    what the process freed before, so a copy into a new buffer found resident memory in some
    samples and fresh pages (a fault per 4 KB, ~2 us each) in others. With both thresholds
    fixed and the pool touched, blocks up to ``MMAP_THRESHOLD_MAX`` land in resident memory.
    The pool is made of blocks under the threshold: one large block would be mmapped, and
    returned when freed."""
    try:
        libc = ctypes.CDLL(None)
        mallopt, malloc, free = libc.mallopt, libc.malloc, libc.free
    except (OSError, AttributeError):
        return False
    if not (mallopt(_M_TRIM_THRESHOLD, 2**31 - 1)
            and mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)):
        return False
    malloc.restype, malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    free.argtypes = [ctypes.c_void_p]
    block = MMAP_THRESHOLD_MAX // 2
    blocks = [malloc(block) for _ in range(nbytes // block)]
    for address in blocks:
        if address:
            ctypes.memset(address, 0, block)
    for address in blocks:
        free(address)
    return True
