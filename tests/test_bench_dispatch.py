"""The dispatch workloads are what they claim (in-process, current jax, CPU)."""

import inspect
import itertools
import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks import bench_dispatch
from jaxbench_helpers.runtime import data, device, monitor, profiles, workload

BUDGET = 40


def _workloads():
    return [cls for _, cls in inspect.getmembers(bench_dispatch, inspect.isclass)
            if issubclass(cls, workload.Workload) and cls.__module__ == bench_dispatch.__name__]


def _beyond_the_first_parameters():
    """Parameter combinations other than each class's first (the shared waiting check runs
    that one), less the 1000-argument case (seconds to compile; 100 takes the same path)."""
    return [(cls, params) for cls in _workloads()
            for params in itertools.islice(itertools.product(*cls.params), 1, None)
            if params[1:] != (bench_dispatch.NUM_ARGS[-1],)]


def _set_up(cls, *params):
    bench = cls()
    bench.setup("float32", *params)
    return bench


def test_the_module_stays_within_its_budget():
    cases = sum(math.prod(len(p) for p in cls.params)
                * sum(name.startswith("time_") for name in dir(cls)) for cls in _workloads())
    assert cases <= BUDGET


def test_the_many_args_program_receives_num_args_scalars_in_a_list():
    profile = profiles.current()
    for num_args in bench_dispatch.NUM_ARGS:
        x, xs = bench_dispatch.JitManyArgs().inputs(profile, "float32", num_args, dispatch=True)
        assert isinstance(xs, list) and len(xs) == num_args
        jaxpr = jax.make_jaxpr(bench_dispatch.JitManyArgs.program)(x, xs).jaxpr
        assert len(jaxpr.invars) == num_args + 1


@pytest.mark.parametrize("node, kind", [("custom_class", bench_dispatch.Pair),
                                        ("dataclass", bench_dispatch.Record),
                                        ("dict", dict), ("list", list)])
def test_pytree_records_round_trip_through_jit(fresh, node, kind):
    prepared = _set_up(bench_dispatch.JitPytreeArgs, node).prepared
    x, records = prepared.tiny_args
    out = prepared.run(x, records)
    assert len(out) == bench_dispatch.PYTREE_RECORDS
    assert all(type(record) is kind for record in out)
    assert jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(records)
    for got, given in zip(jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(records)):
        np.testing.assert_allclose(got, np.asarray(given) + np.asarray(x))


@pytest.mark.parametrize("cls", [bench_dispatch.EagerUnary, bench_dispatch.EagerBinary,
                                 bench_dispatch.EagerIndexing])
def test_eager_cases_run_op_by_op_without_compiling_again(fresh, cls):
    prepared = _set_up(cls).prepared
    assert prepared.run is cls.program  # the plain function, not a jax.jit wrapper
    before = monitor.compile_events()
    device.block(prepared.run(*prepared.tiny_args))
    assert monitor.compile_events() == before


def test_the_static_argument_is_static(fresh):
    prepared = _set_up(bench_dispatch.JitStaticArg).prepared
    (x,) = prepared.tiny_args
    before = monitor.compile_events()
    device.block(bench_dispatch._SCALE_STATIC(x, bench_dispatch.STATIC_FACTOR))
    assert monitor.compile_events() == before
    device.block(bench_dispatch._SCALE_STATIC(x, bench_dispatch.STATIC_FACTOR + 1))
    assert monitor.compile_events() > before  # a new static value is a new program


def test_simple_inputs_are_what_they_claim(fresh):
    args = {inputs: _set_up(bench_dispatch.JitSimple, inputs).prepared.tiny_args
            for inputs in bench_dispatch.SIMPLE_INPUTS}
    assert all(isinstance(a, jax.Array) for a in args["device"])
    assert all(type(a) is np.ndarray for a in args["host"])
    x, y = args["python_scalar"]
    assert isinstance(x, jax.Array) and type(y) is float


def test_host_scalars_sit_where_device_put_copies_in_every_process(fresh):
    bench = _set_up(bench_dispatch.JitSimple, "host")
    host = bench.prepared.tiny_args
    assert [a.ctypes.data % data.ALIGNMENT for a in host] == [data.ADDRESS_OFFSET] * 2
    for a, b in zip(host, bench.prepared.host_args):
        np.testing.assert_array_equal(a, b)
    # jax 0.10.2 on CPU aliases a 64-byte aligned array: every call copies instead
    placed = jax.device_put(host[0], bench.prepared.device)
    assert placed.unsafe_buffer_pointer() != host[0].ctypes.data
    aligned = data.at_fixed_address(host[0], data.ALIGNMENT, 0)
    assert jax.device_put(aligned, bench.prepared.device).unsafe_buffer_pointer() == \
        aligned.ctypes.data


def test_the_key_cases_pass_typed_and_raw_keys(fresh):
    raw = _set_up(bench_dispatch.JitRandomKey, "raw").prepared.tiny_args[1]
    typed = _set_up(bench_dispatch.JitRandomKey, "typed").prepared.tiny_args[1]
    assert raw.dtype == np.uint32 and raw.shape == (2,)
    assert jax.dtypes.issubdtype(typed.dtype, jax.dtypes.prng_key)
    np.testing.assert_array_equal(jax.random.key_data(typed), raw)  # the same key bits


def test_typed_keys_skip_cleanly_where_jax_lacks_them(fresh, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delattr(jax.random, "key")
    bench = bench_dispatch.JitRandomKey()
    with pytest.raises(NotImplementedError, match="jax.random.key"):
        bench.setup("float32", "typed")
    bench.warm_compilation_cache()  # the other parameter is still warmed and checked
    bench.setup("float32", "raw")


def test_donation_consumes_each_input_and_the_loop_carries_on(fresh):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bench = _set_up(bench_dispatch.JitDonated)
        warnings.warn(f"{bench_dispatch._DONATION_WARNING}: f32[8]", UserWarning, stacklevel=1)
    assert not caught
    first = bench.prepared.tiny_args[0]
    start = bench.prepared.host_args[0]  # np.asarray(first) would pin it: no donation then
    bench.time_latency_100_calls("float32")
    bench.time_dispatch_100_calls("float32")
    assert first.is_deleted()  # CPU donates on every supported release
    np.testing.assert_allclose(bench.prepared.tiny_args[0], start + 2 * workload.DISPATCH_CALLS)
    bench.setup("float32")  # setup again (asv does, per sample): still a live chain
    bench.time_latency_100_calls("float32")


def test_donated_inputs_are_placed_from_private_copies(fresh, monkeypatch):
    placed = []
    put = device.put

    def recording_put(tree, target):
        placed.extend(jax.tree_util.tree_leaves(tree))
        return put(tree, target)

    monkeypatch.setattr(device, "put", recording_put)
    bench = _set_up(bench_dispatch.JitDonated)
    host = bench.prepared.host_args[0]
    before = host.copy()
    assert placed and not any(np.shares_memory(leaf, host) for leaf in placed)
    bench.time_latency_100_calls("float32")
    bench.setup("float32")  # re-places the donated inputs, from copies again
    assert not any(np.shares_memory(leaf, host) for leaf in placed)
    np.testing.assert_array_equal(host, before)


# ---- the other parameter combinations wait too ---------------------------------------------

def _slow(fn):
    """``fn`` behind ~2 ms of device work, so an unwaited call is still running at the end."""

    def program(*args):
        spin = jax.lax.fori_loop(0, 4, lambda _, a: jnp.tanh(a @ a),
                                 jnp.full((128, 128), 0.01, jnp.float32))
        first = jnp.where(spin.sum() == 1234.5, args[0] + 1, args[0])
        return fn(first, *args[1:])

    return jax.jit(program)


def _is_ready(leaf):
    if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        leaf = jax.random.key_data(leaf)
    return leaf.is_ready()


@pytest.mark.parametrize("cls, params", _beyond_the_first_parameters(),
                         ids=[f"{c.__name__}-{'-'.join(map(str, p))}"
                              for c, p in _beyond_the_first_parameters()])
def test_other_parameters_wait_for_their_device_work(fresh, cls, params):
    bench = cls()
    bench.setup(*params)
    prepared, slow, produced = bench.prepared, _slow(cls.program), []
    device.block(slow(*prepared.tiny_args))  # compile outside the timing

    def recording_run(*args):
        produced.append(slow(*args))
        return produced[-1]

    prepared.run = recording_run
    for name in ("time_dispatch_100_calls", "time_latency_100_calls"):
        getattr(bench, name)(*params)
        assert all(_is_ready(leaf) for leaf in jax.tree_util.tree_leaves(produced)), name
