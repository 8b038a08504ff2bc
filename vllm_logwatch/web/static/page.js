/* vllm-logwatch status page: poll api/v1/status and api/v1/history, update the page in place.
 *
 * The server renders the whole page first (page.py); this script only refreshes the elements it
 * marked with data-* attributes, draws the last hour with uPlot, and says so plainly when the exporter
 * stops answering: the numbers are greyed out and aged, never shown as current.
 * No build step, no dependencies but the vendored uPlot. Values are written with textContent only.
 */
(function () {
  "use strict";

  var STATUS_EVERY_MS = 1000;
  var TIMEOUT_MS = 4000;
  var HISTORY_AT_LEAST_EVERY_MS = 30000;
  var HISTORY_OVERLAP_S = 30; // refetch a little: engines' lines with the same stamp arrive apart
  var CHART_HEIGHT = 190;
  var SHORTEST_SPAN_S = 600; // one point (or points of one second): ten minutes around them, as `plot` draws
  var COLOURS = { // Okabe-Ito: told apart with the common colour-vision deficiencies
    blue: "#0072B2", vermillion: "#D55E00", green: "#009E73", orange: "#B26B00", purple: "#AA4499"
  };
  var CHARTS = [
    { key: "throughput", title: "Throughput", unit: "tok/s", digits: 1, series: [
      { field: "generation_throughput", label: "Generation", colour: COLOURS.blue },
      { field: "prompt_throughput", label: "Prompt", colour: COLOURS.vermillion }] },
    { key: "requests", title: "Requests", unit: "reqs", digits: 0, series: [
      { field: "running", label: "Running", colour: COLOURS.green },
      { field: "waiting", label: "Waiting", colour: COLOURS.orange }] },
    { key: "cache", title: "KV cache and hit rates", unit: "%", digits: 1, range: [0, 100], series: [
      { field: "kv_cache_usage_pct", label: "KV cache usage", colour: COLOURS.blue },
      { field: "prefix_cache_hit_rate_pct", label: "Prefix hit rate", colour: COLOURS.green, dash: [6, 4] },
      { field: "mm_cache_hit_rate_pct", label: "MM hit rate", colour: COLOURS.purple, dash: [2, 3] }] }
  ];

  var body = document.body;
  var table = document.getElementById("engines");
  var tbody = table.tBodies[0];
  var rowTemplate = document.getElementById("row-template");
  var stateLabels = JSON.parse(table.getAttribute("data-states"));
  var notice = document.getElementById("notice");
  var messages = JSON.parse(notice.getAttribute("data-messages"));
  var connection = document.getElementById("connection");
  var connectionText = connection.querySelector(".text");
  var chartList = document.getElementById("chart-list");

  var live = { connected: true, lastOkMs: Date.now(), everConnected: false, ages: {} };
  var history = { instance: null, lastTime: null, windowSeconds: 3600, engines: {}, statsLines: -1,
                  fetchedMs: 0, busy: false };
  var charts = {};

  // -- formatting (page.py formats alike) --------------------------------------------------------

  function formatNumber(value, digits) {
    if (typeof value !== "number" || !isFinite(value)) return "\u2014";
    return value.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
  }

  function formatQuantity(value, digits) { // a whole count without decimals: "512", not "512.0"
    return formatNumber(value, typeof value === "number" && Math.floor(value) === value ? 0 : digits);
  }

  function formatAge(seconds) {
    if (typeof seconds !== "number" || !isFinite(seconds)) return "\u2014";
    var whole = Math.max(0, Math.floor(seconds));
    if (whole < 60) return whole + " s ago";
    if (whole < 3600) return Math.floor(whole / 60) + " min " + (whole % 60) + " s ago";
    return Math.floor(whole / 3600) + " h " + Math.floor((whole % 3600) / 60) + " min ago";
  }

  function get(source, path) {
    var value = source;
    var parts = path.split(".");
    for (var i = 0; i < parts.length; i++) {
      if (value === null || typeof value !== "object") return null;
      value = value[parts[i]];
    }
    return value === undefined ? null : value;
  }

  function first(source, keys) {
    var options = keys.split("|");
    for (var i = 0; i < options.length; i++) {
      var value = get(source, options[i]);
      if (value !== null && value !== "" && value !== "unknown") return value;
    }
    return null;
  }

  function childState(child) {
    if (!child) return "starting";
    var pid = child.pid !== undefined ? child.pid : child.child_pid;
    var code = child.last_exit_code !== undefined ? child.last_exit_code : child.child_last_exit_code;
    if (child.child_up === 1) return pid !== null && pid !== undefined ? "running (pid " + pid + ")" : "running";
    if ((child.child_up === null || child.child_up === undefined) && (code === null || code === undefined)) {
      return "starting";
    }
    return "not running" + (code !== null && code !== undefined ? " (last exit code " + code + ")" : "");
  }

  function shown(value, kind, digits) { // page.py _shown
    if (kind === "list") return value && value.length ? value.join(", ") : "\u2014";
    if (kind === "problems") return problems({ problems: value });
    if (kind === "number") return formatNumber(value, digits);
    if (kind === "quantity") return formatQuantity(value, digits);
    return value === null ? "\u2014" : String(value);
  }

  function problems(counters) {
    var seen = [];
    var all = counters && counters.problems;
    if (all) Object.keys(all).forEach(function (tag) { if (all[tag] > 0) seen.push(tag + " \u00d7" + all[tag]); });
    return seen.join(", ") || "none";
  }

  function skippedText(skipped) { // page.py skipped_text
    if (typeof skipped !== "number" || skipped <= 0) return "";
    return "Started at the end of the log: " + formatNumber(skipped, 0) + " bytes of older lines were " +
      "skipped (only the launch's start-up facts were read from them); the numbers count lines from " +
      "then on. To read the older lines, start watch with --from-start.";
  }

  function setText(element, text) {
    if (element.textContent !== text) element.textContent = text;
  }

  // -- the status ----------------------------------------------------------------------------------

  function updateKeyed(status) {
    var keyed = document.querySelectorAll("[data-key]");
    for (var i = 0; i < keyed.length; i++) {
      var element = keyed[i];
      var key = element.getAttribute("data-key");
      var kind = element.getAttribute("data-kind");
      var text;
      if (kind === "child") text = childState(status.child);
      else if (kind === "problems") text = problems(status.counters);
      else if (kind === "skipped") {
        text = skippedText(status.skipped_bytes);
        element.hidden = !text;
      }
      else text = shown(first(status, key), kind, Number(element.getAttribute("data-digits")));
      setText(element, text);
    }
  }

  function updateSources(status) { // a many-source watch: a row a source, in the status's order
    var sourcesTable = document.getElementById("sources");
    if (!sourcesTable) return;
    var columns = JSON.parse(sourcesTable.getAttribute("data-columns"));
    var rows = sourcesTable.tBodies[0];
    var sources = status.sources || [];
    sources.forEach(function (source, index) {
      var row = rows.rows[index];
      if (!row || row.getAttribute("data-source") !== source.name) {
        row = rows.insertRow(index);
        row.setAttribute("data-source", source.name);
        var name = document.createElement("th");
        name.scope = "row";
        name.textContent = source.name;
        row.appendChild(name);
        columns.forEach(function (column) { row.insertCell().setAttribute("data-kind", column.kind); });
      }
      columns.forEach(function (column, i) {
        setText(row.cells[i + 1], shown(first(source, column.field), column.kind, column.digits));
      });
    });
    while (rows.rows.length > sources.length) rows.deleteRow(sources.length);
  }

  function updateNotice(status) {
    var engines = Object.keys(status.engines || {});
    if (engines.length) {
      notice.hidden = true;
      return;
    }
    var unreadable = get(status, "counters.parse_errors.stats");
    var reason = messages[status.stats_missing] ? status.stats_missing : "waiting";
    if (typeof unreadable === "number" && unreadable > 0) reason = "unreadable_stats";
    notice.setAttribute("data-reason", reason);
    setText(notice, messages[reason].replace("{n}", formatNumber(unreadable, 0)));
    notice.hidden = false;
  }

  function engineName(label) {
    var mark = label.lastIndexOf(" #");  // "SOURCE #LABEL": an engine of one source of many
    if (mark >= 0) {
      var own = engineName(label.slice(mark + 2));
      return label.slice(0, mark) + ": " + own.charAt(0).toLowerCase() + own.slice(1);
    }
    if (label === "aggregated") return "All engines (aggregated)";
    if (label === "other") return "Other engines (beyond the label limit)";
    return "Engine " + label;
  }

  function rowFor(label) {
    var rows = tbody.rows;
    for (var i = 0; i < rows.length; i++) {
      if (rows[i].getAttribute("data-engine") === label) return rows[i];
    }
    var row = rowTemplate.content.firstElementChild.cloneNode(true);
    row.setAttribute("data-engine", label);
    row.querySelector("th").textContent = engineName(label);
    tbody.appendChild(row);
    return row;
  }

  function updateRow(row, engine) {
    var state = stateLabels[engine.state] ? engine.state : "ok";
    row.className = "row-" + state;
    var cells = row.querySelectorAll("td[data-field]");
    for (var i = 0; i < cells.length; i++) {
      var cell = cells[i];
      var field = cell.getAttribute("data-field");
      var kind = cell.getAttribute("data-kind");
      var value = get(engine, field);
      if (kind === "state") {
        var badge = cell.querySelector(".badge");
        badge.className = "badge state-" + state;
        setText(badge, stateLabels[state]);
        cell.setAttribute("data-value", state);
      } else if (kind === "age") {
        var interval = engine.interval_seconds;
        setText(cell.querySelector(".sub"), typeof interval === "number" ? "every " + formatNumber(interval, 0) + " s" : "");
        cell.setAttribute("data-value", typeof value === "number" ? String(value) : "");
      } else {
        setText(cell, formatNumber(value, Number(cell.getAttribute("data-digits"))));
        cell.setAttribute("data-value", typeof value === "number" ? String(value) : "");
      }
    }
  }

  function updateTable(status) {
    var engines = status.engines || {};
    var labels = Object.keys(engines);
    var now = Date.now();
    live.ages = {};
    labels.forEach(function (label) {
      updateRow(rowFor(label), engines[label]);
      live.ages[label] = { seconds: engines[label].age_seconds, atMs: now };
    });
    Array.prototype.slice.call(tbody.rows).forEach(function (row) {
      var label = row.getAttribute("data-engine");
      if (label === null ? labels.length : labels.indexOf(label) < 0) tbody.removeChild(row);
    });
    if (!labels.length && !tbody.rows.length) {
      var empty = tbody.insertRow();
      empty.className = "empty";
      var cell = empty.insertCell();
      cell.colSpan = table.tHead.rows[0].cells.length;
      cell.textContent = table.getAttribute("data-empty");
    }
    tickAges();
  }

  function tickAges() {
    var now = Date.now();
    Array.prototype.forEach.call(tbody.rows, function (row) {
      var age = live.ages[row.getAttribute("data-engine")];
      var cell = row.querySelector('td[data-kind="age"] .v');
      if (age && cell) setText(cell, formatAge(age.seconds + (now - age.atMs) / 1000));
    });
  }

  function tickConnection() {
    var since = Math.max(0, Math.floor((Date.now() - live.lastOkMs) / 1000));
    var when = new Date(live.lastOkMs).toLocaleTimeString("en-GB");
    if (live.connected) {
      setText(connectionText, live.everConnected ? "Live: updated " + formatAge(since) : "Connecting\u2026");
    } else {
      setText(connectionText, "Disconnected from the exporter: the numbers below are from " + formatAge(since) +
              " (last update " + when + "). Retrying\u2026");
    }
  }

  function setConnected(connected) {
    live.connected = connected;
    body.classList.toggle("disconnected", !connected);
    connection.classList.toggle("lost", !connected);
    table.setAttribute("data-stale", connected ? "false" : "true");
    if (!connected) { // an engine's state is not known while nobody reads its log
      Array.prototype.forEach.call(tbody.querySelectorAll(".badge"), function (badge) {
        badge.className = "badge state-unknown";
        setText(badge, "unknown");
      });
    }
    tickConnection();
  }

  function onStatus(status) {
    var wasDown = !live.connected;
    live.lastOkMs = Date.now();
    live.everConnected = true;
    updateKeyed(status);
    updateSources(status);
    updateNotice(status);
    updateTable(status);
    setConnected(true);
    var lines = 0;
    Object.keys(status.engines || {}).forEach(function (label) { lines += status.engines[label].stats_lines || 0; });
    // The history holds a line before the status counts it (both are updated under one lock).
    if (wasDown || lines !== history.statsLines || Date.now() - history.fetchedMs > HISTORY_AT_LEAST_EVERY_MS) {
      fetchHistory(false, lines);
    }
  }

  // -- fetching ------------------------------------------------------------------------------------

  function fetchJSON(url) {
    var controller = typeof AbortController === "function" ? new AbortController() : null;
    var timer = setTimeout(function () { if (controller) controller.abort(); }, TIMEOUT_MS);
    return fetch(url, { cache: "no-store", signal: controller ? controller.signal : undefined })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.json();
      })
      .then(function (data) { clearTimeout(timer); return data; },
            function (error) { clearTimeout(timer); throw error; });
  }

  function pollStatus() {
    fetchJSON("api/v1/status")
      .then(onStatus, function () { setConnected(false); })
      .then(function () { setTimeout(pollStatus, STATUS_EVERY_MS); });
  }

  // -- the history and its charts ------------------------------------------------------------------

  function fetchHistory(full, lines) {
    if (history.busy) return; // the next status poll asks again: statsLines is set on success only
    history.busy = true;
    var since = !full && history.lastTime !== null ? "?since=" + (history.lastTime - HISTORY_OVERLAP_S) : "";
    fetchJSON("api/v1/history" + since).then(function (data) {
      history.busy = false;
      history.fetchedMs = Date.now();
      if (data.instance !== history.instance) {
        var wasIncremental = since !== "";
        resetCharts();
        history.instance = data.instance;
        if (wasIncremental) { fetchHistory(true, lines); return; } // a restarted exporter: fetch it all
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

  function makePlot(label, spec, held, figure) {
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
            return splits.map(function (v) { return formatNumber(v, v % 1 ? 1 : 0); });
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
    CHARTS.forEach(function (spec) { plots[spec.key] = makePlot(label, spec, history.engines[label], figures[spec.key]); });
    charts[label] = { section: section, plots: plots, figures: figures };
    return charts[label];
  }

  function draw() {
    if (typeof window.uPlot !== "function") return;
    var labels = Object.keys(history.engines).filter(function (label) { return history.engines[label].time.length; });
    chartList.classList.toggle("empty", labels.length === 0);
    if (!labels.length) chartList.setAttribute("aria-busy", "false");
    labels.forEach(function (label) {
      var held = history.engines[label];
      var set = chartsFor(label);
      CHARTS.forEach(function (spec) {
        var plot = set.plots[spec.key];
        var wantsMM = spec.key === "cache" && hasValues(held.mm_cache_hit_rate_pct) &&
          plot.logwatchFields.indexOf("mm_cache_hit_rate_pct") < 0;
        if (wantsMM) { // the first MM line: rebuild with its series
          plot.destroy();
          set.plots[spec.key] = makePlot(label, spec, held, set.figures[spec.key]);
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

  // For tests and the curious: how many points each chart draws now.
  window.logwatch = {
    points: function () {
      var out = {};
      Object.keys(charts).forEach(function (label) {
        out[label] = {};
        CHARTS.forEach(function (spec) { out[label][spec.key] = charts[label].plots[spec.key].data[0].length; });
      });
      return out;
    },
    spans: function () { // per engine and chart: the seconds its time axis spans
      var out = {};
      Object.keys(charts).forEach(function (label) {
        out[label] = {};
        CHARTS.forEach(function (spec) {
          var x = charts[label].plots[spec.key].scales.x;
          out[label][spec.key] = x.max - x.min;
        });
      });
      return out;
    },
    breaks: function () { // per engine and chart: the gap rows uPlot draws (nulls) and its spanGaps
      var out = {};
      Object.keys(charts).forEach(function (label) {
        out[label] = {};
        CHARTS.forEach(function (spec) {
          var plot = charts[label].plots[spec.key];
          out[label][spec.key] = {
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
  setInterval(function () { tickAges(); tickConnection(); }, 1000);
  pollStatus();
})();
