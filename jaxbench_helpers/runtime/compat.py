"""Shims over JAX API drift, chosen by probing for the feature, never by version string."""


def config_set(name, value):
    """Set a JAX config flag; returns False if this JAX does not have it."""
    import jax

    try:
        jax.config.update(name, value)
    except (AttributeError, KeyError, ValueError):
        return False
    return True


def config_get(name, default=None):
    """Read a JAX config flag (also flags defined outside jax/_src/config.py)."""
    import jax

    values = getattr(jax.config, "values", None)
    if isinstance(values, dict) and name in values:
        return values[name]
    try:
        return jax.config.read(name)
    except (AttributeError, KeyError):
        return default


def set_x64(enabled):
    """Turn 64-bit types on or off for this process (before any array of that dtype exists)."""
    import jax

    jax.config.update("jax_enable_x64", bool(enabled))


def clear_caches():
    """Drop JAX's in-memory tracing, lowering and compilation caches (0.4.9+)."""
    import jax

    jax.clear_caches()


def has_trace_stage():
    """Whether ``jax.jit(f).trace(...)`` exists (0.4.29+), separating trace from lower."""
    import jax

    return hasattr(jax.jit(_identity), "trace")


def _identity(x):
    return x


def cost_analysis(compiled):
    """``Compiled.cost_analysis()`` as a dict (a one-element list up to 0.4.38)."""
    cost = compiled.cost_analysis()
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else {}
    return dict(cost or {})
