"""jaxbench: asv benchmarks of JAX itself, one module per area, one class per workload."""
