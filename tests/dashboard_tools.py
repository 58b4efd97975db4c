"""A published asv dashboard, served locally and opened in a real headless Chromium that may
reach nothing else.

The dashboard must be self-contained (``publish`` puts asv's libraries beside it), so every
request outside the local server is blocked and recorded: a page that tries to reach a CDN
fails to load and the test sees the address. A link followed to another site (a commit page's
redirect to GitHub) is answered with a stub, so a test can check where it led.
"""

import contextlib
import glob
import json
import os
import threading

from jaxbench_helpers.host import bootstrap
from jaxbench_helpers.host import serve as jb_serve

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARTIFACTS = os.path.join(ROOT, "tests", "artifacts")
STUB = "<!DOCTYPE html><title>outside the dashboard</title><p>not fetched by the test</p>"


@contextlib.contextmanager
def serve(html_dir):
    """Serve ``html_dir`` over http on a free local port; yields its base URL."""
    server = jb_serve.server(html_dir)
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
        self.context = browser.new_context(viewport={"width": 1400, "height": 900})
        self.context.route("**/*", self._route)
        self.context.on("page", self._watch)
        self.page = None

    def _watch(self, page):
        page.on("pageerror", lambda err: self.errors.append(f"{page.url}: {err}"))
        page.on("console", lambda msg: msg.type == "error" and self.errors.append(
            f"{page.url}: console: {msg.text}"))

    def _route(self, route):
        url = route.request.url
        if url.startswith(self.base_url):
            route.continue_()
            return
        self.outside.append(url)
        if route.request.is_navigation_request():
            route.fulfill(status=200, body=STUB, content_type="text/html")
        else:
            route.abort("blockedbyclient")

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


def opened_profile(index):
    """The profile a graph opens on (jaxbench.js: regular if published, else quick, else
    large); None where the dashboard has one profile or none."""
    profiles = index.get("params", {}).get("env-JAXBENCH_PROFILE") or []
    if len(profiles) < 2:
        return None
    return next(p for p in ("regular", "quick", "large", *profiles) if p in profiles)


def graph_files(html_dir, benchmark, profile=None):
    """The per-machine graph files of ``benchmark`` (not the summary), of ``profile`` only
    where one is named."""
    found = glob.glob(os.path.join(glob.escape(str(html_dir)), "graphs", "**",
                                   f"{benchmark}.json"), recursive=True)
    wanted = None if profile is None else f"{os.sep}env-JAXBENCH_PROFILE-{profile}{os.sep}"
    return sorted(f for f in found if os.sep + "summary" + os.sep not in f
                  and (wanted is None or wanted in f))


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


# JavaScript: the [x, y] points each series of the plot draws, one list per series (a machine
# that has not measured the benchmark has an empty graph file: a series with no point)
POINTS = ("$('#main-graph').data('plot').getData()"
          ".map(s => s.data.filter(d => d[1] !== null))")
# the x of each point, for each series that draws one
DRAWN = POINTS + ".map(points => points.map(d => d[0])).filter(xs => xs.length)"


def plotted_series(page, lines=1):
    """[[x, ...] per line] of the flot plot on the page, once it has drawn ``lines`` lines: asv
    fetches each machine's graph file on its own and draws again as each arrives (on a loaded
    machine a read after the first drawing saw one machine's line of two)."""
    page.wait_for_function(f"n => $('#main-graph').data('plot') && {DRAWN}.length >= n",
                           arg=lines)
    return page.evaluate(f"() => {DRAWN}")


def tag_labels(page):
    """{tag: (label text, its left and right edges in pixels, the x offset of its release's
    line)} of the release labels shown over the graph (those jaxbench.js leaves visible), and
    {revision: the x offset flot puts it at}."""
    page.wait_for_function("() => $('#main-graph > div[data-tag]').length > 0")
    return page.evaluate("""() => {
        var plot = $('#main-graph').data('plot');
        var labels = {};
        $('#main-graph > div[data-tag]:visible').each(function () {
            var left = parseFloat(this.style.left);
            labels[$(this).attr('data-tag')] = [$(this).text(), left, left + this.offsetWidth,
                                                parseFloat($(this).attr('data-x'))];
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
