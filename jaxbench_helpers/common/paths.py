"""Where the project and its working state live."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "asv.conf.json")
RESULTS = os.path.join(ROOT, "results")
HTML = os.path.join(ROOT, "html")
VENV = os.path.join(ROOT, ".venv")
# asv's working state and what the commands derive: environments, the release-history
# repository, derived configs (ignored by git)
STATE = os.path.join(ROOT, ".asv")
HISTORY_REPO = os.path.join(STATE, "jax-releases")


def absolute(path, base=ROOT):
    """``path`` made absolute against ``base`` (asv reads config paths relative to the config)."""
    return path if os.path.isabs(path) else os.path.normpath(os.path.join(base, path))


def project_on_path(env):
    """``env`` (a copy) with the project first on PYTHONPATH: a child interpreter started
    from any folder imports this jaxbench_helpers."""
    env = dict(env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    return env
