"""GPU-facing benchmarks: what runs on the CPU here, and that GPU-only cases skip with a reason."""

import pytest

from benchmarks import bench_gpu


@pytest.fixture(autouse=True)
def quick(profile):
    profile("quick")
    yield


@pytest.mark.parametrize("dtype", bench_gpu.MatmulThroughput.params[0])
def test_throughput_cases_skip_on_cpu_with_a_reason(dtype):
    with pytest.raises(NotImplementedError, match="GPU-only"):
        bench_gpu.MatmulThroughput().setup(dtype)


def test_throughput_setup_cache_does_nothing_on_cpu(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bench_gpu.setup_cache()  # must not fail: that would fail every case


@pytest.fixture
def on_cpu_anyway(monkeypatch):
    """Past the GPU check, to test the arithmetic on this CPU."""
    monkeypatch.setattr(bench_gpu.MatmulThroughput, "platforms", ())


def test_achieved_flops_counts_two_flops_per_multiply_add(monkeypatch, on_cpu_anyway):
    bench = bench_gpu.MatmulThroughput()
    bench.setup("float32")
    timed = []

    def half_a_second(call, calls=bench_gpu.TIMED_CALLS):
        timed.append(call())
        return 0.5

    monkeypatch.setattr(bench_gpu, "_median_seconds", half_a_second)
    side = bench_gpu.SIDES["quick"]
    assert bench.track_achieved_flops_per_second("float32") == 2 * side**3 / 0.5
    assert timed[0].shape == (side, side)


def test_unknown_device_has_no_peak(on_cpu_anyway):
    bench = bench_gpu.MatmulThroughput()
    bench.setup("float32")
    with pytest.raises(NotImplementedError, match="no data-sheet peak"):
        bench.track_peak_flops_per_second("float32")


def test_async_dispatch_depth_counts_queued_calls():
    bench = bench_gpu.AsyncDispatchDepth()
    bench.setup("float32")
    depth = bench.track_calls_queued_before_first_result("float32")
    assert isinstance(depth, int) and 1 <= depth <= bench.max_calls
