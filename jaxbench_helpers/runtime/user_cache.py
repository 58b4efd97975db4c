"""The user's cache folder for jaxbench: what is kept between runs and may be deleted any time
(the counts shim, jax sdists, the dashboard's npm tarballs)."""

import os


def folder(*parts):
    """``$XDG_CACHE_HOME/jaxbench/<parts>``, or ``~/.cache/jaxbench/<parts>`` where that is unset
    or relative (the XDG base directory spec says to ignore a relative one)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jaxbench", *parts)
