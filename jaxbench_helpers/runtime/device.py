"""Moving data to the device and waiting for device work."""


def block(tree):
    """Wait until every array in a pytree is computed; returns the pytree."""
    import jax

    if hasattr(jax, "block_until_ready"):
        return jax.block_until_ready(tree)
    for leaf in jax.tree_util.tree_leaves(tree):
        leaf.block_until_ready()
    return tree


def put(tree, device):
    """Copy a pytree of host arrays onto ``device`` and wait until the copy is done."""
    import jax

    return block(jax.device_put(tree, device))
