/* vllm-logwatch status page: keep the server's page live and draw the last hour.
 *
 * The server renders every number, word and row (page.py). Each second this script fetches the page
 * again and swaps in its parts marked data-live, so it renders none of them; it draws the last hour
 * from api/v1/history with uPlot, and says so plainly when the exporter stops answering: the numbers
 * are greyed out and the banner says how old they are, never shown as current.
 * No build step, no dependencies but the vendored uPlot. No HTML is written but the server's own.
 */
(function () {
  "use strict";

  var PAGE_EVERY_MS = 1000;
  var TIMEOUT_MS = 4000;
  var HISTORY_AT_LEAST_EVERY_MS = 30000;
  var HISTORY_OVERLAP_S = 30; // refetch a little: engines' lines with the same stamp arrive apart
  var CHART_HEIGHT = 190;
  var SHORTEST_SPAN_S = 600; // one point (or points of one second): ten minutes around them, as `plot` draws
  var COLOURS = { // Okabe-Ito: told apart with the common colour-vision deficiencies
    blue: "#0072B2", vermillion: "#D55E00", green: "#009E73", orange: "#B26B00", purple: "#AA4499"
  };
  var CHARTS = [
    { key: "throughput", title: "Throughput", unit: "tok/s", series: [
      { field: "generation_throughput", label: "Generation", colour: COLOURS.blue },
      { field: "prompt_throughput", label: "Prompt", colour: COLOURS.vermillion }] },
    { key: "requests", title: "Requests", unit: "reqs", series: [
      { field: "running", label: "Running", colour: COLOURS.green },
      { field: "waiting", label: "Waiting", colour: COLOURS.orange }] },
    { key: "cache", title: "KV cache and hit rates", unit: "%", range: [0, 100], series: [
      { field: "kv_cache_usage_pct", label: "KV cache usage", colour: COLOURS.blue },
      { field: "prefix_cache_hit_rate_pct", label: "Prefix hit rate", colour: COLOURS.green, dash: [6, 4] },
      { field: "mm_cache_hit_rate_pct", label: "MM hit rate", colour: COLOURS.purple, dash: [2, 3] }] }
  ];

  var body = document.body;
  var table = document.getElementById("engines");
  var connection = document.getElementById("connection");
  var connectionText = connection.querySelector(".text");
  var chartList = document.getElementById("chart-list");

  var live = { connected: true, lastOkMs: Date.now(), everConnected: false };
  var history = { instance: null, lastTime: null, windowSeconds: 3600, engines: {}, statsLines: -1,
                  fetchedMs: 0, busy: false };
  var charts = {};

  function ago(seconds) { // the connection's age, which only the browser knows
    if (seconds < 60) return seconds + " s ago";
    if (seconds < 3600) return Math.floor(seconds / 60) + " min " + (seconds % 60) + " s ago";
    return Math.floor(seconds / 3600) + " h " + Math.floor((seconds % 3600) / 60) + " min ago";
  }

  function engineRows() { return document.getElementById("engine-rows"); }

  function engineName(label) { // as the server wrote it in the engines table
    var row = engineRows().querySelector('tr[data-engine="' + CSS.escape(label) + '"]');
    return row ? row.cells[0].textContent : label;
  }

  // -- the page ------------------------------------------------------------------------------------

  function tickConnection() {
    var since = Math.max(0, Math.floor((Date.now() - live.lastOkMs) / 1000));
    var when = new Date(live.lastOkMs).toLocaleTimeString("en-GB");
    if (live.connected) {
      connectionText.textContent = live.everConnected ? "Live: updated " + ago(since) : "Connecting\u2026";
    } else {
      connectionText.textContent = "Disconnected from the exporter: the numbers below are from " + ago(since) +
        " (last update " + when + "). Retrying\u2026";
    }
  }

  function setConnected(connected) {
    live.connected = connected;
    body.classList.toggle("disconnected", !connected);
    connection.classList.toggle("lost", !connected);
    table.setAttribute("data-stale", connected ? "false" : "true");
    if (!connected) { // an engine's state is not known while nobody reads its log
      Array.prototype.forEach.call(engineRows().querySelectorAll(".badge"), function (badge) {
        badge.className = "badge state-unknown";
        badge.textContent = "unknown";
      });
    }
    tickConnection();
  }

  function onPage(text) {
    var wasDown = !live.connected;
    var fresh = new DOMParser().parseFromString(text, "text/html");
    Array.prototype.forEach.call(fresh.querySelectorAll("[data-live]"), function (part) {
      var old = document.getElementById(part.id);
      if (old) old.replaceWith(document.adoptNode(part));
    });
    live.lastOkMs = Date.now();
    live.everConnected = true;
    setConnected(true);
    var lines = Number(engineRows().getAttribute("data-stats-lines"));
    // The history holds a line before the page counts it (both are updated under one lock).
    if (wasDown || lines !== history.statsLines || Date.now() - history.fetchedMs > HISTORY_AT_LEAST_EVERY_MS) {
      fetchHistory(false, lines);
    }
  }

  function fetchAs(url, read) { // the response's json() or text(), or an error after TIMEOUT_MS
    return fetch(url, { cache: "no-store", signal: AbortSignal.timeout(TIMEOUT_MS) })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response[read]();
      });
  }

  function pollPage() {
    fetchAs(window.location.href, "text")
      .then(onPage)
      .catch(function () { setConnected(false); })
      .then(function () { setTimeout(pollPage, PAGE_EVERY_MS); });
  }

  // -- the history and its charts ------------------------------------------------------------------

  function fetchHistory(full, lines) {
    if (history.busy) return; // the next status poll asks again: statsLines is set on success only
    history.busy = true;
    var since = !full && history.lastTime !== null ? "?since=" + (history.lastTime - HISTORY_OVERLAP_S) : "";
    fetchAs("api/v1/history" + since, "json").then(function (data) {
      history.busy = false;
      history.fetchedMs = Date.now();
      if (data.instance !== history.instance) {
        resetCharts();
        history.instance = data.instance;
        if (since !== "") { fetchHistory(true, lines); return; } // a restarted exporter: fetch it all
      }
      history.statsLines = lines;
      history.windowSeconds = data.window_seconds || history.windowSeconds;
      merge(data.engines || {});
      draw();
    }, function () { history.busy = false; });
  }

  function merge(engines) {
    var newest = history.lastTime;
    Object.keys(engines).forEach(function (label) {
      var incoming = engines[label];
      var times = incoming.time || [];
      var held = history.engines[label];
      if (!held) {
        held = history.engines[label] = { time: [] };
        CHARTS.forEach(function (chart) { chart.series.forEach(function (s) { held[s.field] = []; }); });
      }
      var last = held.time.length ? held.time[held.time.length - 1] : -Infinity;
      var gaps = incoming.gaps || [];
      for (var i = 0; i < times.length; i++) {
        if (times[i] <= last) continue; // already held (the overlap)
        held.time.push(times[i]);
        // A gap row (a silence of several intervals: a restart, a replay's next pass) is null, and
        // uPlot breaks the line there; a value a line lacks is undefined, and uPlot joins over it.
        var gap = gaps.indexOf(times[i]) >= 0;
        Object.keys(held).forEach(function (field) {
          if (field === "time") return;
          var column = incoming[field];
          var value = column && column[i] !== undefined && column[i] !== null ? column[i] : undefined;
          held[field].push(gap ? null : value);
        });
        if (newest === null || times[i] > newest) newest = times[i];
      }
    });
    history.lastTime = newest;
    if (newest === null) return;
    var oldest = newest - history.windowSeconds;
    Object.keys(history.engines).forEach(function (label) {
      var held = history.engines[label];
      var cut = 0;
      while (cut < held.time.length && held.time[cut] < oldest) cut++;
      if (cut) Object.keys(held).forEach(function (field) { held[field].splice(0, cut); });
    });
  }

  function resetCharts() {
    Object.keys(charts).forEach(function (label) {
      CHARTS.forEach(function (chart) { charts[label].plots[chart.key].destroy(); });
      chartList.removeChild(charts[label].section);
    });
    charts = {};
    history.engines = {};
    history.lastTime = null;
  }

  function hasValues(column) {
    for (var i = 0; i < column.length; i++) if (column[i] !== null && column[i] !== undefined) return true;
    return false;
  }

  function chartWidth(element) {
    return Math.max(240, Math.floor(element.getBoundingClientRect().width));
  }

  function xRange(u, min, max) { // uPlot's own range of a single instant spans years
    var times = u.data[0];
    if (!times || !times.length || min === null || max === null) return [min, max];
    var first = times[0], last = times[times.length - 1];
    if (last - first >= SHORTEST_SPAN_S) return [min, max];
    var middle = (first + last) / 2;
    return [middle - SHORTEST_SPAN_S / 2, middle + SHORTEST_SPAN_S / 2];
  }

  function makePlot(spec, held, figure) {
    var used = spec.series.filter(function (s) { return s.field !== "mm_cache_hit_rate_pct" || hasValues(held[s.field]); });
    var legend = figure.querySelector(".legend");
    var box = figure.querySelector(".plot");
    legend.textContent = "";
    used.forEach(function (s) {
      var item = document.createElement("li");
      var swatch = document.createElement("span");
      swatch.className = "swatch" + (s.dash ? (s.dash[0] > 3 ? " dashed" : " dotted") : "");
      swatch.style.borderTopColor = s.colour;
      swatch.setAttribute("aria-hidden", "true");
      item.appendChild(swatch);
      item.appendChild(document.createTextNode(s.label));
      legend.appendChild(item);
    });
    var opts = {
      width: chartWidth(box),
      height: CHART_HEIGHT,
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true, range: xRange }, y: spec.range ? { range: spec.range } : { range: function (u, min, max) {
        return [0, max > 0 ? max * 1.1 : 1];
      } } },
      axes: [
        { stroke: "#3d434a", grid: { stroke: "#e6e8eb" }, ticks: { stroke: "#d0d4d9" } },
        { stroke: "#3d434a", grid: { stroke: "#e6e8eb" }, ticks: { stroke: "#d0d4d9" }, size: 56,
          values: function (u, splits) {
            return splits.map(function (v) { return v.toLocaleString("en-US", { maximumFractionDigits: 1 }); });
          } }
      ],
      series: [{ label: "Time" }].concat(used.map(function (s) {
        return { label: s.label + " (" + spec.unit + ")", stroke: s.colour, width: 2, dash: s.dash,
                 spanGaps: false, points: { show: false } };
      }))
    };
    var data = [held.time].concat(used.map(function (s) { return held[s.field]; }));
    var plot = new window.uPlot(opts, data, box);
    plot.logwatchFields = used.map(function (s) { return s.field; });
    return plot;
  }

  function chartsFor(label) {
    if (charts[label]) return charts[label];
    var section = document.createElement("section");
    section.className = "engine-charts";
    section.setAttribute("data-engine", label);
    var heading = document.createElement("h3");
    heading.textContent = engineName(label);
    section.appendChild(heading);
    var grid = document.createElement("div");
    grid.className = "chart-grid";
    section.appendChild(grid);
    chartList.appendChild(section);
    var figures = {};
    CHARTS.forEach(function (spec) { // lay every figure out first: each plot takes its column's width
      var figure = document.createElement("figure");
      figure.className = "chart";
      figure.setAttribute("data-chart", spec.key);
      var caption = document.createElement("figcaption");
      caption.textContent = spec.title + " (" + spec.unit + ")";
      var legend = document.createElement("ul");
      legend.className = "legend";
      caption.appendChild(legend);
      figure.appendChild(caption);
      var box = document.createElement("div");
      box.className = "plot";
      box.setAttribute("role", "img");
      box.setAttribute("aria-label", spec.title + " of " + engineName(label) + " over the last hour, in " +
                       spec.unit + "; the table above has the current values");
      figure.appendChild(box);
      grid.appendChild(figure);
      figures[spec.key] = figure;
    });
    var plots = {};
    CHARTS.forEach(function (spec) { plots[spec.key] = makePlot(spec, history.engines[label], figures[spec.key]); });
    charts[label] = { section: section, plots: plots, figures: figures };
    return charts[label];
  }

  function draw() {
    if (typeof window.uPlot !== "function") return;
    var labels = Object.keys(history.engines).filter(function (label) { return history.engines[label].time.length; });
    chartList.classList.toggle("empty", labels.length === 0);
    labels.forEach(function (label) {
      var held = history.engines[label];
      var set = chartsFor(label);
      CHARTS.forEach(function (spec) {
        var plot = set.plots[spec.key];
        var wantsMM = spec.key === "cache" && hasValues(held.mm_cache_hit_rate_pct) &&
          plot.logwatchFields.indexOf("mm_cache_hit_rate_pct") < 0;
        if (wantsMM) { // the first MM line: rebuild with its series
          plot.destroy();
          set.plots[spec.key] = makePlot(spec, held, set.figures[spec.key]);
          return;
        }
        plot.setData([held.time].concat(plot.logwatchFields.map(function (f) { return held[f]; })));
      });
    });
  }

  function resize() {
    Object.keys(charts).forEach(function (label) {
      CHARTS.forEach(function (spec) {
        var plot = charts[label].plots[spec.key];
        plot.setSize({ width: chartWidth(plot.root.parentNode), height: CHART_HEIGHT });
      });
    });
  }

  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(resize, 100);
  });

  // For tests and the curious: per engine and chart, the points it draws, the seconds its time axis
  // spans, its gap rows (nulls, where uPlot breaks the line) and each series' spanGaps.
  window.logwatch = {
    charts: function () {
      var out = {};
      Object.keys(charts).forEach(function (label) {
        out[label] = {};
        CHARTS.forEach(function (spec) {
          var plot = charts[label].plots[spec.key];
          out[label][spec.key] = {
            points: plot.data[0].length,
            span: plot.scales.x.max - plot.scales.x.min,
            nulls: plot.data[1].filter(function (v) { return v === null; }).length,
            spanGaps: plot.series.slice(1).map(function (s) { return s.spanGaps; })
          };
        });
      });
      return out;
    },
    history: history
  };

  body.classList.add("js");
  setInterval(tickConnection, 1000);
  pollPage();
})();
