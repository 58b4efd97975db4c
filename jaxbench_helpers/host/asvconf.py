"""Derived asv configurations: the committed suite, pointed at another repository.

``asv.conf.json`` targets upstream JAX. To benchmark a local JAX clone or the release-history
repository, this writes a copy with a different ``repo`` (and, optionally, other results, html
and environment folders, profile or platform). Paths in the copy are absolute, so it works from
any folder: ``asv --config THAT_FILE run ...``.
"""

import argparse
import os
import sys

from ..common import asvconfig, git, paths
from ..common.asvconfig import ConfigError
from ..runtime import platform as jb_platform
from ..runtime import profiles
from . import publish


def derive(repo, *, results_dir=None, html_dir=None, env_dir=None, profile=None,
           platforms=None, branches=None, show_commit_url=None, pythons=None):
    """The committed config with ``repo`` and any given folders, matrix values or ``pythons``
    (versions like 3.12) replaced."""
    conf = asvconfig.read(paths.CONFIG)
    if not os.path.isdir(os.path.join(repo, ".git")) and not os.path.isdir(
            os.path.join(repo, "objects")):
        raise ConfigError(f"{repo} is not a git repository; pass a JAX clone or the "
                          "release-history repository (python -m jaxbench_helpers history)")
    conf["repo"] = os.path.abspath(repo)
    for key, value in (("results_dir", results_dir), ("html_dir", html_dir),
                       ("env_dir", env_dir)):
        conf[key] = os.path.abspath(value) if value else paths.absolute(conf[key])
    conf["benchmark_dir"] = paths.absolute(conf["benchmark_dir"])
    for key in asvconfig.COMMAND_KEYS:
        conf[key] = [cmd.replace("{conf_dir}", paths.ROOT) for cmd in conf[key]]
    env = conf["matrix"]["env_nobuild"]
    checks = [("profile", profile, profiles.PROFILES)]
    checks += [("platform", p, jb_platform.NAMES) for p in platforms or ()]
    for label, value, known in checks:
        if value and value not in known:
            raise ConfigError(f"unknown {label} {value!r}; use one of {', '.join(known)}")
    if profile:
        env["JAXBENCH_PROFILE"] = [profile]
    if platforms:
        # one build per commit serves every platform: each is its own series on the dashboard
        env["JAXBENCH_PLATFORM"] = list(platforms)
    if branches:
        conf["branches"] = list(branches)
    if pythons:
        conf["pythons"] = list(pythons)
    if show_commit_url is None and is_release_history(repo, conf["branches"][0]):
        # its hashes are not upstream's: link the pages publish writes, which lead upstream
        show_commit_url = publish.COMMIT_PAGES
    if show_commit_url is not None:
        conf["show_commit_url"] = show_commit_url
    return conf


def is_release_history(repo, branch="main"):
    """Whether ``repo`` is a release-history repository: its first commit on ``branch`` records
    the upstream commit it was rebuilt from."""
    roots = git.run(repo, "rev-list", "--max-parents=0", f"refs/heads/{branch}",
                    check=False).stdout.split()
    return bool(roots) and publish.upstream_commit(
        git.run(repo, "log", "-1", "--format=%B", roots[0], check=False).stdout) is not None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", required=True, help="a JAX git repository (clone or history)")
    parser.add_argument("--output", "-o", required=True, help="where to write the config")
    parser.add_argument("--results-dir")
    parser.add_argument("--html-dir")
    parser.add_argument("--env-dir")
    parser.add_argument("--profile", help="quick, regular or large")
    parser.add_argument("--platform", action="append", dest="platforms",
                        help="cpu, gpu, cuda, rocm or tpu; repeat for several series")
    parser.add_argument("--branch", action="append", dest="branches",
                        help="branch whose history asv follows (default: main)")
    args = parser.parse_args(argv)
    try:
        conf = derive(args.repo, results_dir=args.results_dir, html_dir=args.html_dir,
                      env_dir=args.env_dir, profile=args.profile, platforms=args.platforms,
                      branches=args.branches)
    except ConfigError as err:
        print(f"jaxbench config: {err}", file=sys.stderr)
        return 1
    print(asvconfig.write(conf, args.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
