"""Host-side utilities shared by the commands, the analysis and the self-tests: paths, git,
asv configs, Markdown output, machine names. Never imported inside a benchmark process."""
