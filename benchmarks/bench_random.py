"""Random number generation at steady state: jax.random samplers, compiled.

Each class draws one batch of samples from a key made in setup and passed in as a program
argument (a typed ``jax.random.key`` where this JAX has one, else a raw ``PRNGKey``), so the
timed call is the generator's device work (threefry bits, then the transform) and nothing
else. The output is random, so it is only checked to be finite; NumPy's generators are a
different algorithm and no baseline.
"""

import jax
import numpy as np

from jaxbench_helpers.runtime import data, phases, workload


def setup_cache():
    """One warm-up process for every workload class here (asv runs it before any
    benchmark of the module, in the folder they all share)."""
    workload.warm_module(__name__)

# regular: ~5-15 ms on a 2-core CPU (threefry costs ~25 ns per 32-bit draw there)
SIZES = {
    "quick": {"samples": 4096, "logits": (64, 64)},
    "regular": {"samples": 1 << 18, "logits": (512, 256)},
    "large": {"samples": 1 << 22, "logits": (8192, 1024)},
}
# samples: how many uniform or normal draws; logits: (draws, categories) for categorical


def _key():
    """A key on the default device, typed where this JAX has typed keys."""
    make = getattr(jax.random, "key", None) or jax.random.PRNGKey
    return make(data.SEED)


def _template(profile, dtype):
    """An array whose shape and dtype the samples take (its values are never read)."""
    return np.zeros(SIZES[profile.name]["samples"], dtype)


class Uniform(phases.RunPhase, workload.Workload):
    """jax.random.uniform, 2^18 float32 draws (regular profile): raw threefry throughput."""

    params = [["float32"]]

    @staticmethod
    def program(like, key):
        return jax.random.uniform(key, like.shape, like.dtype)

    def inputs(self, profile, dtype, dispatch):
        return _template(profile, dtype), _key()


class Normal(phases.RunPhase, workload.Workload):
    """jax.random.normal, 2^18 float32 draws (regular profile): threefry plus the inverse-erf
    transform."""

    params = [["float32"]]

    @staticmethod
    def program(like, key):
        return jax.random.normal(key, like.shape, like.dtype)

    def inputs(self, profile, dtype, dispatch):
        return _template(profile, dtype), _key()


class Categorical(phases.RunPhase, workload.Workload):
    """jax.random.categorical over 256 classes for 512 rows of logits (regular profile): the
    Gumbel-max sampler of token generation."""

    params = [["float32"]]

    @staticmethod
    def program(logits, key):
        return jax.random.categorical(key, logits, axis=-1)

    def inputs(self, profile, dtype, dispatch):
        return data.normal(SIZES[profile.name]["logits"], dtype), _key()
