"""The run-phase operation workloads (array ops, linalg, control flow, autodiff, random)
compute what they claim: each output matches its NumPy reference at every parameter
combination, and a wrong program is caught before anything is timed."""

import gc
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from benchmarks import (
    bench_array_ops,
    bench_autodiff,
    bench_control_flow,
    bench_linalg,
    bench_random,
)
from jaxbench_helpers.runtime import compat, data, workload

DETERMINISTIC = (bench_array_ops, bench_linalg, bench_control_flow, bench_autodiff)
MODULES = DETERMINISTIC + (bench_random,)


def workload_classes(modules=MODULES):
    return [cls for mod in modules for _, cls in inspect.getmembers(mod, inspect.isclass)
            if cls.__module__ == mod.__name__ and issubclass(cls, workload.Workload)]


@pytest.fixture
def quick(profile, tmp_path, monkeypatch):
    """The quick profile, asv's shared folder in a temporary directory, x64 off after."""
    profile("quick")
    monkeypatch.chdir(tmp_path)
    yield
    compat.set_x64(False)


@pytest.mark.parametrize("cls", workload_classes(), ids=lambda cls: cls.__name__)
def test_every_output_matches_numpy(quick, cls):
    """setup_cache compiles each parameter combination and checks it against the reference
    (only for finite values where there is none: the random samplers)."""
    cls().warm_compilation_cache()


def test_every_deterministic_workload_has_a_reference():
    missing = [cls.__name__ for cls in workload_classes(DETERMINISTIC) if cls.reference is None]
    assert not missing


def test_random_samples_have_the_right_distribution(quick):
    """The random workloads' outputs are only checked to be finite (setup_cache, setup): check
    their moments and ranges here (4096 draws: the bounds are about 10 standard errors)."""
    draws = {}
    for cls in workload_classes([bench_random]):
        bench = cls()
        bench.setup("float32")
        draws[cls.__name__] = np.asarray(bench.prepared.run(*bench.prepared.args))
    uniform, normal = draws["Uniform"], draws["Normal"]
    assert uniform.min() >= 0 and uniform.max() < 1 and abs(uniform.mean() - 0.5) < 0.05
    assert abs(normal.mean()) < 0.15 and abs(normal.std() - 1) < 0.1
    logits = bench_random.SIZES["quick"]["logits"]
    assert draws["Categorical"].shape == logits[:1]
    assert 0 <= draws["Categorical"].min() and draws["Categorical"].max() < logits[1]
    assert len(np.unique(uniform)) > 0.99 * uniform.size  # not one value repeated


@pytest.mark.parametrize("axis", list(bench_array_ops.AXES))
def test_a_pinned_numpy_baseline_computes_into_its_output_at_the_pinned_offsets(quick, axis):
    bench = bench_array_ops.SumOverAxis()
    bench.setup("float32", axis)
    prepared = bench.prepared
    (x,), out = prepared.reference_args, prepared.reference_out
    assert x.ctypes.data % data.PAGE == 0
    assert out.ctypes.data % data.PAGE == data.OUTPUT_OFFSET
    np.testing.assert_array_equal(x, prepared.host_args[0])
    out[...] = np.nan
    before = out.ctypes.data
    bench.time_numpy("float32", axis)
    assert out.ctypes.data == before
    np.testing.assert_allclose(out, np.sum(prepared.host_args[0], axis=bench_array_ops.AXES[axis]),
                               rtol=1e-5)


@pytest.mark.parametrize("axis", list(bench_array_ops.AXES))
def test_the_run_phase_input_sits_on_a_page_boundary_and_outlives_setup(quick, axis):
    bench = bench_array_ops.SumOverAxis()
    bench.setup("float32", axis)
    (x,) = bench.prepared.args
    assert x.devices() == {jax.devices("cpu")[0]}
    assert x.unsafe_buffer_pointer() % data.PAGE == 0
    gc.collect()  # the host copy the input aliases must outlive setup's locals
    churn = [np.full(x.size, np.nan, np.float32) for _ in range(4)]
    expected = np.sum(bench.prepared.host_args[0], axis=bench_array_ops.AXES[axis])
    np.testing.assert_allclose(np.asarray(bench.prepared.run(x)), expected, rtol=1e-4, atol=1e-5)
    del churn
    bench.setup("float32", axis)  # a later sample's setup keeps the input where it is
    assert bench.prepared.args[0] is x


# ---- wrong programs: each must fail its check in setup_cache -------------------------------

class SumOverWrongAxis(bench_array_ops.SumOverAxis):
    @staticmethod
    def program(x, *, axis):
        return jnp.sum(x, axis=1 if axis == 0 else 0)


class TopKSmallest(bench_array_ops.TopK):
    @staticmethod
    def program(x):
        return lax.top_k(-x, bench_array_ops.TOP_K)


class SvdWithoutSignConvention(bench_linalg.Svd):
    @staticmethod
    def program(a):
        u, s, vt = jnp.linalg.svd(a, full_matrices=False)
        return -u, s, -vt  # a valid SVD, but not the one with positive column sums


class ScanInReverse(bench_control_flow.Scan):
    @staticmethod
    def program(h, xs):
        def step(h, x):
            h = jnp.tanh(0.5 * h + x)
            return h, h

        return lax.scan(step, h, xs, reverse=True)


class GradWithoutTheMean(bench_autodiff.Grad):
    @staticmethod
    def program(params, x, y):
        return jax.grad(lambda p: x.shape[0] * bench_autodiff._loss(p, x, y))(params)


class RematGradOfReversedLayers(bench_autodiff.RematGrad):
    @staticmethod
    def program(ws, x):
        return jax.grad(bench_autodiff._deep_loss)(ws[::-1], x)[::-1]


@pytest.mark.parametrize("cls, message", [
    (SumOverWrongAxis, r"JAX gave float32\(.*NumPy float32"),
    (TopKSmallest, "relative error .* against NumPy"),
    (SvdWithoutSignConvention, "relative error .* against NumPy"),
    (ScanInReverse, "relative error .* against NumPy"),
    (GradWithoutTheMean, "relative error .* against NumPy"),
    (RematGradOfReversedLayers, "relative error .* against NumPy"),
], ids=lambda v: getattr(v, "__name__", ""))
def test_a_wrong_program_fails_before_anything_is_timed(quick, cls, message):
    with pytest.raises(AssertionError, match=message):
        cls().warm_compilation_cache()
