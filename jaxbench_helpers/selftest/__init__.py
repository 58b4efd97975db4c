"""Self-tests of the machine and the suite: the machine's own noise without asv
(``noisefloor``), the suite's noise at one commit (``calibrate``), and what the suite sees of a
slowdown planted into JAX (``plants``, ``sensitivity``)."""
