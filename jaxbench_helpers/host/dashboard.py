"""The published dashboard made self-contained and easier to read.

asv 0.6.6's index.html loads jQuery, flot, Bootstrap and small plugins from CDNs; a reader
without internet sees only asv's "failed to load" page. ``make_offline`` puts each of those
files, fetched once from the npm registry at the release ``dashboard/libraries.json`` pins and
checked against its sha256 there, under ``vendor/`` beside the pages, and points index.html at
them. It also adds ``jaxbench.js`` (release labels that show the version and do not cover each
other; a graph opens on one profile; a ring around each point measured while the machine was
busy) and ``reading.html`` (how to read the dashboard), linked from the navigation bar.
``write_load_marks`` writes the points to ring, from the load records beside the results.
"""

import base64
import hashlib
import json
import os
import re
import shutil
import tarfile
import tempfile
import urllib.parse
import urllib.request

from ..analysis import results
from ..runtime import user_cache

ASSETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dashboard")
LIBRARIES = os.path.join(ASSETS, "libraries.json")
OWN_FILES = ("jaxbench.js", "reading.html")
VENDOR = "vendor"
REGISTRY = "https://registry.npmjs.org"
TAG = re.compile(r"<(?:script|link)\b[^>]*>")
OWN_SCRIPT = '<script type="text/javascript" src="jaxbench.js"></script>'
# the points jaxbench.js rings: {graph file without .json: {commit hash: why}}
LOAD_MARKS = "jaxbench-load.json"
NAV_LINK = '<li id="nav-li-reading"><a href="reading.html">How to read this</a></li>'


class DashboardError(RuntimeError):
    pass


def libraries(path=LIBRARIES):
    with open(path) as f:
        return json.load(f)["libraries"]


def local_path(library):
    """Where a library's file goes, relative to the dashboard."""
    return f"{VENDOR}/{library['package']}@{library['version']}/{library['file']}"


def _registry():
    # npm's own setting, so a mirror configured for npm serves this too
    return (os.environ.get("npm_config_registry") or REGISTRY).rstrip("/")


def tarball(package, version, cache=None):
    """The npm package's tarball, downloaded once into ``cache`` (default: the user's cache
    folder, kept between publishes)."""
    cache = cache or user_cache.folder("npm")
    name = f"{package}-{version}.tgz"
    path = os.path.join(cache, name)
    if os.path.exists(path):
        return path
    os.makedirs(cache, exist_ok=True)
    url = f"{_registry()}/{urllib.parse.quote(package)}/-/{name}"
    try:
        with urllib.request.urlopen(url, timeout=120) as answer:
            body = answer.read()
    except OSError as err:
        raise DashboardError(f"cannot fetch {url} ({err}); the dashboard's libraries come from "
                             "the npm registry (npm_config_registry names another)") from None
    # written whole, then moved into place: an interrupted download leaves nothing behind
    with tempfile.NamedTemporaryFile(dir=cache, delete=False, suffix=".part") as part:
        part.write(body)
    os.replace(part.name, path)
    return path


def library_bytes(library, cache=None):
    """The file of ``library``, checked against its pinned sha256."""
    path = tarball(library["package"], library["version"], cache)
    member = f"package/{library['file']}"
    try:
        with tarfile.open(path) as tar:
            body = tar.extractfile(member).read()
    except (tarfile.TarError, KeyError, AttributeError, OSError) as err:
        raise DashboardError(f"{path} has no readable {member} ({err}); delete it to fetch it "
                             "again") from None
    digest = hashlib.sha256(body).hexdigest()
    if digest != library["sha256"]:
        raise DashboardError(
            f"{library['package']}@{library['version']} {library['file']} has sha256 {digest}, "
            f"not the {library['sha256']} that {LIBRARIES} pins: the download is not the file "
            f"that was checked. Delete {path} to fetch it again; if the registry really serves "
            "other bytes now, check them and change the pin on purpose")
    return body


def _integrity(hex_digest):
    return "sha256-" + base64.b64encode(bytes.fromhex(hex_digest)).decode()


def point_at_local_copies(index_html, known):
    """index.html with every CDN script and stylesheet replaced by its copy under vendor/
    (``known``: CDN address -> library); an address without a copy is an error."""

    def local(tag):
        text = tag.group(0)
        url = re.search(r'\b(?:src|href)="(https?://[^"]+)"', text)
        if not url:
            return text
        library = known.get(url.group(1))
        if library is None:
            raise DashboardError(f"asv's index.html loads {url.group(1)}, which {LIBRARIES} has "
                                 "no copy of: add its npm package, release, file and sha256")
        text = text.replace(url.group(1), local_path(library))
        # the copy's own hash: the browser still checks what it runs
        return re.sub(r'\bintegrity="[^"]*"', f'integrity="{_integrity(library["sha256"])}"',
                      text)

    return TAG.sub(local, index_html)


def external_addresses(index_html):
    """The http(s) addresses of the scripts and stylesheets that ``index_html`` loads."""
    found = []
    for tag in TAG.findall(index_html):
        url = re.search(r'\b(?:src|href)="(https?://[^"]+)"', tag)
        if url and ("<script" in tag or 'rel="stylesheet"' in tag):
            found.append(url.group(1))
    return found


def make_offline(html_dir, cache=None):
    """Make the dashboard at ``html_dir`` load nothing from outside it, and add jaxbench's
    script and reading page, and an empty graph wherever a page would ask for a missing one;
    running it again changes nothing."""
    index_path = os.path.join(html_dir, "index.html")
    try:
        with open(index_path) as f:
            index_html = f.read()
    except OSError as err:
        raise DashboardError(f"cannot read {index_path} ({err}); did asv publish "
                             "succeed?") from None
    pinned = libraries()
    for library in pinned:
        target = os.path.join(html_dir, *local_path(library).split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(library_bytes(library, cache))
    index_html = point_at_local_copies(index_html, {lib["cdn"]: lib for lib in pinned
                                                    if lib["cdn"]})
    if OWN_SCRIPT not in index_html:
        index_html = index_html.replace("</head>", f"    {OWN_SCRIPT}\n  </head>", 1)
    if NAV_LINK not in index_html:
        regressions = re.search(r'<li id="nav-li-regressions">.*?</li>', index_html)
        if regressions is None:
            raise DashboardError(f"{index_path} has no Regressions entry in its navigation bar "
                                 "to put the reading page's link after")
        index_html = (index_html[:regressions.end()] + "\n\t" + NAV_LINK
                      + index_html[regressions.end():])
    for name in OWN_FILES:
        shutil.copyfile(os.path.join(ASSETS, name), os.path.join(html_dir, name))
    with open(index_path, "w") as f:
        f.write(index_html)
    fill_missing_graphs(html_dir)
    return [local_path(lib) for lib in pinned]


def _published_lists(html_dir):
    """(benchmark names, graph parameter combinations) from the index.json asv publish wrote."""
    try:
        with open(os.path.join(html_dir, "index.json")) as f:
            index = json.load(f)
        return index["benchmarks"], index["graph_param_list"]
    except (OSError, ValueError, KeyError) as err:
        raise DashboardError(f"cannot read the benchmark and graph lists in "
                             f"{html_dir}/index.json ({err}); did asv publish succeed?") from None


def fill_missing_graphs(html_dir):
    """Write an empty graph file wherever asv's pages will ask for one that ``asv publish``
    did not write: the summary of a benchmark with no result yet (one added or renamed since
    the last run), and a benchmark one machine has not measured (a machine that ran the counts
    alone, a benchmark of another platform, a count whose version changed since the machine's
    last run). A graph page asks for the file of every machine selected and draws the others
    where one is missing, but each missing file is a 404 error in the reader's console.
    Returns the paths filled, relative to ``html_dir``."""
    from asv.graph import Graph

    names, combinations = _published_lists(html_dir)
    wanted = [os.path.join("graphs", "summary", name) for name in names]
    wanted += [Graph.get_file_path(params, name) for params in combinations for name in names]
    filled = []
    for relative in wanted:
        path = os.path.join(html_dir, relative + ".json")
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write("[]")
            filled.append(relative + ".json")
    return filled


def load_marks(html_dir, results_dir):
    """{graph file, relative to ``html_dir`` without .json: {commit hash: why}} for every
    benchmark measured while its machine's load record says the machine was busy
    (``results.measured_under_load``): the graphs asv publish wrote for that result."""
    from asv.graph import Graph

    combinations = _published_lists(html_dir)[1]

    marks = {}
    for machine in results.machines(results_dir):
        for result, name, record in results.measured_under_load(results_dir, machine):
            params = results.graph_params(result)
            why = f"{record.command} run {record.started} to {record.ended}: {record.summary()}"
            for combination in combinations:
                if all(combination.get(k) == v for k, v in params.items()):
                    path = Graph.get_file_path(combination, name)
                    marks.setdefault(path, {})[result.commit_hash] = why
    return marks


def write_load_marks(html_dir, results_dir):
    """Write ``load_marks`` for jaxbench.js beside the pages; returns how many points."""
    marks = load_marks(html_dir, results_dir)
    with open(os.path.join(html_dir, LOAD_MARKS), "w") as f:
        json.dump(marks, f, indent=1, sort_keys=True)
        f.write("\n")
    return sum(len(commits) for commits in marks.values())
