"""Helpers shared by the jaxbench asv suite.

Every module here is cheap to import: none of them imports jax at module level or touches a
device, because asv imports the benchmark modules (and so these helpers) to discover them.
"""
