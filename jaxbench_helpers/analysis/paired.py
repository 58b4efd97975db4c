"""Statistics of paired rounds: the verdict of an interleaved A/B comparison.

Each round measures both sides seconds apart (A then B, or B then A: the order alternates,
ABBA..., so a drift of the machine during a pair cancels over two pairs). A round gives one
log-ratio ``d = ln(median B / median A)``; what the machine did to both sides in that round
cancels in it. The estimate is the Hodges-Lehmann median of the Walsh averages of the ``d``,
with the distribution-free confidence interval of the Wilcoxon signed-rank test: robust to a
round that a slow spell of the machine hit on one side only, with no assumption of normality.
"""

import functools
import math
import statistics
from dataclasses import dataclass

CONFIDENCE = 0.95


@functools.cache
def _signed_rank_counts(n):
    """How many of the 2**n sign patterns give each signed-rank sum W (index W)."""
    counts = [1]
    for rank in range(1, n + 1):
        grown = counts + [0] * rank
        for w, ways in enumerate(counts):
            grown[w + rank] += ways
        counts = grown
    return counts


def critical_rank(n, confidence=CONFIDENCE):
    """The largest C with P(W <= C) <= (1 - confidence) / 2 under no change, or None when even
    W = 0 is too likely (too few rounds for that confidence)."""
    counts = _signed_rank_counts(n)
    total = 2 ** n
    tail = (1 - confidence) / 2
    cumulative, critical = 0, None
    for w, ways in enumerate(counts):
        cumulative += ways
        if cumulative / total > tail:
            break
        critical = w
    return critical


def fewest_rounds(confidence=CONFIDENCE):
    """The fewest rounds for which the interval exists at ``confidence``."""
    n = 1
    while critical_rank(n, confidence) is None:
        n += 1
    return n


@dataclass(frozen=True)
class Estimate:
    """A paired ratio (B over A) with its confidence interval, from ``rounds`` rounds."""

    ratio: float
    low: float
    high: float
    rounds: int

    @property
    def width(self):
        """The interval's width in log terms: ln(high / low)."""
        return math.log(self.high / self.low)

    def scaled(self, factor):
        """The same estimate divided by ``factor`` (a drift both sides shared)."""
        return Estimate(self.ratio / factor, self.low / factor, self.high / factor, self.rounds)


def hodges_lehmann(log_ratios, confidence=CONFIDENCE):
    """The Estimate of ``exp(d)`` from per-round log-ratios ``d``; the interval is None-free
    only from ``fewest_rounds`` rounds on (before that it spans everything measured)."""
    d = list(log_ratios)
    if not d:
        raise ValueError("no rounds to estimate from")
    walsh = sorted((d[i] + d[j]) / 2 for i in range(len(d)) for j in range(i, len(d)))
    centre = statistics.median(walsh)
    critical = critical_rank(len(d), confidence)
    if critical is None:
        low, high = walsh[0], walsh[-1]
    else:
        low, high = walsh[critical], walsh[len(walsh) - 1 - critical]
    return Estimate(math.exp(centre), math.exp(low), math.exp(high), len(d))


def decided(estimate, factor, confidence=CONFIDENCE):
    """Whether more rounds would not change the verdict: the interval is narrower than the
    threshold (ln factor), or lies wholly beyond it either way."""
    if critical_rank(estimate.rounds, confidence) is None:
        return False
    threshold = math.log(factor)
    if estimate.width < threshold:
        return True
    return math.log(estimate.low) > threshold or math.log(estimate.high) < -threshold


def mark(estimate, factor):
    """asv's marks: '+' B is larger by more than ``factor`` and the interval excludes no
    change, '-' smaller likewise, ' ' neither."""
    if estimate.ratio > factor and estimate.low > 1:
        return "+"
    if estimate.ratio < 1 / factor and estimate.high < 1:
        return "-"
    return " "
