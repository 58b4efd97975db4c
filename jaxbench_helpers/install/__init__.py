"""The asv install step: pairs the jax checked out at a commit with a jaxlib from the package
index (``python -m jaxbench_helpers.install``, run by asv in each benchmark environment)."""
