"""What runs inside a benchmark process: the only part of jaxbench_helpers the benchmarks import.

It must import and work on every JAX release from 0.4.20 to the newest, and importing it must
be cheap and start nothing: no module here imports jax at module level or touches a device,
because asv imports the benchmark modules (and so this package) to discover them. Nothing here
imports the host-side packages (``common``, ``host``, ``analysis``, ``selftest``).
"""
