"""Cold start, each step in a fresh interpreter: importing jax, starting its backend, the first
jitted call and the first eager op.

asv runs the code each ``timeraw_*`` method returns in a new Python process and times only the
statement, not its setup, so each figure is one step; their sum is what a user waits for a first
result. In-process benchmarks cannot see these costs: a process pays them once.
"""

from jaxbench_helpers.runtime import platform, profiles

# the child's setup: jax imported, backend started, a small input on the device
_STARTED = """
import jax
import jax.numpy as jnp
import numpy as np
x = jax.device_put(np.ones(8, np.float32))
"""


class ColdStart:
    """Fresh-process costs of import, backend start, first jit and first op: the latency of
    every script, test and notebook kernel that uses JAX."""

    version = "1"
    # each sample is a new interpreter already; a warm-up process would only cost time
    warmup_time = 0.0
    rounds = profiles.current().rounds
    repeat = profiles.current().repeat

    def setup(self):
        # the child inherits this process's environment, with the variables configure() sets
        # for JAXBENCH_PLATFORM (JAX_PLATFORMS, on GPUs allocation on demand)
        platform.configure()
        platform.device()  # skips (n/a) where the platform has no device

    def timeraw_import_jax(self):
        """``import jax`` in a fresh interpreter.

        Timed: importing jax, jaxlib and their imports. Not timed: starting the interpreter.
        """
        return "import jax"

    def timeraw_backend_start(self):
        """``jax.devices()`` in a fresh interpreter that has imported jax.

        Timed: starting the backend of the selected platform and listing its devices.
        Not timed: the interpreter, importing jax.
        """
        return "jax.devices()", "import jax"

    def timeraw_first_jit_call(self):
        """The first call of a jitted function, waited for, in a fresh interpreter.

        Timed: tracing, lowering, compiling and running it once. Not timed: the interpreter,
        importing jax, starting the backend, placing the 8-element input.
        """
        return "jax.jit(lambda a: a * 2 + 1)(x).block_until_ready()", _STARTED

    def timeraw_first_eager_op(self):
        """The first eager ``jnp.sin``, waited for, in a fresh interpreter.

        Timed: compiling the op's one-primitive program and running it. Not timed: the
        interpreter, importing jax, starting the backend, placing the 8-element input.
        """
        return "jnp.sin(x).block_until_ready()", _STARTED
