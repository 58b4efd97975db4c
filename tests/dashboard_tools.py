"""A published asv dashboard, served locally and opened in a real headless Chromium.

asv 0.6.6's index.html loads jQuery, flot, Bootstrap and three small plugins from CDNs, which
test machines cannot reach. Each is served instead from the npm package of the same release
(fetched once with ``npm pack``). Where the CDN's file is its own minified build, the
package's plain file of the same release stands in (stupidtable 1.0.1 is not on npm: 1.1.3
does), and only for those does the served index.html lose its integrity hash; the browser
checks the hashes of the others. Requests to anywhere else outside the server are answered
with a stub and recorded, so a test can check where a link led without following it.
"""

import base64
import contextlib
import functools
import glob
import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import tarfile
import threading
import urllib.parse

from jaxbench_helpers.host import bootstrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARTIFACTS = os.path.join(ROOT, "tests", "artifacts")
LIBRARY_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "jaxbench", "npm-libraries")
CDNJS = "https://cdnjs.cloudflare.com/ajax/libs/"
# CDN address -> (npm package@version, file in the package)
LIBRARIES = {
    "https://code.jquery.com/jquery-3.3.1.min.js": ("jquery@3.3.1", "dist/jquery.min.js"),
    CDNJS + "flot/0.8.3/jquery.flot.min.js": ("flot@0.8.3", "jquery.flot.js"),
    CDNJS + "flot/0.8.3/jquery.flot.time.min.js": ("flot@0.8.3", "jquery.flot.time.js"),
    CDNJS + "flot/0.8.3/jquery.flot.selection.min.js": ("flot@0.8.3", "jquery.flot.selection.js"),
    CDNJS + "flot/0.8.3/jquery.flot.categories.min.js":
        ("flot@0.8.3", "jquery.flot.categories.js"),
    CDNJS + "stupidtable/1.0.1/stupidtable.min.js":
        ("stupid-table-plugin@1.1.3", "stupidtable.min.js"),
    CDNJS + "blueimp-md5/2.19.0/js/md5.min.js": ("blueimp-md5@2.19.0", "js/md5.min.js"),
}
JSDELIVR_NPM = re.compile(r"^https://cdn\.jsdelivr\.net/npm/((?:@[^/]+/)?[^@/]+@[^/]+)/(.+)$")
STUB = "<!DOCTYPE html><title>outside the dashboard</title><p>not fetched by the test</p>"


def npm_library(url):
    """The local path of the npm file that stands in for the CDN file at ``url``."""
    match = JSDELIVR_NPM.match(url)
    spec, member = match.groups() if match else LIBRARIES.get(url, (None, None))
    if spec is None:
        raise AssertionError(f"the dashboard loads {url}, which dashboard_tools.LIBRARIES does "
                             "not map to an npm package; add it there")
    folder = os.path.join(LIBRARY_CACHE, spec.replace("/", "+"))
    path = os.path.join(folder, member)
    if os.path.exists(path):
        return path
    npm = shutil.which("npm")
    if npm is None:
        raise AssertionError("npm is needed to fetch the dashboard's libraries: 'apt-get "
                             "install -y npm' (python -m jaxbench_helpers test does it)")
    os.makedirs(LIBRARY_CACHE, exist_ok=True)
    packed = subprocess.run([npm, "pack", spec, "--pack-destination", LIBRARY_CACHE, "--json"],
                            capture_output=True, text=True, cwd=LIBRARY_CACHE)
    if packed.returncode:
        raise AssertionError(f"npm pack {spec} failed: {packed.stderr.strip()[-2000:]}")
    tarball = os.path.join(LIBRARY_CACHE, json.loads(packed.stdout)[0]["filename"])
    with tarfile.open(tarball) as tar:
        tar.extractall(folder + ".part", filter="data")
    os.remove(tarball)
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(os.path.join(folder + ".part", "package"), folder)
    shutil.rmtree(folder + ".part", ignore_errors=True)
    if not os.path.exists(path):
        raise AssertionError(f"npm package {spec} has no {member}")
    return path


def _integrity_matches(integrity, body):
    algorithm, _, digest = integrity.partition("-")
    return base64.b64encode(hashlib.new(algorithm, body).digest()).decode() == digest


def external_assets(index_html):
    """{url: integrity or None} of every http(s) script and stylesheet index.html loads."""
    assets = {}
    for tag in re.findall(r"<(?:script|link)\b[^>]*>", index_html):
        url = re.search(r'\b(?:src|href)="(https?://[^"]+)"', tag)
        if url and ("<script" in tag or 'rel="stylesheet"' in tag):
            integrity = re.search(r'\bintegrity="([^"]+)"', tag)
            assets[url.group(1)] = integrity.group(1) if integrity else None
    return assets


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve(html_dir):
    """Serve ``html_dir`` over http on a free local port; yields its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(html_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class Dashboard:
    """One browser page on a served dashboard, with its JavaScript errors and the addresses
    outside the dashboard that it tried to reach."""

    def __init__(self, browser, base_url, html_dir):
        self.base_url = base_url
        self.errors = []
        self.outside = []
        index_html = open(os.path.join(html_dir, "index.html")).read()
        self.substituted = []
        self._libraries = {}
        for url, integrity in external_assets(index_html).items():
            body = open(npm_library(url), "rb").read()
            self._libraries[url] = body
            if integrity and not _integrity_matches(integrity, body):
                self.substituted.append(url)
        self._index_html = self._drop_integrity(index_html, self.substituted)
        self.context = browser.new_context(viewport={"width": 1400, "height": 900})
        self.context.route("**/*", self._route)
        self.context.on("page", self._watch)
        self.page = None

    @staticmethod
    def _drop_integrity(index_html, urls):
        def edit(tag):
            text = tag.group(0)
            if any(f'"{url}"' in text for url in urls):
                text = re.sub(r'\s+integrity="[^"]*"', "", text)
            return text

        return re.sub(r"<(?:script|link)\b[^>]*>", edit, index_html)

    def _watch(self, page):
        page.on("pageerror", lambda err: self.errors.append(f"{page.url}: {err}"))
        page.on("console", lambda msg: msg.type == "error" and self.errors.append(
            f"{page.url}: console: {msg.text}"))

    def _route(self, route):
        url = route.request.url
        if url in self._libraries:
            kind = "text/css" if url.endswith(".css") else "application/javascript"
            route.fulfill(status=200, body=self._libraries[url], content_type=kind,
                          headers={"Access-Control-Allow-Origin": "*"})
        elif not url.startswith(self.base_url):
            self.outside.append(url)
            route.fulfill(status=200, body=STUB, content_type="text/html")
        elif urllib.parse.urlsplit(url).path in ("/", "/index.html"):
            route.fulfill(status=200, body=self._index_html, content_type="text/html")
        else:
            route.continue_()

    def open(self, fragment=""):
        """Load the dashboard at ``#fragment`` in a new tab and wait until asv has read
        index.json (a new tab each time, as a reader following a link would have)."""
        self.page = self.context.new_page()
        self.page.goto(self.base_url + ("#" + fragment if fragment else ""))
        self.page.wait_for_function("() => window.$ && $.asv && $.asv.main_json "
                                    "&& $.asv.main_json.revision_to_hash")
        return self.page

    def screenshot(self, name):
        os.makedirs(ARTIFACTS, exist_ok=True)
        path = os.path.join(ARTIFACTS, name)
        self.page.screenshot(path=path)
        return path

    def close(self):
        self.context.close()


@contextlib.contextmanager
def chromium():
    """A headless Debian Chromium driven by Playwright."""
    bootstrap.ensure_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=bootstrap.CHROMIUM)
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def dashboard(browser, html_dir):
    with serve(html_dir) as base_url:
        board = Dashboard(browser, base_url, html_dir)
        try:
            yield board
        finally:
            board.close()


# ---------------------------------------------------------------- what the data says


def load_index(html_dir):
    with open(os.path.join(html_dir, "index.json")) as f:
        return json.load(f)


def graph_files(html_dir, benchmark):
    """The per-machine graph files of ``benchmark`` (not the summary)."""
    found = glob.glob(os.path.join(glob.escape(str(html_dir)), "graphs", "**",
                                   f"{benchmark}.json"), recursive=True)
    return sorted(f for f in found if os.sep + "summary" + os.sep not in f)


def measured_series(graph_file):
    """[[revision, ...] per parameter combination]: the revisions with a value, as asv's graph
    shows one line per combination."""
    with open(graph_file) as f:
        points = json.load(f)
    columns = max((len(v) if isinstance(v, list) else 1 for _, v in points), default=0)
    series = [[] for _ in range(columns)]
    for revision, value in points:
        values = value if isinstance(value, list) else [value]
        for column, v in enumerate(values):
            if v is not None:
                series[column].append(revision)
    return [sorted(s) for s in series if s]


def plotted_series(page):
    """[[x, ...] per line] of the flot plot on the page, once it is drawn."""
    page.wait_for_function("() => { var p = $('#main-graph').data('plot'); "
                           "return p && p.getData().length > 0; }")
    return page.evaluate("() => $('#main-graph').data('plot').getData()"
                         ".map(s => s.data.filter(d => d[1] !== null).map(d => d[0]))")


def tag_labels(page):
    """{label text: its x offset in pixels} of the tag labels drawn over the graph, and
    {revision: the x offset flot puts that revision at}."""
    return page.evaluate("""() => {
        var plot = $('#main-graph').data('plot');
        var labels = {};
        $('#main-graph > div').each(function () {
            labels[$(this).text()] = parseFloat(this.style.left);
        });
        var offsets = {};
        $.each($.asv.main_json.tags, function (tag, rev) {
            offsets[rev] = plot.pointOffset({x: rev, y: 0}).left;
        });
        return [labels, offsets];
    }""")


def selector_values(page, heading):
    """The button texts of the dashboard's ``heading`` filter panel (e.g. machine)."""
    return page.evaluate("""(heading) => $('#graphdisplay-state-params .panel')
        .filter(function () { return $(this).find('.panel-heading').text() === heading; })
        .find('.panel-body a.btn').map(function () { return $(this).text(); }).get()""",
                         heading)
