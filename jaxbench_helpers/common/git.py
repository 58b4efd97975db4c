"""Running git: one wrapper, with an error that names the command and the repository."""

import subprocess


class GitError(RuntimeError):
    pass


def run(repo, *args, input=None, env=None, options=(), check=True):
    """``git [-c OPTION]... -C REPO ARGS``; returns stdout (stripped of its last newline), or
    the CompletedProcess when ``check`` is false. ``env`` replaces the environment."""
    command = ["git", *(arg for option in options for arg in ("-c", option)), "-C", repo, *args]
    try:
        result = subprocess.run(command, input=input, capture_output=True, text=True, env=env)
    except FileNotFoundError as err:
        raise GitError("git is not installed (or not on PATH)") from err
    if not check:
        return result
    if result.returncode:
        raise GitError(f"git {' '.join(args)} failed in {repo}: {result.stderr.strip()}")
    return result.stdout.rstrip("\n")
