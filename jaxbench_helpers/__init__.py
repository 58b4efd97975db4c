"""jaxbench's helpers, in layers; a layer imports only the layers above it in this list:

``runtime``   what runs inside a benchmark process (the only layer the benchmarks import)
``install``   the asv install step that pairs a jax commit with a jaxlib
``common``    host-side utilities: paths, git, asv configs, Markdown, machine names
``analysis``  reading asv results and reporting on them
``host``      the commands that drive asv: main job, release history, configs, publishing
``selftest``  what the machine and the suite can resolve: noise floor, calibration, plants

``tests/test_layers.py`` holds the order. ``python3 -m jaxbench_helpers`` lists the commands.
"""
