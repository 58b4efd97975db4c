"""The suite's figures agree with hand-written loops over the same programs and inputs.

For each workload, asv_runner's own benchmark object (set up, run once, then sampled with its
own timer) and a loop written here, with its own ``jax.jit`` and its own device inputs, take
samples in turn in this process. Adjacent samples share the machine's load of the moment, which
on a shared machine swings single figures by tens of percent, so each pair gives one ratio
(suite / hand-written) and every ratio of every round is judged together: the median's
confidence interval (order statistics, distribution-free) must lie inside 1 +- the tolerance.
Rounds of ``PAIRS`` pairs are added until the interval is inside the band or outside it, up to
``MAX_ROUNDS``; one lucky round cannot pass a phase that is off in the others. A phase that
timed something else (only the dispatch, a transfer, setup work, the wrong inputs) moves the
whole interval. Quick sizes, CPU, except where a quick call is so short that the suite's own
Python per call (see RUN_PROFILE) is a sizeable part of it; never an absolute time. Each
comparison runs by itself in a new interpreter, as asv gives each benchmark a new process.
"""

import gc
import itertools
import math
import operator
import os
import statistics
import subprocess
import sys
import time
import warnings

import jax
import pytest
from asv_runner.discovery import _get_benchmark
from jax import lax

from benchmarks import bench_dispatch, bench_matmul, bench_models
from jaxbench_helpers.runtime import data, device, profiles, workload

pytestmark = pytest.mark.judges_timings

# suite seconds / hand-written seconds must lie within 1 +- this
RUN_TOLERANCE = 0.05
DISPATCH_TOLERANCE = 0.10
# adjacent suite/hand sample pairs per round; rounds before the first verdict, and at most
PAIRS = 41
MIN_ROUNDS = 2
MAX_ROUNDS = 8
# two-sided normal quantile of the median's confidence interval (99%)
Z = 2.576

RUN_WORKLOADS = [bench_matmul.SquareMatmul, bench_models.MLPTrainStep,
                 bench_models.TransformerBlock, bench_models.CNNTrainStep,
                 bench_models.ODEIntegration]
DISPATCH_PHASES = ["time_dispatch_100_calls", "time_latency_100_calls"]
# The suite's run phase calls the program through asv's bound method, the recompilation guard
# and device.block: about 0.5 us a call more than the hand-written loop's one closure (0.9 us
# against 1.4 us to wait on a ready array). At the quick size SquareMatmul's call takes 15 us
# on a 2-core EPYC VM, so that alone read 1.02-1.08 there; at the regular size (about 10 ms a
# call) it is under 0.01%, and a phase that times something else still moves the ratio whole.
# The MLP's quick step read 1.034 and 1.053 (a failed CI run) on a 2-core EPYC VM, and
# 0.979-1.011 in five runs at the regular size.
RUN_PROFILE = {bench_matmul.SquareMatmul: "regular", bench_models.MLPTrainStep: "regular"}


@pytest.fixture
def quick(fresh, tmp_path, monkeypatch):
    """Quick sizes, fresh state, and a clean working directory (no shared compile cache)."""
    monkeypatch.chdir(tmp_path)


# the node id of the test a new interpreter runs by itself (ran_alone)
ALONE_ENV = "JAXBENCH_FIDELITY_ALONE"


def ran_alone(request):
    """Runs this test by itself in a new interpreter and asserts it passed there: True, the
    caller is done. Inside that interpreter: False, the caller runs the comparison.

    In the one long-lived process of the timing tests, the latency cases' two sides drifted
    apart after the earlier tests: JitTrivial's suite/hand read 0.83-0.97 there (CI and a
    2-core EPYC VM; JitSimple 'host' 0.92-0.94) and 1.00-1.01 by itself. Not the hand loop's
    per-call lookup of ``jax.block_until_ready`` nor its own jit: seconds after a 0.969
    verdict, that process timed the suite's loop, the hand loop and the hand loop with the
    waiter bound once within 1.5% of each other. A per-call cost that moves with the process's
    history, as the layout modes do (results/LAYOUT-MODES.md); a new interpreter a comparison
    gives both sides the state an asv benchmark process has."""
    nodeid = request.node.nodeid
    if os.environ.get(ALONE_ENV) == nodeid:
        return False
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                           "-s", "-o", "addopts=", nodeid],
                          cwd=request.config.rootpath, env={**os.environ, ALONE_ENV: nodeid},
                          capture_output=True, text=True, timeout=900)
    print("\n".join(line for line in proc.stdout.splitlines() if "suite/hand" in line))
    assert proc.returncode == 0, (f"{nodeid} failed in a new interpreter:\n"
                                  f"{proc.stdout[-6000:]}{proc.stderr[-3000:]}")
    return True


# ---- measuring ----------------------------------------------------------------------------

def suite_sampler(cls, method, params):
    """Samples of ``cls.method`` at the parameter values ``params`` as asv_runner takes them:
    its own benchmark object, set up and run once (its warm-up, and the calls per sample it
    chooses), then its own timer. Returns (a function taking one sample, in seconds per call;
    calls per sample)."""
    bench = _get_benchmark(method, sys.modules[cls.__module__], cls, getattr(cls, method))
    bench.set_param_idx(list(itertools.product(*cls.params)).index(params))
    assert not bench.do_setup(), "the benchmark skipped itself"
    number = bench.do_run()["number"]
    timer = bench._get_timer(*bench._build_params())
    return (lambda: timer.timeit(number) / number), number


def hand_sampler(unit, number):
    """A function taking one sample of ``number`` calls of ``unit``, in seconds per call, with
    the garbage collector off during the sample as timeit (asv_runner's timer) has it."""

    def sample():
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            start = time.perf_counter()
            for _ in range(number):
                unit()
            return (time.perf_counter() - start) / number
        finally:
            if was_enabled:
                gc.enable()

    unit()  # compile the hand-written side, untimed
    return sample


class Verdict:
    """The median of every suite/hand ratio so far and its confidence interval, against the
    band 1 +- ``tolerance``. ``outcome``: 'agrees' (interval inside the band), 'differs'
    (interval outside it) or 'undecided' (interval across an edge: more pairs may decide).
    ``agrees``: the interval is inside the band or, still undecided, the pooled median is."""

    def __init__(self, ratios, tolerance):
        ordered = sorted(ratios)
        n = len(ordered)
        k = max(0, math.floor((n - Z * math.sqrt(n)) / 2))
        self.n, self.tolerance = n, tolerance
        self.median = statistics.median(ordered)
        self.low, self.high = ordered[k], ordered[n - 1 - k]
        if 1 - tolerance <= self.low and self.high <= 1 + tolerance:
            self.outcome = "agrees"
        elif self.high < 1 - tolerance or self.low > 1 + tolerance:
            self.outcome = "differs"
        else:
            self.outcome = "undecided"
        self.agrees = self.outcome == "agrees" or (
            self.outcome == "undecided" and abs(self.median - 1) <= tolerance)

    def __repr__(self):
        return (f"{self.outcome}: suite/hand-written {self.median:.3f}, 99% interval "
                f"{self.low:.3f}-{self.high:.3f} over {self.n} pairs (band 1 +- "
                f"{self.tolerance})")


def judge(rounds, tolerance):
    """The verdict on every ratio of every round, pooled."""
    return Verdict([ratio for ratios in rounds for ratio in ratios], tolerance)


def suite_over_hand(cls, method, params, unit, tolerance):
    """Rounds of adjacent-sample ratios (suite / hand-written) until the pooled verdict is
    decided or ``MAX_ROUNDS`` are taken; returns the verdict."""
    suite, number = suite_sampler(cls, method, params)
    hand = hand_sampler(unit, number)
    rounds = []
    while True:
        ratios = []
        for i in range(PAIRS):
            # alternate which goes first, so a trend in the machine's load favours neither
            if i % 2:
                ratios.append(suite() / hand())
            else:
                hand_seconds = hand()
                ratios.append(suite() / hand_seconds)
        rounds.append(ratios)
        verdict = judge(rounds, tolerance)
        if len(rounds) >= MAX_ROUNDS or (
                len(rounds) >= MIN_ROUNDS and verdict.outcome != "undecided"):
            return verdict


def report(name, verdict):
    print(f"\n{name}: {verdict!r}")


# ---- the run phase ------------------------------------------------------------------------

def hand_run_unit(cls, params):
    """One call of the compiled program on device inputs, waited for: built here from the
    workload's host inputs with a jit of its own."""
    host = cls().inputs(profiles.current(), *params, dispatch=False)
    run, args = jax.jit(cls.program), jax.device_put(host)

    def unit():
        jax.block_until_ready(run(*args))

    return unit


@pytest.mark.parametrize("cls", RUN_WORKLOADS, ids=lambda c: c.__name__)
def test_run_phase_agrees_with_a_hand_written_loop(request, quick, profile, cls):
    if ran_alone(request):
        return
    profile(RUN_PROFILE.get(cls, "quick"))
    params = tuple(values[0] for values in cls.params)
    verdict = suite_over_hand(cls, "time_run", params, hand_run_unit(cls, params),
                              RUN_TOLERANCE)
    report(f"{cls.__name__}.time_run{params}", verdict)
    assert verdict.agrees, verdict


# ---- the dispatch phases ------------------------------------------------------------------

# The call styles bench_dispatch times through one plain function (static, keyword and
# bound-method calls), written out with jitted functions of their own
_scale_static = jax.jit(lambda x, factor: x * factor, static_argnums=1)
_add = jax.jit(lambda x, y: x + y)
_scaler = bench_dispatch.Scaler(bench_dispatch.STATIC_FACTOR)


def hand_dispatch_call(cls, params):
    """(function, arguments) of one dispatch-phase call, from the workload's tiny host
    inputs, placed and jitted here."""
    host = cls().inputs(profiles.current(), *params, dispatch=True)
    args = jax.device_put(host)
    case = (cls.__name__, *params[1:])
    if case == ("JitSimple", "host"):
        # where the benchmark puts them: jax would alias an aligned scalar and copy the others
        return jax.jit(cls.program), tuple(data.at_fixed_address(a) for a in host)
    if case == ("JitSimple", "python_scalar"):
        return jax.jit(cls.program), (args[0], bench_dispatch.PYTHON_SCALAR)
    if case == ("JitRandomKey", "typed"):
        return jax.jit(cls.program), (args[0], jax.device_put(
            jax.random.key(bench_dispatch.KEY_SEED)))
    by_name = {
        "JitStaticArg": lambda x: _scale_static(x, bench_dispatch.STATIC_FACTOR),
        "JitKeywordArgs": lambda x, y: _add(x=x, y=y),
        "JitMethod": lambda x: _scaler.apply(x),
        "EagerUnary": lax.neg,
        "EagerBinary": operator.add,
        "EagerIndexing": lambda x: (x[3], x[2:5]),
    }
    return by_name.get(cls.__name__) or jax.jit(cls.program, **cls.jit_options), args


def hand_dispatch_unit(fn, args, method):
    """100 calls, queued then waited for once, or each waited for."""
    calls = workload.DISPATCH_CALLS
    if method == "time_dispatch_100_calls":
        def unit():
            jax.block_until_ready([fn(*args) for _ in range(calls)])
    else:
        def unit():
            for _ in range(calls):
                jax.block_until_ready(fn(*args))
    return unit


def hand_donated_unit(fn, args, method):
    """100 calls, each output donated as the next input, waited for at the end or each."""
    state = list(args)
    calls = workload.DISPATCH_CALLS

    def unit():
        x = state[0]
        for _ in range(calls):
            x = fn(x)
            if method == "time_latency_100_calls":
                jax.block_until_ready(x)
        state[0] = jax.block_until_ready(x)

    return unit


def dispatch_cases():
    """Every dispatch workload at every parameter combination, less the 1000-argument case
    (seconds to compile; 100 takes the same path)."""
    classes = [cls for cls in workload.workload_classes(bench_dispatch)
               if hasattr(cls, "time_dispatch_100_calls")]
    return [pytest.param(cls, params, method,
                         id=f"{cls.__name__}-{'-'.join(map(str, params[1:]))}-{method[5:]}")
            for cls in classes for params in itertools.product(*cls.params)
            if params[1:] != (bench_dispatch.NUM_ARGS[-1],)
            for method in DISPATCH_PHASES]


@pytest.mark.parametrize("cls, params, method", dispatch_cases())
def test_dispatch_phase_agrees_with_a_hand_written_loop(request, quick, cls, params, method):
    if ran_alone(request):
        return
    fn, args = hand_dispatch_call(cls, params)
    make_unit = hand_donated_unit if cls is bench_dispatch.JitDonated else hand_dispatch_unit
    with warnings.catch_warnings():
        # where the CPU cannot donate, jax warns when it compiles
        warnings.filterwarnings("ignore", message="Some donated buffers were not usable")
        verdict = suite_over_hand(cls, method, params, make_unit(fn, args, method),
                                  DISPATCH_TOLERANCE)
    report(f"{cls.__name__}.{method}{params}", verdict)
    assert verdict.agrees, verdict


# ---- the check catches a phase that times something else ----------------------------------

class RunsFourTimes(bench_matmul.SquareMatmul):
    """A broken run phase: four calls per timed call (an inner loop the figure does not divide
    out)."""

    def time_run(self, dtype):
        for _ in range(4):
            device.block(self.prepared.run(*self.prepared.args))


class WaitsFourHundredTimes(bench_dispatch.JitTrivial):
    """A broken latency phase: 400 waited calls under the name of 100."""

    def time_latency_100_calls(self, dtype):
        run, args = self.prepared.run, self.prepared.tiny_args
        for _ in range(4 * workload.DISPATCH_CALLS):
            device.block(run(*args))


class SevenPercentMore(bench_matmul.SquareMatmul):
    """A subtly biased run phase: every timed call also waits 7% of the call's own time
    (measured once, in the first setup), whatever the calls per sample. (Running the program
    twice every 14th call is 7% only where a sample holds many calls; with one call a sample,
    at the regular size, the median of the ratios rightly ignores one doubled sample in 14.)"""

    extra_seconds = None

    def setup(self, *params):
        super().setup(*params)
        if params and self.extra_seconds is None:
            run, args = self.prepared.run, self.prepared.args
            seconds = []
            for _ in range(21):
                start = time.perf_counter()
                device.block(run(*args))
                seconds.append(time.perf_counter() - start)
            self.extra_seconds = 0.07 * statistics.median(seconds)

    def time_run(self, dtype):
        device.block(self.prepared.run(*self.prepared.args))
        end = time.perf_counter() + self.extra_seconds
        while time.perf_counter() < end:
            pass


def test_the_check_fails_a_run_phase_that_times_more_than_its_name_says(quick, profile):
    profile(RUN_PROFILE[bench_matmul.SquareMatmul])  # the size its agreement is tested at
    params = ("float32",)
    unit = hand_run_unit(bench_matmul.SquareMatmul, params)
    verdict = suite_over_hand(RunsFourTimes, "time_run", params, unit, RUN_TOLERANCE)
    report("RunsFourTimes.time_run", verdict)
    assert verdict.outcome == "differs" and verdict.median > 1 + RUN_TOLERANCE, verdict


def test_the_check_fails_a_dispatch_phase_that_times_more_than_its_name_says(quick):
    params, method = ("float32",), "time_latency_100_calls"
    unit = hand_dispatch_unit(*hand_dispatch_call(bench_dispatch.JitTrivial, params), method)
    verdict = suite_over_hand(WaitsFourHundredTimes, method, params, unit, DISPATCH_TOLERANCE)
    report("WaitsFourHundredTimes.time_latency_100_calls", verdict)
    assert verdict.outcome == "differs" and verdict.median > 1 + DISPATCH_TOLERANCE, verdict


def test_the_check_fails_a_run_phase_seven_percent_off(quick, profile):
    profile(RUN_PROFILE[bench_matmul.SquareMatmul])  # the size its agreement is tested at
    params = ("float32",)
    unit = hand_run_unit(bench_matmul.SquareMatmul, params)
    verdict = suite_over_hand(SevenPercentMore, "time_run", params, unit, RUN_TOLERANCE)
    report("SevenPercentMore.time_run", verdict)
    assert not verdict.agrees and verdict.median > 1 + RUN_TOLERANCE, verdict


def _first_within(rounds, tolerance):
    """The judgement this file made before: the first round whose median is within the band."""
    return any(abs(statistics.median(r) - 1) <= tolerance for r in rounds)


def test_one_lucky_round_does_not_pass_a_biased_phase():
    """Rounds of a phase 7% off in which, by chance, one round's median lands inside the band:
    taking the first round that agrees passed it; the pooled verdict does not."""
    biased = [1.07 + 0.002 * (i - 20) for i in range(41)]  # median 1.07
    lucky = [1.04 + 0.002 * (i - 20) for i in range(41)]  # median 1.04
    rounds = [biased, biased, lucky, biased, biased]
    assert _first_within(rounds, RUN_TOLERANCE)  # the old judgement: passed
    assert judge(rounds, RUN_TOLERANCE).outcome == "differs"
    assert not judge(rounds, RUN_TOLERANCE).agrees
    honest = [1.00 + 0.002 * (i - 20) for i in range(41)]
    assert judge([honest, honest], RUN_TOLERANCE).outcome == "agrees"
    # noisy: the interval is too wide to decide, the pooled median judges
    noisy = [[1 + 0.3 * math.sin(7 * i + r) for i in range(41)] for r in range(2)]
    assert judge(noisy, RUN_TOLERANCE).outcome == "undecided"
    assert judge(noisy, RUN_TOLERANCE).agrees
    noisy_and_off = [[1.08 + 0.3 * math.sin(7 * i + r) for i in range(41)] for r in range(2)]
    assert judge(noisy_and_off, RUN_TOLERANCE).outcome == "undecided"
    assert not judge(noisy_and_off, RUN_TOLERANCE).agrees
