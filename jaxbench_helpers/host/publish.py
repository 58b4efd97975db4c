"""Publish the dashboard: ``asv publish``, its libraries and the rings of the points measured
under load beside it (``dashboard``), then a page per commit that leads to upstream JAX.

The release-history repository's commits are not upstream's, so a dashboard made from it
cannot link commits to GitHub directly. Its config sets ``show_commit_url`` to ``commits/``
(relative to the dashboard), and this writes ``commits/<hash>/index.html`` for each commit the
dashboard names: a page that redirects to the upstream commit recorded in the commit message
(``Upstream commit: <40 hex>``), else to the release's tag page, else says what it knows.
asv's pages link the hash cut to ``hash_length``, so each commit gets a page under its short
and its full hash.

    python -m jaxbench_helpers publish --config .asv/asv.releases.conf.json
"""

import argparse
import html
import json
import os
import re
import subprocess
import sys

from ..analysis import results
from ..common import asvconfig, git
from . import dashboard

# show_commit_url of a release-history dashboard: a folder of the published html
COMMIT_PAGES = "commits/"
UPSTREAM = "https://github.com/jax-ml/jax"
UPSTREAM_LINE = re.compile(r"^Upstream commit:\s*([0-9a-fA-F]{40})\s*$", re.M)
RELEASE_TAG = re.compile(r"^jax-v\d")


class PublishError(RuntimeError):
    pass


def upstream_commit(message):
    """The upstream commit hash a release-history commit message records, or None."""
    match = UPSTREAM_LINE.search(message)
    return match.group(1).lower() if match else None


def link_for(message, tags):
    """(url, words) for a commit: its upstream commit, else its release tag page, else
    (None, words) when the message records neither."""
    upstream = upstream_commit(message)
    if upstream:
        return f"{UPSTREAM}/commit/{upstream}", f"upstream commit {upstream}"
    release_tags = sorted(t for t in tags if RELEASE_TAG.match(t))
    if release_tags:
        tag = release_tags[0]
        return f"{UPSTREAM}/releases/tag/{tag}", f"the upstream release {tag}"
    return None, "no upstream commit recorded in its message"


def commit_page(commit, message, tags):
    """A small HTML page about ``commit`` that redirects to its upstream link, if it has one."""
    subject = message.strip().splitlines()[0] if message.strip() else commit
    url, words = link_for(message, tags)
    title = html.escape(f"{subject} ({commit[:12]})")
    head = [f"<title>{title}</title>"]
    if url:
        quoted = html.escape(url, quote=True)
        head.append(f'<meta http-equiv="refresh" content="0; url={quoted}">')
        body = (f"<p>{html.escape(subject)}: commit <code>{commit}</code> of the release-history "
                f'repository. Upstream: <a id="upstream" href="{quoted}">{html.escape(words)}</a>'
                ".</p>")
    else:
        body = (f"<p>{html.escape(subject)}: commit <code>{commit}</code>; "
                f"{html.escape(words)}.</p>")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            + "\n".join(head) + "\n</head>\n<body>\n" + body + "\n</body>\n</html>\n")


def _git(repo, *args, input=None):
    try:
        return git.run(repo, *args, input=input)
    except git.GitError as err:
        raise PublishError(str(err)) from None


def read_commits(repo, hashes):
    """{hash: (message, [tags])} for ``hashes`` in the git repository ``repo``."""
    if not hashes:
        return {}
    listing = _git(repo, "cat-file", "--batch-check=%(objectname) %(objecttype)",
                   input="".join(f"{h}\n" for h in hashes))
    missing = [line.split()[0] for line in listing.splitlines() if not line.endswith(" commit")]
    if missing:
        raise PublishError(f"{repo} lacks commit {missing[0]} that the dashboard shows; publish "
                           "with the repository the results were measured on")
    out = _git(repo, "log", "--no-walk=unsorted", "--stdin", "--format=%H%x1f%B%x1e",
               input="".join(f"{h}\n" for h in hashes))
    messages = {}
    for record in out.split("\x1e"):
        if "\x1f" in record:
            commit, message = record.split("\x1f", 1)
            messages[commit.strip()] = message
    tags = {}
    refs = _git(repo, "for-each-ref", "--format=%(objectname) %(*objectname) %(refname:short)",
                "refs/tags")
    for line in refs.splitlines():
        obj, peeled, name = line.split(" ", 2)
        tags.setdefault(peeled or obj, []).append(name)
    return {h: (messages[h], tags.get(h, [])) for h in hashes}


def published_hashes(html_dir):
    """(the commit hashes the dashboard at ``html_dir`` names, the length its links cut them to),
    from asv's index.json: revision_to_hash holds every measured or tagged commit."""
    path = os.path.join(html_dir, "index.json")
    try:
        with open(path) as f:
            index = json.load(f)
    except (OSError, ValueError) as err:
        raise PublishError(f"cannot read {path} ({err}); did asv publish succeed?") from err
    return sorted(set(index["revision_to_hash"].values())), int(index["hash_length"])


def write_commit_pages(html_dir, repo, folder=COMMIT_PAGES):
    """Write ``html_dir/folder/<hash>/index.html`` (short and full hash) for every commit the
    published dashboard names; returns how many commits got pages."""
    hashes, hash_length = published_hashes(html_dir)
    commits = read_commits(repo, hashes)
    pages = {c: commit_page(c, message, tags) for c, (message, tags) in commits.items()}
    by_short = {}
    for commit in commits:
        by_short.setdefault(commit[:hash_length], []).append(commit)
    for short, same in by_short.items():
        if short in pages:
            continue
        if len(same) == 1:
            pages[short] = pages[same[0]]
        else:
            # commits that share a short hash: a list of them instead of a redirect
            items = "".join(f'<li><a href="../{h}/">{h}</a></li>' for h in same)
            pages[short] = ("<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\">"
                            f"<title>{short}</title></head>\n<body><p>{short} starts several "
                            f"commits:</p><ul>{items}</ul></body>\n</html>\n")
    for name, text in pages.items():
        target = os.path.join(html_dir, folder, name)
        os.makedirs(target, exist_ok=True)
        with open(os.path.join(target, "index.html"), "w") as f:
            f.write(text)
    return len(commits)


def publish(config_path):
    """``asv --config CONFIG publish``, then the commit pages; returns an exit code."""
    if not os.path.isfile(config_path):
        print(f"jaxbench publish: no config at {config_path}; write one with 'python -m "
              "jaxbench_helpers config' (or run the main job)", file=sys.stderr)
        return 2
    cmd = [sys.executable, "-m", "asv", "--config", config_path, "publish"]
    print("jaxbench: " + " ".join(cmd), flush=True)
    rc = subprocess.run(cmd).returncode
    if rc:
        return rc
    conf = asvconfig.load(config_path)
    html_dir, repo = conf["html_dir"], asvconfig.local_repo(conf, config_path)
    try:
        copied = dashboard.make_offline(html_dir)
    except dashboard.DashboardError as err:
        print(f"jaxbench publish: {err}", file=sys.stderr)
        return 1
    print(f"jaxbench publish: {len(copied)} library files in {os.path.join(html_dir, 'vendor')}"
          ", so the dashboard loads nothing from outside it", flush=True)
    try:
        busy = dashboard.write_load_marks(html_dir, conf["results_dir"])
    except (dashboard.DashboardError, results.ResultsError) as err:
        print(f"jaxbench publish: {err}", file=sys.stderr)
        return 1
    print(f"jaxbench publish: {busy} points measured while the machine was busy are ringed "
          f"({dashboard.LOAD_MARKS})", flush=True)
    url = conf.get("show_commit_url")
    if not url or re.match(r"^[a-z][a-z0-9+.-]*:", url, re.I) or url.startswith("/"):
        # links go straight to a commit site (or nowhere): nothing to write
        print(f"jaxbench publish: show_commit_url is {url!r}, so no commit pages are written",
              flush=True)
        return 0
    if not url.endswith("/") or ".." in url.split("/"):
        print(f"jaxbench publish: show_commit_url {url!r} is relative but not a folder inside "
              f"the dashboard; set it to {COMMIT_PAGES!r}", file=sys.stderr)
        return 2
    try:
        count = write_commit_pages(html_dir, repo, url)
    except PublishError as err:
        print(f"jaxbench publish: {err}", file=sys.stderr)
        return 1
    print(f"jaxbench publish: {count} commit pages in {os.path.join(html_dir, url)}", flush=True)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m jaxbench_helpers publish",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True,
                        help="the asv config, e.g. .asv/asv.releases.conf.json")
    args = parser.parse_args(argv)
    try:
        import asv  # noqa: F401
    except ImportError:
        from . import bootstrap

        # .venv has asv; it runs from the project root, so the path must not be relative
        bootstrap.reexec_inside(["publish", "--config", os.path.abspath(args.config)])
    return publish(args.config)


if __name__ == "__main__":
    sys.exit(main())
