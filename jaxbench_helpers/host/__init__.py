"""The commands that drive asv on the host: the project's virtual environment (``bootstrap``),
the main job, the release-history repository, derived asv configs, and publishing."""
