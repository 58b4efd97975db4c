"""Moving data to the device and waiting for device work."""


def waiter():
    """The function that waits until every array in a pytree is computed and returns the
    pytree: ``jax.block_until_ready``, or a leaf-by-leaf wait where this jax lacks it.

    Loops that wait on every call bind it once: looking it up per call (``block``) costs
    about 0.3 us, some 5% of a tiny jitted call's round trip."""
    import jax

    if hasattr(jax, "block_until_ready"):
        return jax.block_until_ready
    return _block_leaves


def _block_leaves(tree):
    import jax

    for leaf in jax.tree_util.tree_leaves(tree):
        leaf.block_until_ready()
    return tree


def block(tree):
    """Wait until every array in a pytree is computed; returns the pytree."""
    return waiter()(tree)


def put(tree, device):
    """Copy a pytree of host arrays onto ``device`` and wait until the copy is done."""
    import jax

    return block(jax.device_put(tree, device))
