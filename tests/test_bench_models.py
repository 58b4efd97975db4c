"""The model, transfer, startup and memory benchmarks compute what their names say (CPU, quick
profile)."""

import gc
import math
import os
import platform
import re
import subprocess
import sys
import weakref

import jax
import numpy as np
import pytest

from benchmarks import bench_memory, bench_models, bench_startup, bench_transfer
from jaxbench_helpers.common import paths
from jaxbench_helpers.runtime import data, device, profiles, workload

MODELS = [bench_models.MLPTrainStep, bench_models.TransformerBlock, bench_models.CNNTrainStep,
          bench_models.ODEIntegration]
TRAIN_STEPS = [bench_models.MLPTrainStep, bench_models.CNNTrainStep]


@pytest.fixture
def quick(profile, tmp_path, monkeypatch):
    """The quick profile, a clean working directory for the compilation cache, no state left."""
    profile("quick")
    monkeypatch.chdir(tmp_path)
    yield profiles.current()


def leaves(tree):
    return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(tree)]


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.__name__)
def test_model_output_is_finite_and_matches_numpy(quick, cls):
    bench = cls()
    bench.warm_compilation_cache()  # raises if the output differs from the NumPy reference
    bench.setup("float32")
    out = bench.prepared.run(*bench.prepared.args)
    assert all(np.isfinite(leaf).all() for leaf in leaves(out))


@pytest.mark.parametrize("cls", TRAIN_STEPS, ids=lambda c: c.__name__)
def test_sgd_step_decreases_the_loss(quick, cls):
    *batch, params = cls().inputs(quick, "float32", dispatch=False)
    step = jax.jit(cls.program)
    new_params, first = step(*batch, params)
    _, second = step(*batch, new_params)
    assert float(second) < float(first)


def test_transformer_gradient_points_downhill(quick):
    x, params = bench_models.TransformerBlock().inputs(quick, "float32", dispatch=False)
    step = jax.jit(bench_models.TransformerBlock.program)
    loss, grads = step(x, params)
    downhill = jax.tree_util.tree_map(lambda p, g: p - 0.05 * g, params, grads)
    assert float(step(x, downhill)[0]) < float(loss)


def numpy_transformer_loss(x, p):
    """The transformer block's loss, written independently in NumPy (forward only)."""

    def layer_norm(t, scale, bias):
        centred = t - t.mean(axis=-1, keepdims=True)
        return centred / np.sqrt((centred ** 2).mean(axis=-1, keepdims=True) + 1e-5) * scale + bias

    def gelu(t):  # the tanh approximation, jax.nn.gelu's default
        return 0.5 * t * (1 + np.tanh(math.sqrt(2 / math.pi) * (t + 0.044715 * t ** 3)))

    batch, seq, width = x.shape
    heads, head = bench_models.TRANSFORMER_HEADS, width // bench_models.TRANSFORMER_HEADS
    h = layer_norm(x, p["ln1_scale"], p["ln1_bias"])
    q, k, v = (np.stack(np.split(h @ p[w], heads, axis=-1), axis=1) for w in ("wq", "wk", "wv"))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head)
    scores = np.where(np.tril(np.ones((seq, seq), bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    attended = np.concatenate(list((weights @ v).transpose(1, 0, 2, 3)), axis=-1)
    x = x + attended @ p["wo"]
    hidden = gelu(layer_norm(x, p["ln2_scale"], p["ln2_bias"]) @ p["w_up"] + p["b_up"])
    return np.mean((x + hidden @ p["w_down"] + p["b_down"]) ** 2)


def test_transformer_loss_matches_a_numpy_forward_pass(quick):
    x, params = bench_models.TransformerBlock().inputs(quick, "float32", dispatch=False)
    loss, _ = jax.jit(bench_models.TransformerBlock.program)(x, params)
    want = numpy_transformer_loss(x.astype(np.float64),
                                  {k: v.astype(np.float64) for k, v in params.items()})
    assert float(loss) == pytest.approx(want, rel=1e-4)


def test_dispatch_inputs_are_the_same_model_at_a_tiny_size(quick):
    for cls in MODELS:
        full, tiny = (cls().inputs(quick, "float32", dispatch=d) for d in (False, True))
        assert sum(a.size for a in leaves(tiny)) < sum(a.size for a in leaves(full))
        assert jax.tree_util.tree_structure(full) == jax.tree_util.tree_structure(tiny)


# ---- transfer ------------------------------------------------------------------------------

def named_bytes(name):
    number, unit = re.fullmatch(r"(\d+)(KB|MB)", name).groups()
    return int(number) << {"KB": 10, "MB": 20}[unit]


def test_transfer_sizes_are_what_the_names_say(quick):
    for cls in (bench_transfer.ArrayTransfer, bench_transfer.Bandwidth):
        for size in cls.params[0]:
            (host,) = cls().inputs(quick, size, dispatch=False)
            assert host.nbytes == named_bytes(size), (cls.__name__, size)
    tree = bench_transfer.PytreeTransfer().inputs(quick, "float32", dispatch=False)
    assert len(tree) == 100 and all(leaf.nbytes == 1024 for leaf in tree)


def test_to_host_phases_read_a_never_converted_array_in_every_call_of_every_sample(quick):
    bench = bench_transfer.ArrayTransfer()
    phase = bench_transfer.ArrayTransfer.time_np_asarray
    assert phase.number == workload.READS_PER_SAMPLE > 1
    read = []
    for _ in range(3):  # samples: asv's class setup, the phase's own, then `number` calls
        bench.setup("1KB")
        phase.setup("1KB")
        for _ in range(phase.number):
            read.append(bench.prepared.slots["np_asarray"][-1])
            bench.time_np_asarray("1KB")
        with pytest.raises(RuntimeError, match="no fresh object"):
            bench.time_np_asarray("1KB")  # one call more would read a cached copy
    assert len({id(a) for a in read}) == 3 * phase.number


def test_only_the_read_phases_processes_hold_a_samples_outputs(quick):
    # the class's setup makes one output a slot, as before the reads' own setup tops it up:
    # the other phases' processes hold what they held
    bench = bench_transfer.ArrayTransfer()
    bench.setup("1KB")
    assert [len(bench.prepared.slots[s]) for s in ("to_host", "np_asarray")] == [1, 1]
    assert bench.prepared.kept == []
    bench_transfer.ArrayTransfer.time_to_host.setup("1KB")
    assert len(bench.prepared.slots["to_host"]) == workload.READS_PER_SAMPLE
    assert len(bench.prepared.slots["np_asarray"]) == 1


def test_a_read_phases_setup_says_so_when_its_class_was_set_up_for_other_parameters(quick):
    bench_transfer.ArrayTransfer().setup("1KB")
    with pytest.raises(RuntimeError, match="ran before its class's setup"):
        bench_transfer.ArrayTransfer.time_to_host.setup("64KB")


def test_a_read_phases_setup_reads_one_more_output_so_the_first_timed_read_is_warm(quick):
    # after computing the outputs, the first read took 10-20 times as long as the others
    bench = bench_transfer.ArrayTransfer()
    for phase, slot in ((bench_transfer.ArrayTransfer.time_to_host, "to_host"),
                        (bench_transfer.ArrayTransfer.time_np_asarray, "np_asarray")):
        bench.setup("1KB")
        phase.setup("1KB")
        extra, host = bench.prepared.kept
        assert not any(extra is output for output in bench.prepared.slots[slot])
        assert isinstance(host, np.ndarray) and np.array_equal(host, np.asarray(extra))
        for _ in range(phase.number):
            getattr(bench, phase.__name__)("1KB")


def test_to_host_phases_free_what_they_read_in_the_next_setup_not_in_the_timed_call(quick):
    # freeing a 64 MB array inside the call made its median flip between ~70 us and ~2.7 ms
    bench = bench_transfer.ArrayTransfer()
    for method, slot in (("time_np_asarray", "np_asarray"), ("time_to_host", "to_host")):
        bench.setup("1KB")
        taken = bench.prepared.slots[slot][-1]
        getattr(bench, method)("1KB")
        kept = bench.prepared.kept
        assert kept[0] is taken and len(kept) == 2, method
        assert isinstance(kept[1], np.ndarray) and np.array_equal(kept[1], np.asarray(taken))
        bench.setup("1KB")
        assert bench.prepared.kept == [], method


def test_bandwidth_timings_free_no_transfer_result_inside_another_timing():
    class Copy:
        pass

    made, all_alive_at_each_call = [], []

    def transfer():
        all_alive_at_each_call.append(all(ref() is not None for ref in made))
        copy = Copy()
        made.append(weakref.ref(copy))
        return copy

    bench_transfer._median_seconds([transfer] * 4)
    assert all_alive_at_each_call == [True] * 4


def _aligned(nbytes, alignment):
    """A float32 array of ``nbytes`` whose data starts at ``alignment`` bytes past a multiple
    of 64."""
    buf = np.empty(nbytes + 128, np.uint8)
    start = (-buf.ctypes.data) % 64 + alignment
    out = buf[start:start + nbytes].view(np.float32)
    out[:] = 1
    return out


def test_device_put_aliasing_is_detected_and_reported_as_no_bandwidth(quick):
    target = jax.devices("cpu")[0]
    # jax 0.10.2 on CPU hands the device a 64-byte aligned host array's own memory
    assert bench_transfer._aliases_host(_aligned(1 << 20, 0), target)
    assert not bench_transfer._aliases_host(_aligned(1 << 20, 16), target)
    bench = bench_transfer.Bandwidth()
    bench.setup("64MB")
    bench.prepared.transfer_args = (_aligned(64 << 20, 0),)
    assert bench.track_to_device_aliases_host("64MB") == 1
    with pytest.raises(NotImplementedError, match="no bytes move"):
        bench.track_to_device_bytes_per_second("64MB")
    bench.prepared.transfer_args = (_aligned(64 << 20, 16),)
    assert bench.track_to_device_aliases_host("64MB") == 0
    assert bench.track_to_device_bytes_per_second("64MB") > 0


def test_at_fixed_address_moves_any_array_to_the_one_offset_and_keeps_its_values():
    for offset in (0, 16, 32, 48):
        moved = data.at_fixed_address(_aligned(1 << 16, offset))
        assert moved.ctypes.data % data.ALIGNMENT == data.ADDRESS_OFFSET
        np.testing.assert_array_equal(moved, np.ones(1 << 14, np.float32))
    strided = np.arange(24, dtype=np.complex128).reshape(4, 6).T
    moved = data.at_fixed_address(strided)
    assert moved.ctypes.data % data.ALIGNMENT == data.ADDRESS_OFFSET
    assert moved.dtype == strided.dtype and moved.shape == strided.shape
    np.testing.assert_array_equal(moved, strided)
    frozen = data.normal((3, 5), "float32")
    assert not data.at_fixed_address(frozen).flags.writeable
    already = data.at_fixed_address(frozen)
    assert data.at_fixed_address(already) is already
    assert data.at_fixed_address(np.empty(0, np.float64)).size == 0
    assert data.at_fixed_address(3.5) == 3.5


def test_empty_at_starts_at_the_offset_asked_for_with_the_shape_and_dtype_asked_for():
    for alignment, offset in ((data.ALIGNMENT, data.ADDRESS_OFFSET), (data.PAGE, 0),
                              (data.PAGE, data.OUTPUT_OFFSET)):
        for shape, dtype in (((2048,), "float32"), ((3, 5), "complex128"), ((), "float32"),
                             ((0, 4), "float64")):
            empty = data.empty_at(shape, dtype, alignment, offset)
            assert empty.shape == shape and empty.dtype == np.dtype(dtype)
            assert empty.flags.writeable and empty.flags.c_contiguous
            if empty.size:
                assert empty.ctypes.data % alignment == offset
    placed = data.at_fixed_address(_aligned(1 << 16, 16), data.PAGE, 0)
    assert placed.ctypes.data % data.PAGE == 0
    np.testing.assert_array_equal(placed, np.ones(1 << 14, np.float32))


def test_host_inputs_sit_where_device_put_copies_in_every_process(quick):
    class AlignedInput(bench_transfer.ArrayTransfer):
        def inputs(self, profile, size, dispatch):
            return (_aligned(bench_transfer.BYTES[size], 0),)  # device_put would alias it

    bench = AlignedInput()
    bench.setup("1MB")
    host = bench.prepared.transfer_args[0]
    assert host.ctypes.data % data.ALIGNMENT == data.ADDRESS_OFFSET
    np.testing.assert_array_equal(host, bench.prepared.host_args[0])
    # jax 0.10.2 on CPU copies an array 16 bytes past a 64-byte boundary: time_to_device
    # times a copy whatever address malloc gave the input
    assert not bench_transfer._aliases_host(host, bench.prepared.device)
    bench.time_to_device("1MB")
    put = bench.prepared.kept[-1]
    assert not np.shares_memory(np.asarray(jax.tree_util.tree_leaves(put)[0]), host)


def test_to_device_frees_its_copies_in_the_next_setup_not_in_the_timed_call(quick):
    bench = bench_transfer.ArrayTransfer()
    bench.setup("1KB")
    for _ in range(3):  # asv's timing loop calls it `number` times per sample
        bench.time_to_device("1KB")
    kept = bench.prepared.kept
    assert len(kept) == 3
    assert all(isinstance(leaf, jax.Array) for leaf in jax.tree_util.tree_leaves(kept))
    bench.setup("1KB")
    assert bench.prepared.kept == []


# asv's pattern in one process, with asv_runner's own benchmark object: the class's setup
# (it frees the last sample's copies), then the method's own, before every sample; prints the
# pages of the host arrays the method reads, then each later sample's page faults
ASV_SAMPLES = """
import importlib, resource, sys
import jax
from asv_runner.discovery import _get_benchmark
from jaxbench_helpers.runtime import data
module_name, cls_name = sys.argv[1].rsplit(".", 1)
method = sys.argv[3]
module = importlib.import_module(module_name)
cls = getattr(module, cls_name)
bench = _get_benchmark(method, module, cls, getattr(cls, method))
bench.set_param_idx(int(sys.argv[2]))
faults = []
for sample in range(12):
    assert not bench.do_setup()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(4):
        bench.func(*bench._current_params)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
prepared = bench.func.__self__.prepared
read = prepared.transfer_args if method == "time_to_device" else prepared.host_args
print(sum(leaf.nbytes for leaf in jax.tree_util.tree_leaves(read)) // data.PAGE, *faults[1:])
"""


def asv_samples_faults(name, param_idx, method, cwd):
    """(pages the method reads, page faults of each sample after the first) at the regular
    profile, in a new interpreter."""
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=paths.ROOT,
               JAXBENCH_PROFILE="regular")
    proc = subprocess.run(
        [sys.executable, "-c", ASV_SAMPLES, name, str(param_idx), method], env=env,
        cwd=cwd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    pages_read, *faults = [int(n) for n in proc.stdout.split()]
    return pages_read, faults


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's heap policy")
@pytest.mark.parametrize("name, param_idx", [
    ("benchmarks.bench_transfer.ArrayTransfer", list(bench_transfer.BYTES).index("1MB")),
    ("benchmarks.bench_models.MLPTrainStep", 0),
    ("benchmarks.bench_matmul.SquareMatmul", 0)])
def test_to_device_copies_land_in_memory_the_heap_already_holds_in_every_sample(
        name, param_idx, tmp_path):
    # glibc gave back the heap that setup freed and grew it again inside the next sample: at
    # the regular profile, 5 to 8 of 11 samples took faults, up to one a page copied, the
    # others none (16 MB arrays, which keep more than the touched pool, still fault now and
    # then)
    pages_a_copy, faults = asv_samples_faults(name, param_idx, "time_to_device", tmp_path)
    assert pages_a_copy >= 256  # large enough that fresh pages would show
    # a few faults are the interpreter's own; a copy into fresh pages is one per page
    assert max(faults) < pages_a_copy // 8, faults


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's heap policy")
@pytest.mark.parametrize("name", [
    "benchmarks.bench_array_ops.Rfft", "benchmarks.bench_linalg.Svd",
    "benchmarks.bench_models.MLPTrainStep"])
def test_numpy_baselines_compute_in_memory_the_heap_already_holds(name, tmp_path):
    # glibc gave back the pages of each call's freed outputs and temporaries, and the next
    # call faulted them in again: at the regular profile Rfft took 1542 faults a call, Svd 396
    # and MLPTrainStep 1381 (a sample's four calls: 1604-6168), 14-48% of their time
    pages_read, faults = asv_samples_faults(name, 0, "time_numpy", tmp_path)
    assert pages_read >= 32, pages_read  # inputs of at least 128 KB: outputs that size would show
    assert max(faults) < 64, faults


def test_bandwidths_are_positive_bytes_per_second_or_na_where_nothing_moves(quick):
    bench = bench_transfer.Bandwidth()
    bench.setup("64MB")
    for name in ("track_to_device_bytes_per_second", "track_to_host_bytes_per_second"):
        out = device.block(bench.prepared.run(*bench.prepared.args))
        host = jax.device_get(out)
        if np.shares_memory(host, np.asarray(out)) and name.startswith("track_to_host"):
            # jax 0.10.2 on CPU: device_get gives NumPy the device buffer itself
            with pytest.raises(NotImplementedError, match="no bytes move"):
                getattr(bench, name)("64MB")
            assert bench_transfer._host_copy_aliases(out)
            continue
        value = getattr(bench, name)("64MB")
        assert math.isfinite(value) and value > 0, name


def test_a_device_get_that_copies_is_a_bandwidth(quick, monkeypatch):
    bench = bench_transfer.Bandwidth()
    bench.setup("64MB")
    real_get = jax.device_get
    monkeypatch.setattr(jax, "device_get", lambda x: np.array(real_get(x), copy=True))
    assert not bench_transfer._host_copy_aliases(
        device.block(bench.prepared.run(*bench.prepared.args)))
    value = bench.track_to_host_bytes_per_second("64MB")
    assert math.isfinite(value) and value > 0


# ---- startup and memory --------------------------------------------------------------------

TIMERAW = [name for name in dir(bench_startup.ColdStart) if name.startswith("timeraw_")]


@pytest.mark.parametrize("name", TIMERAW)
def test_cold_start_code_runs_in_a_fresh_interpreter(name):
    code = getattr(bench_startup.ColdStart(), name)()
    stmt, setup = code if isinstance(code, tuple) else (code, "")
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", f"{setup}\n{stmt}"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_memory_benchmarks_step_the_models_and_skip_device_peak_on_cpu(quick):
    for cls in (bench_memory.MLPTrainStep, bench_memory.TransformerBlock,
                bench_memory.CNNTrainStep):
        model = getattr(bench_models, cls.__name__)
        assert cls.program is model.program and cls.inputs is model.inputs
    bench = bench_memory.MLPTrainStep()
    bench.setup("float32")
    step = bench.track_host_step_peak_bytes("float32")
    # the step's own memory, not the process's (hundreds of MB with jax and its runtime)
    assert 0 <= step < bench_memory._status_bytes("VmRSS") / 4
    with pytest.raises(NotImplementedError, match="memory_stats"):
        bench.track_device_peak_bytes("float32")


def test_host_step_peak_is_what_the_step_adds(quick, monkeypatch):
    bench = bench_memory.MLPTrainStep()
    bench.setup("float32")
    size = 200 << 20

    def step():  # a step that holds 200 MB at its peak, then frees them
        block = np.ones(size, np.uint8)
        assert block.sum() == size

    monkeypatch.setattr(bench, "_step", step)
    found = bench.track_host_step_peak_bytes("float32")
    assert size - (1 << 20) <= found < size + (32 << 20)  # pages come and go by the KB


# 64 MB from the C heap in blocks below glibc's mmap threshold, freed under a block that stays:
# the heap keeps their pages, and the step's blocks reuse them. Prints what the step added.
# Its own interpreter: a heap worn by other tests has free holes in pages still partly in use,
# which no trim can give back, and the step's blocks reused 8 MB of them (results/HOST-PEAK.md)
STEP_INTO_FREED_PAGES = """
from benchmarks import bench_memory
bench = bench_memory.MLPTrainStep()
bench.setup("float32")
size, block = 64 << 20, 4096
freed = [bytearray(block) for _ in range(size // block)]
kept = bytearray(block)
del freed
def step():
    again = [bytearray(block) for _ in range(size // block)]
    assert len(again) * block == size
bench._step = step
print(bench.track_host_step_peak_bytes("float32"), len(kept))
"""


def test_host_step_peak_counts_pages_the_heap_had_freed_and_kept(tmp_path):
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=paths.ROOT,
               JAXBENCH_PROFILE="quick")
    proc = subprocess.run([sys.executable, "-c", STEP_INTO_FREED_PAGES], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    found, kept = (int(n) for n in proc.stdout.split())
    size = 64 << 20
    assert size - (1 << 20) <= found < size + (32 << 20)
    assert kept == 4096


def test_host_step_peak_is_not_lowered_by_garbage_freed_during_the_step(quick, monkeypatch):
    bench = bench_memory.MLPTrainStep()
    bench.setup("float32")
    size = 32 << 20
    cycle = [np.ones(2 * size, np.uint8)]
    cycle.append(cycle)  # 64 MB that only the garbage collector frees
    del cycle
    collecting = []

    def step():
        collecting.append(gc.isenabled())
        gc.collect()  # as a collection that the step's allocations set off would
        block = np.ones(size, np.uint8)
        assert block.sum() == size

    monkeypatch.setattr(bench, "_step", step)
    assert gc.isenabled()
    found = bench.track_host_step_peak_bytes("float32")
    assert size - (1 << 20) <= found < size + (32 << 20)
    assert collecting == [False] and gc.isenabled()
