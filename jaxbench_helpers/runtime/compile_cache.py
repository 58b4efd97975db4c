"""JAX's persistent compilation cache: filled by ``setup_cache``, read by ``setup``, and
guaranteed off everywhere else.

asv runs ``setup_cache`` in its own process and passes only a pickle back, so a jitted function
cannot cross over; the executable can, as a file. asv starts every benchmark process of a class
in the directory where ``setup_cache`` ran, so the cache lives there. On releases without a CPU
persistent cache (before 0.4.26) this degrades to an ordinary compile in ``setup``.
"""

import contextlib
import os

from . import compat

SHARED_DIR_NAME = "jax-compilation-cache"


def shared_dir():
    return os.path.join(os.getcwd(), SHARED_DIR_NAME)


def _cache_module():
    try:
        from jax.experimental.compilation_cache import compilation_cache
    except ImportError:
        return None
    return compilation_cache


def _reset():
    """Forget the cache object JAX latched on first use, so new settings take effect."""
    module = _cache_module()
    if module is not None and hasattr(module, "reset_cache"):
        try:
            module.reset_cache()
        except AssertionError:
            pass  # jax before 0.4.30 asserts when no cache was ever initialized


def enable(path):
    """Read and write compiled programs under ``path``, however small or quick to compile."""
    os.makedirs(path, exist_ok=True)
    _reset()
    compat.config_set("jax_enable_compilation_cache", True)
    compat.config_set("jax_persistent_cache_min_compile_time_secs", 0.0)
    compat.config_set("jax_persistent_cache_min_entry_size_bytes", -1)
    # JAX otherwise writes "<path>/xla_gpu_per_fusion_autotune_cache_dir" into every program's
    # compile options (even on CPU): the program, and so the counts of everything that runs it,
    # would depend on asv's random temporary folder
    compat.config_set("jax_persistent_cache_enable_xla_caches", "none")
    if not compat.config_set("jax_compilation_cache_dir", path):
        module = _cache_module()
        if module is not None and hasattr(module, "initialize_cache"):
            module.initialize_cache(path)


def disable():
    """Turn the persistent cache off for the rest of the process: every compile is real.

    All three steps are needed: since 0.4.36 or so a cache that was used once stays in use
    until reset, whatever the flags say.
    """
    compat.config_set("jax_enable_compilation_cache", False)
    compat.config_set("jax_compilation_cache_dir", None)
    _reset()


@contextlib.contextmanager
def loading_from_shared_dir():
    """Use the cache ``setup_cache`` left in the working directory, if there is one."""
    path = shared_dir()
    if os.path.isdir(path):
        enable(path)
    try:
        yield
    finally:
        disable()
