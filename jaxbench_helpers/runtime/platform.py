"""Which device the suite measures, chosen by JAXBENCH_PLATFORM.

The value is fixed per asv environment (``matrix.env_nobuild``), so the dashboard shows a CPU
series and a GPU series side by side. A platform with no device skips the benchmark
(``NotImplementedError``, shown as n/a), an unknown name is an error.
"""

import os

from . import compat, cpu_threads, profiles

PLATFORM_ENV = "JAXBENCH_PLATFORM"
# optional: 'off' makes CPU dispatch synchronous (jax_cpu_enable_async_dispatch), for the noise
# controls' comparison; unset keeps each release's default, as users get it
ASYNC_DISPATCH_ENV = "JAXBENCH_CPU_ASYNC_DISPATCH"
DEFAULT_PLATFORM = "cpu"

# JAXBENCH_PLATFORM -> (value for jax_platforms, name for jax.devices())
# 'gpu' leaves jax_platforms open because jax.devices('gpu') resolves cuda or rocm itself.
_PLATFORMS = {
    "cpu": ("cpu", "cpu"),
    "gpu": (None, "gpu"),
    "cuda": ("cuda", "gpu"),
    "rocm": ("rocm", "gpu"),
    "tpu": ("tpu", "tpu"),
}

NAMES = tuple(_PLATFORMS)


class PlatformError(ValueError):
    pass


def selected():
    """The platform name from JAXBENCH_PLATFORM, validated."""
    name = os.environ.get(PLATFORM_ENV, DEFAULT_PLATFORM).strip().lower() or DEFAULT_PLATFORM
    if name not in _PLATFORMS:
        raise PlatformError(
            f"{PLATFORM_ENV}={name!r} is not a platform; use one of {', '.join(_PLATFORMS)}"
        )
    return name


def configure():
    """Restrict JAX to the selected platform and the process to the CPUs JAXBENCH_CPU_THREADS
    (or the profile) gives it. Must run before the first device query."""
    cpu_threads.apply(default_cpu_threads())
    name = selected()
    jax_platforms, kind = _PLATFORMS[name]
    if kind == "gpu":
        # allocate on demand, so memory_stats() peaks mean what the program used
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if jax_platforms is not None:
        os.environ["JAX_PLATFORMS"] = jax_platforms
        import jax

        jax.config.update("jax_platforms", jax_platforms)
    async_dispatch = os.environ.get(ASYNC_DISPATCH_ENV, "").strip().lower()
    if async_dispatch:
        if async_dispatch not in ("on", "off"):
            raise PlatformError(f"{ASYNC_DISPATCH_ENV}={async_dispatch!r}: use 'on' or 'off' "
                                "(unset: the release's default)")
        # a release without the flag (CPU dispatch was synchronous before 0.4.32) ignores it
        compat.config_set("jax_cpu_enable_async_dispatch", async_dispatch == "on")


def default_cpu_threads():
    """The CPU threads setting without JAXBENCH_CPU_THREADS: the profile's on CPU, 'all' on an
    accelerator, whose host threads feed the device."""
    return profiles.current().cpu_threads if selected() == "cpu" else "all"


def device():
    """The first device of the selected platform, or NotImplementedError to skip."""
    import jax

    name = selected()
    try:
        devices = jax.devices(_PLATFORMS[name][1])
    except RuntimeError as err:
        raise NotImplementedError(f"no {name} device here ({err})") from None
    if not devices:
        raise NotImplementedError(f"no {name} device here")
    cpu_threads.after_backend_start()
    return devices[0]
