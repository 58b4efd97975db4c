/* jaxbench's additions to asv's dashboard, loaded after asv's own scripts (publish puts this
   file beside index.html).

   1. A graph opens on one profile. The quick and regular profiles time different sizes, and on
      one linear axis the smaller lies flat at zero; a link without a profile (the summary
      grid's, the benchmark list's) gets the regular profile, else the first one published.
   2. The release labels over a graph show the version (0.10.2). asv writes each tag's name
      at its commit, one per release, and each label's white box covers the one before it,
      so all that showed was "jax-v". Labels that would overlap one already shown are left
      out, the newest measured release's first, then those of releases with a point in the
      graph; the full tag is the tooltip.
      A label starts at its release's line, or ends there where it would leave the graph.
   3. A point measured while its machine was busy (the load record beside the results says so;
      publish writes them to jaxbench-load.json) gets a red ring, and a note over the graph
      says which run and how busy. A ring needs the plotted value to be the graph file's own,
      so there are none on the relative scale or with a parameter on the x axis. */
(function () {
    "use strict";

    var PROFILE = "env-JAXBENCH_PROFILE";
    var PREFERRED = ["regular", "quick", "large"];
    var TAG_PREFIX = "jax-v";
    var PAGES = ["", "summarylist", "regressions"];
    var GAP = 4;  /* pixels between two labels */
    var LOAD_MARKS = "jaxbench-load.json";
    var BUSY = "jaxbench-busy";  /* class of the rings and the note */
    var load_marks = null;  /* {graph file without .json: {commit hash: why}} */
    var loaded_graphs = {};  /* {graph file without .json: its points} as asv loaded them */

    /* The address to open instead of ``hash``: the same with one profile; null if it has one,
       is not a graph, or the dashboard has a single profile. */
    function with_one_profile(hash, index) {
        var profiles = (index && index.params && index.params[PROFILE]) || [];
        if (profiles.length < 2) {
            return null;
        }
        var info = $.asv.parse_hash_string(hash);
        if (PAGES.indexOf(info.location.join("/")) >= 0 || info.params[PROFILE]) {
            return null;
        }
        var pick = profiles[0];
        for (var i = PREFERRED.length - 1; i >= 0; --i) {
            if (profiles.indexOf(PREFERRED[i]) >= 0) {
                pick = PREFERRED[i];
            }
        }
        info.params[PROFILE] = [pick];
        return $.asv.format_hash_string(info);
    }

    function replace_hash(hash) {
        /* no hashchange event: asv is told once, for the address it should show */
        window.history.replaceState(window.history.state, "", hash);
    }

    function tag_labels(graph) {
        var tags = ($.asv.main_json || {}).tags || {};
        return graph.children("div").filter(function () {
            var tag = $(this).attr("data-tag") || $(this).text();
            return Object.prototype.hasOwnProperty.call(tags, tag);
        });
    }

    function tidy_labels() {
        var graph = $("#main-graph");
        var plot = graph.data("plot");
        if (!plot || !$.asv.main_json) {
            return;
        }
        var measured = [];
        $.each(plot.getData(), function (i, series) {
            $.each(series.data, function (j, point) {
                if (point[1] !== null) {
                    measured.push(plot.pointOffset({x: point[0], y: 0}).left);
                }
            });
        });
        var labels = [];
        tag_labels(graph).each(function () {
            var label = $(this);
            var tag = label.attr("data-tag") || label.text();
            if (!label.attr("data-tag")) {
                label.attr("data-tag", tag).attr("title", tag);
                label.text(tag.indexOf(TAG_PREFIX) === 0 ? tag.slice(TAG_PREFIX.length) : tag);
            }
            if (!label.attr("data-x")) {
                label.attr("data-x", parseFloat(this.style.left));
            }
            var x = parseFloat(label.attr("data-x"));
            label.css({"white-space": "nowrap", "left": x + "px"}).show();
            var width = this.offsetWidth;
            /* at the right edge the label ends at its release's line instead of starting there */
            var left = x + width > graph.width() ? x - width : x;
            label.css("left", left + "px");
            var has_point = measured.some(function (m) { return Math.abs(m - x) < 1.5; });
            labels.push({element: label, x: x, left: left, right: left + width,
                         has_point: has_point});
        });
        /* the newest measured release first: at the right edge it ends at its line, and a
           label placed before it there would crowd it out */
        var newest = null;
        $.each(labels, function (i, label) {
            if (label.has_point && (newest === null || label.x > newest.x)) {
                newest = label;
            }
        });
        labels.sort(function (a, b) {
            return ((b === newest) - (a === newest)) || (b.has_point - a.has_point)
                || (a.left - b.left);
        });
        var shown = [];
        $.each(labels, function (i, label) {
            var free = shown.every(function (other) {
                return label.right + GAP <= other.left || other.right + GAP <= label.left;
            });
            if (free) {
                shown.push(label);
            } else {
                label.element.hide();
            }
        });
    }

    /* {x: [[values, why, hash]]} of the current benchmark's busy points, x as plotted */
    function busy_points(benchmark, by_date) {
        var main = $.asv.main_json;
        var found = {};
        $.each(loaded_graphs, function (path, data) {
            var marks = load_marks[path];
            if (!marks || path.slice(-benchmark.length - 1) !== "/" + benchmark) {
                return;
            }
            $.each(data, function (i, point) {
                var hash = main.revision_to_hash[point[0]];
                if (hash && marks[hash]) {
                    var x = by_date ? main.revision_to_date[point[0]] : point[0];
                    var values = $.isArray(point[1]) ? point[1] : [point[1]];
                    (found[x] = found[x] || []).push([values, marks[hash], hash]);
                }
            });
        });
        return found;
    }

    function ring_busy_points() {
        var graph = $("#main-graph");
        graph.children("." + BUSY).remove();
        var plot = graph.data("plot");
        if (!plot || !$.asv.main_json || !load_marks) {
            return;
        }
        var info = $.asv.parse_hash_string(window.location.hash);
        var x_axis = info.params["x-axis"];
        var scale = info.params["x-axis-scale"] || [];
        if (x_axis && x_axis[0] !== "commit") {
            return;
        }
        var found = busy_points(info.location.join("/"), scale[0] === "date");
        var notes = {};
        $.each(plot.getData(), function (i, series) {
            $.each(series.data, function (j, point) {
                $.each(found[point[0]] || [], function (k, mark) {
                    if (point[1] === null || mark[0].indexOf(point[1]) < 0) {
                        return;
                    }
                    var at = plot.pointOffset({x: point[0], y: point[1]});
                    $("<div>").addClass(BUSY).attr("data-commit", mark[2]).css({
                        position: "absolute", left: (at.left - 7) + "px",
                        top: (at.top - 7) + "px", width: "14px", height: "14px",
                        border: "2px solid #d62728", "border-radius": "50%",
                        "box-sizing": "border-box", "pointer-events": "none"
                    }).appendTo(graph);
                    notes[mark[2]] = mark[1];
                });
            });
        });
        var hashes = Object.keys(notes);
        if (hashes.length) {
            var note = $("<div>").addClass(BUSY).attr("id", "jaxbench-busy-note").css({
                position: "absolute", right: "10px", top: "4px", "max-width": "60%",
                "font-size": "11px", background: "rgba(255, 255, 255, 0.85)",
                color: "#d62728", padding: "2px 4px"
            }).text("Ringed: measured while the machine was busy.");
            $.each(hashes.sort(), function (i, hash) {
                $("<div>").text(hash.slice(0, 8) + ": " + notes[hash]).appendTo(note);
            });
            note.appendTo(graph);
        }
    }

    var pending = false;
    function tidy_soon() {
        if (!pending) {
            pending = true;
            window.setTimeout(function () {
                pending = false;
                tidy_labels();
                ring_busy_points();
            }, 0);
        }
    }

    /* Bound before asv's own handler (asv binds its after reading index.json): a link without
       a profile is rewritten in place and asv renders only the rewritten one. Rendering both
       let asv's two loads of graphs run at once and draw each line twice. */
    $(window).on("hashchange", function (event) {
        var hash = with_one_profile(window.location.hash, $.asv && $.asv.main_json);
        if (hash !== null) {
            event.stopImmediatePropagation();
            replace_hash(hash);
            $(window).trigger("hashchange");
        }
    });
    /* The first page: asv renders it as soon as index.json is read, so its address is set as
       the index arrives, before asv sees it. */
    $.ajaxPrefilter(function (options) {
        if (options.url.indexOf("graphs/") === 0 && options.url.indexOf("graphs/summary/") !== 0) {
            /* a graph file: kept, so its points measured under load can be found */
            var graph_filter = options.dataFilter;
            var path = decodeURIComponent(options.url.split("?")[0]).replace(/\.json$/, "");
            options.dataFilter = function (data, type) {
                try {
                    loaded_graphs[path] = JSON.parse(data);
                } catch (err) {
                    /* asv says so itself */
                }
                return graph_filter ? graph_filter(data, type) : data;
            };
            return;
        }
        if (options.url.indexOf("index.json") !== 0) {
            return;
        }
        var filter = options.dataFilter;
        options.dataFilter = function (data, type) {
            try {
                var hash = with_one_profile(window.location.hash, JSON.parse(data));
                if (hash !== null) {
                    replace_hash(hash);
                }
            } catch (err) {
                /* an index that does not parse: asv says so itself */
            }
            return filter ? filter(data, type) : data;
        };
    });
    $(function () {
        var graph = document.getElementById("main-graph");
        if (graph && window.MutationObserver) {
            /* asv writes the labels after each drawing of the plot (first draw, zoom) */
            new MutationObserver(function (changes) {
                for (var i = 0; i < changes.length; ++i) {
                    var added = $(changes[i].addedNodes).not("." + BUSY);
                    if (added.length) {
                        tidy_soon();
                        return;
                    }
                }
            }).observe(graph, {childList: true});
        }
        $.ajax({url: LOAD_MARKS, dataType: "json", cache: false}).done(function (marks) {
            load_marks = marks;
        }).fail(function () {
            load_marks = {};  /* a dashboard published before the file existed */
        }).always(tidy_soon);
    });
}());
