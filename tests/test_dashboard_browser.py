"""The published dashboard in a real headless Chromium that can reach nothing but the local
server, and the commit pages publish writes.

Two dashboards: a copy of the committed html/ made offline as publish makes it, and a fresh
publish of the committed results/ against the release-history repository (rebuilt from the
sdists, so its hashes are the results' own).
Every expectation comes from the data (index.json, the graph files, results/), so the tests
hold whatever releases the committed dashboard covers. Screenshots go to tests/artifacts/.
"""

import base64
import datetime
import glob
import hashlib
import html
import io
import json
import os
import re
import shutil
import subprocess
import tarfile

import asv
import dashboard_tools as dt
import pytest
from asv_tools import config, git_repo

from jaxbench_helpers.common import asvconfig, paths, quiet
from jaxbench_helpers.host import asvconf, dashboard, history, mainjob, publish

BENCHMARK = "bench_matmul.SquareMatmul.time_run"
COMMITTED_HTML = os.path.join(dt.ROOT, "html")
COMMITTED_RESULTS = os.path.join(dt.ROOT, "results")


def _refresh_target(page_html):
    match = re.search(r'<meta http-equiv="refresh" content="0; url=([^"]+)">', page_html)
    return html.unescape(match.group(1)) if match else None


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                           *args], check=True, capture_output=True, text=True).stdout.strip()


# ---------------------------------------------------------------- commit pages, no asv


def test_commit_page_redirects_to_the_upstream_commit():
    upstream = "990e6a0b84138346e6a38785412f36356e0e5dc3"
    message = history.commit_message(history.Sdist("0.10.2", 0, ">=3.11", upstream))
    page = publish.commit_page("61e8ce56" + "0" * 32, message, ["jax-v0.10.2"])
    url = f"https://github.com/jax-ml/jax/commit/{upstream}"
    assert _refresh_target(page) == url
    assert f'<a id="upstream" href="{url}">' in page
    assert "<title>jax 0.10.2 (61e8ce560000)</title>" in page


def test_commit_page_without_an_upstream_commit_falls_back_to_the_tag_then_to_the_hash(tmp_path):
    repo = git_repo(tmp_path / "repo")
    _git(repo, "commit", "-q", "--allow-empty", "-m",
         "jax 0.4.1\n\nRelease 0.4.1, rebuilt from its PyPI sdist.\nUpstream commit: unknown")
    tagged = _git(repo, "rev-parse", "HEAD")
    _git(repo, "tag", "jax-v0.4.1")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "a local change")
    plain = _git(repo, "rev-parse", "HEAD")
    commits = publish.read_commits(str(repo), [tagged, plain])
    assert commits[tagged][1] == ["jax-v0.4.1"] and commits[plain][1] == []

    tag_page = publish.commit_page(tagged, *commits[tagged])
    assert _refresh_target(tag_page) == "https://github.com/jax-ml/jax/releases/tag/jax-v0.4.1"
    plain_page = publish.commit_page(plain, *commits[plain])
    assert _refresh_target(plain_page) is None and "<a" not in plain_page
    assert plain in plain_page and "no upstream commit recorded" in plain_page

    with pytest.raises(publish.PublishError, match="lacks commit"):
        publish.read_commits(str(repo), ["0" * 40])


def test_a_plain_repository_keeps_the_upstream_commit_url(tmp_path):
    conf = asvconf.derive(git_repo(tmp_path / "clone"))
    assert conf["show_commit_url"] == asvconfig.read(paths.CONFIG)["show_commit_url"]
    assert conf["show_commit_url"].startswith("https://github.com/jax-ml/jax/")


# ---------------------------------------------------------------- publish, for real


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """(tmp folder, config, release-history repo) after publish() of the committed results."""
    tmp = tmp_path_factory.mktemp("published")
    repo = tmp / "jax-releases"
    # the default sdist cache: the main job's, so a machine that ran it downloads nothing
    history.build(str(repo), first=mainjob.FIRST_RELEASE, sdist_cache=history.default_cache())
    shutil.copytree(COMMITTED_RESULTS, tmp / "results")
    conf = config(tmp, repo, profile="regular")
    assert publish.publish(conf) == 0
    return tmp, conf, repo


@pytest.mark.slow
def test_history_config_links_the_commit_pages(published):
    _, conf, repo = published
    assert json.load(open(conf))["show_commit_url"] == publish.COMMIT_PAGES == "commits/"
    assert asvconf.is_release_history(str(repo))


@pytest.mark.slow
def test_publish_writes_a_page_per_commit_that_leads_upstream(published):
    tmp, _, repo = published
    index = dt.load_index(tmp / "html")
    measured = {json.load(open(f))["commit_hash"]
                for f in glob.glob(str(tmp / "results" / "*" / "*.json"))
                if not f.endswith("machine.json")}
    hashes = set(index["revision_to_hash"].values())
    assert measured <= hashes
    versions = {commit: version for version, commit in history.release_commits(str(repo))}
    for commit in hashes:
        version = versions[commit]
        # the upstream commit as the release's own sdist records it, not as the message says
        sdist = history.read_sdist(history.sdist_path(history.default_cache(), version), version)
        expected = (f"{publish.UPSTREAM}/commit/{sdist.git_hash}" if sdist.git_hash != "unknown"
                    else f"{publish.UPSTREAM}/releases/tag/jax-v{version}")
        for name in (commit, commit[:index["hash_length"]]):
            page = open(tmp / "html" / "commits" / name / "index.html").read()
            assert _refresh_target(page) == expected, (version, name)
            assert f'href="{expected}"' in page


@pytest.mark.slow
def test_publish_refuses_a_repository_without_the_published_commits(published, tmp_path):
    tmp, _, _ = published
    with pytest.raises(publish.PublishError, match="lacks commit"):
        publish.write_commit_pages(str(tmp / "html"), git_repo(tmp_path / "other"))


# ---------------------------------------------------------------- self-contained, no browser


def _tampered_cache(tmp_path, library):
    """A tarball cache whose ``library`` file differs from the registry's by one byte."""
    real = dashboard.tarball(library["package"], library["version"])
    cache = tmp_path / "npm-cache"
    cache.mkdir()
    member = f"package/{library['file']}"
    with tarfile.open(real) as src, tarfile.open(cache / os.path.basename(real), "w:gz") as out:
        for info in src.getmembers():
            body = src.extractfile(info).read() if info.isfile() else None
            if info.name == member:
                body = body.replace(b"jQuery", b"jQuerY", 1)
                info.size = len(body)
            out.addfile(info, io.BytesIO(body) if body is not None else None)
    return cache


def test_publish_refuses_a_library_file_that_is_not_the_pinned_one(tmp_path):
    jquery = next(lib for lib in dashboard.libraries() if lib["package"] == "jquery")
    cache = _tampered_cache(tmp_path, jquery)
    html_dir = shutil.copytree(COMMITTED_HTML, tmp_path / "html")
    # the page as asv publish writes it, naming the CDNs (the committed one is offline already)
    shutil.copyfile(os.path.join(os.path.dirname(asv.__file__), "www", "index.html"),
                    html_dir / "index.html")
    with pytest.raises(dashboard.DashboardError, match=r"jquery@3\.3\.1 dist/jquery\.min\.js "
                       r"has sha256 [0-9a-f]{64}, not the 160a426f"):
        dashboard.make_offline(str(html_dir), cache=str(cache))
    # the page still names the CDN: nothing was half rewritten
    assert dashboard.external_addresses((html_dir / "index.html").read_text())


def test_a_cdn_address_without_a_pinned_copy_is_an_error(tmp_path):
    html_dir = shutil.copytree(COMMITTED_HTML, tmp_path / "html")
    index = html_dir / "index.html"
    extra = '<script src="https://cdn.example.org/lib/9.9/x.min.js"></script>'
    index.write_text(index.read_text().replace("</head>", extra + "</head>", 1))
    with pytest.raises(dashboard.DashboardError, match=r"cdn\.example\.org/lib/9\.9/x\.min\.js"):
        dashboard.make_offline(str(html_dir))


def test_the_pinned_files_are_what_asv_loads():
    """Every address asv 0.6.6's page loads has a pinned copy, and each copy that is the same
    build as the CDN's (the jsdelivr ones) has the hash asv's page pins for it."""
    import asv

    page = open(os.path.join(os.path.dirname(asv.__file__), "www", "index.html")).read()
    pinned = {lib["cdn"]: lib for lib in dashboard.libraries() if lib["cdn"]}
    assert sorted(dashboard.external_addresses(page)) == sorted(pinned)
    for tag in re.findall(r"<(?:script|link)\b[^>]*>", page):
        url = re.search(r'\b(?:src|href)="(https?://[^"]+)"', tag)
        integrity = re.search(r'\bintegrity="sha256-([^"]+)"', tag)
        if url and integrity:
            expected = base64.b64decode(integrity.group(1)).hex()
            assert pinned[url.group(1)]["sha256"] == expected, url.group(1)


def test_committed_dashboard_loads_nothing_from_outside():
    addresses = dashboard.external_addresses(open(os.path.join(COMMITTED_HTML,
                                                               "index.html")).read())
    if addresses and not os.path.exists(os.path.join(COMMITTED_HTML, dashboard.VENDOR)):
        pytest.skip("the committed html/ was published before publish put its libraries beside "
                    "it; the next publish does (tests below check a copy made offline)")
    assert addresses == []
    for library in dashboard.libraries():
        path = os.path.join(COMMITTED_HTML, *dashboard.local_path(library).split("/"))
        assert hashlib.sha256(open(path, "rb").read()).hexdigest() == library["sha256"], path


# ---------------------------------------------------------------- in the browser


@pytest.fixture(scope="module")
def browser():
    with dt.chromium() as chromium:
        yield chromium


@pytest.fixture(scope="module")
def committed_offline(tmp_path_factory):
    """A copy of the committed html/, made offline as publish makes it."""
    html_dir = tmp_path_factory.mktemp("committed") / "html"
    shutil.copytree(COMMITTED_HTML, html_dir)
    dashboard.make_offline(str(html_dir))
    return str(html_dir)


@pytest.fixture(params=["committed", pytest.param("published", marks=pytest.mark.slow)])
def board(request, browser):
    """(name, html folder, results folder, an open Dashboard)."""
    if request.param == "committed":
        html_dir = request.getfixturevalue("committed_offline")
        results_dir = COMMITTED_RESULTS
    else:
        tmp = request.getfixturevalue("published")[0]
        html_dir, results_dir = str(tmp / "html"), str(tmp / "results")
    with dt.dashboard(browser, html_dir) as board:
        yield request.param, html_dir, results_dir, board


def _measured_revisions(results_dir, index, benchmark, profile=None):
    """Revisions of the commits whose results (of ``profile``, where named) hold a value for
    ``benchmark``."""
    revision = {h: int(r) for r, h in index["revision_to_hash"].items()}
    found = set()
    for path in glob.glob(os.path.join(results_dir, "*", "*.json")):
        if profile is not None and not path.endswith(f"JAXBENCH_PROFILE{profile}.json"):
            continue
        data = json.load(open(path))
        row = data.get("results", {}).get(benchmark)
        values = row[0] if row else None
        if values and any(v is not None for v in values) and data["commit_hash"] in revision:
            found.add(revision[data["commit_hash"]])
    return found


def test_a_graph_no_machine_has_measured_is_written_empty_and_measured_ones_are_kept(tmp_path):
    machines = [{"machine": "a", "python": "3.12"}, {"machine": "b", "python": "3.12"}]
    (tmp_path / "index.json").write_text(json.dumps(
        {"benchmarks": {"m.T.time_x": {}, "m.T.track_y": {}}, "graph_param_list": machines}))
    measured = tmp_path / "graphs" / "machine-a" / "python-3.12" / "m.T.time_x.json"
    measured.parent.mkdir(parents=True)
    measured.write_text("[[1, 2.0]]")
    filled = dashboard.fill_missing_graphs(str(tmp_path))
    # every machine's file of every benchmark, and every summary, but the one measured
    assert sorted(filled) == sorted(
        [os.path.join("graphs", "summary", f"m.T.{b}.json") for b in ("time_x", "track_y")]
        + [os.path.join("graphs", f"machine-{m}", "python-3.12", f"m.T.{b}.json")
           for m, b in (("a", "track_y"), ("b", "time_x"), ("b", "track_y"))])
    assert all((tmp_path / f).read_text() == "[]" for f in filled)
    assert measured.read_text() == "[[1, 2.0]]"
    assert dashboard.fill_missing_graphs(str(tmp_path)) == []


COUNT = "bench_matmul.SquareMatmul.track_dispatch_cpu_instructions_per_call"


def test_a_graph_some_machines_have_not_measured_draws_the_others_without_errors(board):
    # the counts have machines that ran them alone, and machines whose counts are of an older
    # version (not published): each machine's page asks for every machine's file
    name, html_dir, results_dir, dashboard_ = board
    index = dt.load_index(html_dir)
    profile = dt.opened_profile(index)
    expected = [s for f in dt.graph_files(html_dir, COUNT, profile)
                for s in dt.measured_series(f)]
    assert expected, f"{html_dir} has no {COUNT} measured"
    page = dashboard_.open(COUNT)
    assert sorted(dt.plotted_series(page, len(expected))) == sorted(expected)
    assert dashboard_.outside == [] and dashboard_.errors == []


def test_summary_grid_shows_every_benchmark_offline(board):
    name, html_dir, _, dashboard_ = board
    index = dt.load_index(html_dir)
    page = dashboard_.open()
    page.wait_for_function("(n) => $('a.benchmark-container').length === n",
                           arg=len(index["benchmarks"]))
    # the grid draws the small plots in view: at least the first rows are drawn
    page.wait_for_function("() => $('.benchmark-plot canvas').length > 0")
    dashboard_.screenshot(f"{name}-grid.png")
    hrefs = page.evaluate("() => $('a.benchmark-container').map(function () "
                          "{ return $(this).attr('href'); }).get()")
    assert sorted(hrefs) == sorted(f"#{b}" for b in index["benchmarks"])
    assert dashboard_.outside == [] and dashboard_.errors == []


def test_graph_shows_a_point_per_measured_release_labelled_with_its_version(board):
    name, html_dir, results_dir, dashboard_ = board
    index = dt.load_index(html_dir)
    assert BENCHMARK in index["benchmarks"], f"{html_dir} has no {BENCHMARK}"
    # the graph opens on one profile: the other's series are not drawn
    profile = dt.opened_profile(index)
    expected = [s for f in dt.graph_files(html_dir, BENCHMARK, profile)
                for s in dt.measured_series(f)]
    measured = set().union(*expected)
    assert measured == _measured_revisions(results_dir, index, BENCHMARK, profile)

    page = dashboard_.open(BENCHMARK)
    plotted = dt.plotted_series(page, len(expected))
    labels, offsets = dt.tag_labels(page)
    width = page.evaluate("() => $('#main-graph').width()")
    dashboard_.screenshot(f"{name}-graph.png")
    assert sorted(plotted) == sorted(expected)

    tag_of = {revision: tag for tag, revision in index["tags"].items()}
    boxes = [(left, right) for _, left, right, _ in labels.values()]
    crowded = []
    for revision in measured:
        tag = tag_of[revision]
        if tag not in labels:
            # left out only where a shown label's box lies within a label's width of its line
            line = offsets[str(revision)]
            assert any(left - 60 <= line <= right + 60 for left, right in boxes), tag
            crowded.append(tag)
            continue
        text, left, right, line = labels[tag]
        assert text == tag[len("jax-v"):], tag  # the version, not the cut "jax-v"
        assert abs(line - offsets[str(revision)]) < 1.5
        # it starts or ends at its release's line, and stays inside the graph
        assert min(abs(left - line), abs(right - line)) < 1.5, (tag, left, right, line)
        assert 0 <= left and right <= width, (tag, left, right, width)
    # the newest measured release is labelled, and most of the others
    assert tag_of[max(measured)] in labels
    assert len(crowded) <= len(measured) // 4, crowded
    shown = sorted((left, right) for _, left, right, _ in labels.values())
    assert all(a[1] <= b[0] for a, b in zip(shown, shown[1:])), shown  # none covers another
    assert dashboard_.outside == [] and dashboard_.errors == []


def test_committed_dashboard_rings_what_the_committed_load_records_call_busy():
    with open(os.path.join(COMMITTED_HTML, dashboard.LOAD_MARKS)) as f:
        committed = json.load(f)
    assert committed == dashboard.load_marks(COMMITTED_HTML, COMMITTED_RESULTS)


@pytest.fixture(scope="module")
def busy_html(committed_offline, tmp_path_factory):
    """The committed dashboard with the rings publish writes when the load record beside the
    results calls busy the run that measured BENCHMARK at its newest commit on the history
    machine (a record of the test's own; the committed records call that run quiet)."""
    machine = "cpu-2core-amd-epyc-24gb"
    tmp = tmp_path_factory.mktemp("busy")
    shutil.copytree(COMMITTED_RESULTS, tmp / "results")
    shutil.copytree(committed_offline, tmp / "html")
    newest = None
    for path in glob.glob(str(tmp / "results" / machine / "*.json")):
        data = json.load(open(path))
        row = data.get("results", {}).get(BENCHMARK)
        if row and any(v is not None for v in row[0]) and (newest is None
                                                           or data["date"] > newest["date"]):
            newest = data
    row = newest["results"][BENCHMARK]
    columns = newest["result_columns"]
    start = row[columns.index("started_at")] / 1000
    end = start + row[columns.index("duration")]
    stamp = [datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat() for t in
             (start, end)]
    quiet.write_record(quiet.LoadRecord("main", *stamp, end - start, others_share=0.3),
                       str(tmp / "results" / machine / quiet.RECORD_NAME))
    assert dashboard.write_load_marks(str(tmp / "html"), str(tmp / "results")) >= 1
    return str(tmp / "html"), newest["commit_hash"]


def test_points_measured_while_the_machine_was_busy_are_ringed_with_a_note(browser, busy_html):
    html_dir, busy_commit = busy_html
    with open(os.path.join(html_dir, dashboard.LOAD_MARKS)) as f:
        marks = json.load(f)
    index = dt.load_index(html_dir)
    profile = dt.opened_profile(index)
    revision = {h: int(r) for r, h in index["revision_to_hash"].items()}
    # {commit: how many of its points the graph draws} of BENCHMARK's ringed commits
    rings = {}
    for graph in dt.graph_files(html_dir, BENCHMARK, profile):
        path = os.path.relpath(graph, html_dir)[:-len(".json")].replace(os.sep, "/")
        for commit in marks.get(path, {}):
            rings[commit] = sum(revision[commit] in s for s in dt.measured_series(graph))
    assert rings.get(busy_commit), (busy_commit, rings)

    with dt.dashboard(browser, html_dir) as board:
        page = board.open(BENCHMARK)
        dt.plotted_series(page)
        page.wait_for_function("n => $('#main-graph > .jaxbench-busy[data-commit]').length >= n",
                               arg=sum(rings.values()))
        points, found, note = page.evaluate("""() => {
            var plot = $('#main-graph').data('plot');
            var points = [];
            $.each(plot.getData(), function (i, s) {
                $.each(s.data, function (j, d) {
                    if (d[1] !== null) {
                        var at = plot.pointOffset({x: d[0], y: d[1]});
                        points.push([d[0], at.left, at.top]);
                    }
                });
            });
            var found = $('#main-graph > .jaxbench-busy[data-commit]').map(function () {
                return [[$(this).attr('data-commit'), this.offsetLeft + this.offsetWidth / 2,
                         this.offsetTop + this.offsetHeight / 2]];
            }).get();
            return [points, found, $('#jaxbench-busy-note').text()];
        }""")
        board.screenshot("busy-graph.png")
        assert sorted(c for c, _, _ in found) == sorted(c for c, n in rings.items()
                                                         for _ in range(n))
        assert note.startswith("Ringed: measured while the machine was busy.")
        for commit, left, top in found:
            # each ring is centred on a point of its commit, and the note says why
            assert any(x == revision[commit] and abs(left - px) < 1.5 and abs(top - py) < 1.5
                       for x, px, py in points), (commit, left, top)
            assert commit[:8] in note and marks_why(marks, BENCHMARK, commit) in note
            assert "UNDER LOAD" in note

        # a graph measured on a quiet machine has no ring
        quiet_benchmark = next(b for b in sorted(index["benchmarks"])
                               if not any(p.endswith("/" + b) for p in marks)
                               and any(dt.measured_series(f) for f in
                                       dt.graph_files(html_dir, b, profile)))
        series = sorted(",".join(map(str, s)) for f in dt.graph_files(html_dir, quiet_benchmark,
                                                                      profile)
                        for s in dt.measured_series(f))
        page.evaluate(f"() => {{ window.location.hash = {json.dumps('#' + quiet_benchmark)}; }}")
        page.wait_for_function(f"want => JSON.stringify({dt.DRAWN}.map(xs => xs.join(','))"
                               ".sort()) === want", arg=json.dumps(series))
        # after the drawing's tidy-up (a timer of 0 ms) has run
        assert page.evaluate("() => new Promise(done => window.setTimeout("
                             "() => done($('#main-graph > .jaxbench-busy').length), 200))") == 0
        assert board.outside == [] and board.errors == []


def marks_why(marks, benchmark, commit):
    return next(commits[commit] for path, commits in marks.items()
                if path.endswith("/" + benchmark) and commit in commits)


def test_regressions_page_renders_its_table(board):
    name, html_dir, _, dashboard_ = board
    with open(os.path.join(html_dir, "regressions.json")) as f:
        regressions = json.load(f)["regressions"]
    rows = sum(len(item[6]) for item in regressions if item[6] is not None)
    page = dashboard_.open("regressions")
    page.wait_for_selector("#regressions-body table thead")
    dashboard_.screenshot(f"{name}-regressions.png")
    assert page.evaluate("() => $('#regressions-body table:visible tbody tr').length") == rows
    assert dashboard_.outside == [] and dashboard_.errors == []


def test_reading_page_is_linked_from_the_navigation_bar(board):
    name, _, _, dashboard_ = board
    page = dashboard_.open()
    page.click("#nav-li-reading a")
    page.wait_for_url(re.compile(r"/reading\.html$"))
    assert page.inner_text("h1") == "How to read this dashboard"
    text = page.inner_text("body")
    for topic in ("JAXBENCH_PROFILE", "n/a", "time_lower", "time_dispatch_100_calls",
                  "measured while the machine was busy"):
        assert topic in text
    # its stylesheet is the dashboard's own copy of Bootstrap
    assert page.evaluate("() => getComputedStyle(document.querySelector('h1')).fontFamily"
                         ".includes('Helvetica')")
    dashboard_.screenshot(f"{name}-reading.png")
    page.click("text=back to the dashboard")
    page.wait_for_function("() => window.$ && $.asv && $.asv.main_json")
    assert dashboard_.outside == [] and dashboard_.errors == []


@pytest.mark.slow
def test_a_graph_point_links_to_its_commit_page_which_leads_upstream(published, browser):
    tmp, _, repo = published
    html_dir = tmp / "html"
    index = dt.load_index(html_dir)
    with dt.dashboard(browser, html_dir) as board_:
        page = board_.open(BENCHMARK)
        dt.plotted_series(page)
        # the first machine with a point: the series come in the order their files load
        x, y, revision = page.evaluate("""() => {
            var plot = $('#main-graph').data('plot');
            var line = """ + dt.POINTS + """.find(points => points.length);
            var point = line[line.length - 1];
            var at = plot.pointOffset({x: point[0], y: point[1]});
            var box = $('#main-graph')[0].getBoundingClientRect();
            return [box.left + at.left, box.top + at.top, point[0]];
        }""")
        commit = index["revision_to_hash"][str(revision)]
        short = commit[:index["hash_length"]]
        upstream = publish.upstream_commit(_git(repo, "log", "-1", "--format=%B", commit))
        href = page.evaluate("(rev) => new URL($.asv.main_json.show_commit_url + "
                             "$.asv.get_commit_hash(rev), location.href).href", revision)
        assert href == f"{board_.base_url}commits/{short}"
        with page.expect_popup() as popup:
            page.mouse.click(x, y)
        opened = popup.value
        opened.wait_for_url(re.compile(r"^https://github\.com/"))
        board_.page = opened
        # the stub that answered for github.com: the page is not fetched from there
        assert opened.url == f"{publish.UPSTREAM}/commit/{upstream}"
        assert board_.outside == [opened.url]

        page = board_.open("regressions")
        page.wait_for_selector("#regressions-body table thead")
        for link in page.evaluate("() => $('#regressions-body a[href^=\"commits/\"]')"
                                  ".map(function () { return this.href; }).get()"):
            answer = page.request.get(link)
            assert answer.ok, link
            assert _refresh_target(answer.text()).startswith(publish.UPSTREAM + "/"), link
        assert board_.errors == [], board_.errors


def test_committed_dashboard_has_a_page_for_each_commit_link():
    index = dt.load_index(COMMITTED_HTML)
    if index["show_commit_url"] != publish.COMMIT_PAGES:
        pytest.skip(f"the committed html/ links commits to {index['show_commit_url']!r}: it "
                    "was published before the commit pages; the next main job republishes it")
    for commit in index["revision_to_hash"].values():
        for name in (commit, commit[:index["hash_length"]]):
            page = open(os.path.join(COMMITTED_HTML, "commits", name, "index.html")).read()
            assert _refresh_target(page).startswith(publish.UPSTREAM + "/"), name
