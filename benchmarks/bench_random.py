"""Random number generation at steady state: the compiled jax.random samplers (threefry bits,
then the transform to the distribution).

Each class draws one batch of samples from a key made in setup and passed in as a program
argument (a typed ``jax.random.key`` where this JAX has one, else a raw ``PRNGKey``), so the
timed call is the generator's device work and nothing else. The output is random, so setup
only checks it is finite; NumPy's generators are a different algorithm and no baseline.
"""

import jax
import numpy as np

from jaxbench_helpers.runtime import data, phases, workload


def setup_cache():
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


def _samples(profile, dtype):
    """The shape and dtype of the samples, static to jit."""
    return {"shape": (SIZES[profile.name]["samples"],), "dtype": np.dtype(dtype)}


class Uniform(phases.RunPhase, workload.Workload):
    """jax.random.uniform, 2^18 float32 draws (regular profile): raw threefry throughput."""

    params = [["float32"]]
    param_names = ["dtype"]

    def static_arguments(self, profile, dtype):
        return _samples(profile, dtype)

    @staticmethod
    def program(key, *, shape, dtype):
        return jax.random.uniform(key, shape, dtype)

    def inputs(self, profile, dtype, dispatch):
        return (_key(),)


class Normal(phases.RunPhase, workload.Workload):
    """jax.random.normal, 2^18 float32 draws (regular profile): threefry plus the inverse-erf
    transform."""

    params = [["float32"]]
    param_names = ["dtype"]

    def static_arguments(self, profile, dtype):
        return _samples(profile, dtype)

    @staticmethod
    def program(key, *, shape, dtype):
        return jax.random.normal(key, shape, dtype)

    def inputs(self, profile, dtype, dispatch):
        return (_key(),)


class Categorical(phases.RunPhase, workload.Workload):
    """jax.random.categorical over 256 classes for 512 rows of logits (regular profile): the
    Gumbel-max sampler of token generation."""

    params = [["float32"]]
    param_names = ["dtype"]

    @staticmethod
    def program(logits, key):
        return jax.random.categorical(key, logits, axis=-1)

    def inputs(self, profile, dtype, dispatch):
        return data.normal(SIZES[profile.name]["logits"], dtype), _key()
