"""Reading asv configs: the committed asv.conf.json and any derived one, with asv's own parser
(asv's configs carry // comments)."""

import json
import os
import re

from . import paths

# keys holding paths, which asv reads relative to the config's folder, with asv's defaults
PATH_KEYS = (("benchmark_dir", "benchmarks"), ("env_dir", "env"), ("results_dir", "results"),
             ("html_dir", "html"))
COMMAND_KEYS = ("build_command", "install_command", "uninstall_command")


class ConfigError(ValueError):
    pass


def read(path, option="--config"):
    """The config at ``path`` exactly as written (a dict), parsed by asv's JSON reader (where
    asv is not installed, lines that start with // are dropped and the rest read as JSON)."""
    if not os.path.isfile(path):
        raise ConfigError(f"{option} {path} does not exist; pass an asv config, e.g. "
                          "asv.conf.json or the one 'python -m jaxbench_helpers config' writes")
    try:
        from asv import util
    except ImportError:
        with open(path) as f:
            text = re.sub(r"^\s*//.*$", "", f.read(), flags=re.M)
        try:
            return json.loads(text)
        except ValueError as err:
            raise ConfigError(f"{option} {path} is not valid JSON: {err}") from None
    try:
        return util.load_json(path, js_comments=True)
    except (ValueError, util.UserError) as err:
        raise ConfigError(f"{option} {path} is not valid asv JSON: {err}") from None


def load(path, option="--config"):
    """The config at ``path`` with every path made absolute and ``{conf_dir}`` filled in, so
    that a copy written elsewhere means the same."""
    conf = read(path, option)
    base = os.path.dirname(os.path.abspath(path))
    for key, default in PATH_KEYS:
        conf[key] = paths.absolute(conf.get(key, default), base)
    repo = conf.get("repo", "")
    if repo and not is_url(repo):
        conf["repo"] = paths.absolute(repo, base)
    for key in COMMAND_KEYS:
        if conf.get(key):
            conf[key] = [cmd.replace("{conf_dir}", base) for cmd in conf[key]]
    return conf


def load_committed():
    """The project's asv.conf.json, with absolute paths."""
    return load(paths.CONFIG, "the project's config")


def is_url(repo):
    return "://" in repo or repo.startswith("git@")


def local_repo(conf, path):
    """The folder holding the repository of the config ``conf`` read from ``path``: the repo
    itself, or asv's mirror of a URL (a folder named after the project beside the config)."""
    repo = conf.get("repo", "")
    if repo and not is_url(repo):
        return paths.absolute(repo, os.path.dirname(os.path.abspath(path)))
    return os.path.join(os.path.dirname(os.path.abspath(path)), conf.get("project", "project"))


def write(conf, path):
    """Write ``conf`` as JSON to ``path``; returns ``path``."""
    with open(path, "w") as f:
        json.dump(conf, f, indent=4)
        f.write("\n")
    return path
