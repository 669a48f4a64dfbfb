// Runs inside report.html after Chart.js (inlined UMD build): turns the chart specs that
// src/report/html/charts.ts computed into Chart.js charts, then publishes what was drawn on
// window.__memlane so that tests can check series and labels. Plain ES2017, no imports:
// the page must work opened from disk with no network.
(function () {
  "use strict";
  var specs = JSON.parse(document.getElementById("memlane-charts").textContent);
  var PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  var FIXED = { RSS: "#1f77b4", USS: "#2ca02c", PSS: "#9467bd", GPU: "#d62728", p50: "#1f77b4", p99: "#d62728", mean: "#ff7f0e", "pipelined mean": "#2ca02c" };
  var BAND_FILLS = ["rgba(31,119,180,0.07)", "rgba(255,127,14,0.09)"];
  var BAND_ROW = 14;

  function colour(name, i) { return FIXED[name] || PALETTE[i % PALETTE.length]; }

  // Draws the phase bands behind a timeline, labels in two staggered rows above the plot
  // (rotated inside the band when the band is too narrow for the text).
  var phaseBands = {
    id: "memlanePhaseBands",
    beforeDatasetsDraw: function (chart) {
      var bands = chart.options.plugins.memlanePhaseBands && chart.options.plugins.memlanePhaseBands.bands;
      if (!bands || !bands.length) return;
      var ctx = chart.ctx, area = chart.chartArea, x = chart.scales.x;
      ctx.save();
      ctx.font = "11px sans-serif";
      // Labels go in two rows at the top of the plot; one that would overlap its row's last
      // label is written vertically inside its band, or left out when even that collides
      // (the band itself is still drawn, and its name is on window.__memlane).
      var rowEnd = [-Infinity, -Infinity], lastVertical = -Infinity;
      bands.forEach(function (b, i) {
        var x0 = Math.max(area.left, x.getPixelForValue(b.start));
        var x1 = Math.min(area.right, x.getPixelForValue(b.end));
        if (x1 <= x0) return;
        ctx.fillStyle = BAND_FILLS[i % 2];
        ctx.fillRect(x0, area.top, x1 - x0, area.bottom - area.top);
        ctx.strokeStyle = "rgba(0,0,0,0.18)";
        ctx.beginPath(); ctx.moveTo(x0, area.top); ctx.lineTo(x0, area.bottom); ctx.stroke();
        var w = ctx.measureText(b.label).width, mid = (x0 + x1) / 2;
        var left = Math.max(area.left, mid - w / 2), right = left + w;
        ctx.fillStyle = "#333";
        if (w <= 1.6 * (x1 - x0) && right <= area.right) {
          for (var row = 0; row < 2; row++) {
            if (left > rowEnd[row] + 6) {
              ctx.textAlign = "left";
              ctx.fillText(b.label, left, area.top + 12 + row * BAND_ROW);
              rowEnd[row] = right;
              return;
            }
          }
        }
        if (mid - lastVertical < 13) return;
        lastVertical = mid;
        ctx.save();
        ctx.translate(mid - 4, area.top + 2 * BAND_ROW + 4);
        ctx.rotate(Math.PI / 2);
        ctx.textAlign = "left";
        ctx.fillText(b.label, 0, 0);
        ctx.restore();
      });
      ctx.restore();
    },
  };

  function axis(title, extra) {
    var a = { title: { display: true, text: title }, grid: { color: "rgba(0,0,0,0.06)" } };
    for (var k in extra) a[k] = extra[k];
    return a;
  }

  function config(spec) {
    var line = spec.type === "line";
    var datasets = spec.series.map(function (s, i) {
      var c = s.color || colour(s.name, i);
      var ds = { label: s.name, data: s.data, borderColor: c, backgroundColor: line ? c : c + "cc" };
      // A process that lived less than two sample periods has one sample: a dot, not nothing.
      if (line) { ds.pointRadius = s.data.length < 2 ? 3 : 0; ds.borderWidth = 1.5; ds.spanGaps = false; }
      if (s.points) { ds.showLine = false; ds.pointRadius = 3.5; ds.pointStyle = "rectRot"; ds.borderColor = "#333"; ds.backgroundColor = "#333"; }
      if (s.axis) ds.yAxisID = s.axis;
      if (spec.overlay) { ds.grouped = false; ds.backgroundColor = c + "99"; ds.barPercentage = 1; ds.categoryPercentage = 0.95; }
      if (spec.horizontal) { ds.grouped = false; ds.skipNull = true; ds.barPercentage = 0.7; }
      return ds;
    });
    var bands = spec.bands || [];
    var cfg = {
      type: spec.type,
      data: { labels: spec.xLinear ? undefined : spec.labels, datasets: datasets },
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        parsing: spec.xLinear ? { xAxisKey: "x", yAxisKey: "y" } : undefined,
        interaction: { mode: spec.xLinear ? "nearest" : "index", axis: "x", intersect: false },
        plugins: {
          legend: { position: "top" },
          memlanePhaseBands: { bands: bands },
          tooltip: { enabled: true },
        },
        scales: {},
      },
      plugins: [phaseBands],
    };
    if (spec.horizontal) {
      cfg.options.indexAxis = "y";
      cfg.options.scales = { x: axis(spec.xTitle, { type: "linear", min: 0 }), y: axis(spec.yTitle, {}) };
    } else if (spec.xLinear) {
      // x spans the process's own lifetime (still in seconds since the run start); the
      // grace leaves head room for the band labels inside the plot.
      cfg.options.scales = {
        x: axis(spec.xTitle, { type: "linear", min: spec.xMin, max: spec.xMax }),
        y: axis(spec.yTitle, { beginAtZero: true, grace: "22%" }),
      };
    } else {
      cfg.options.scales = { x: axis(spec.xTitle, spec.stacked ? { stacked: true } : {}), y: axis(spec.yTitle, spec.stacked ? { stacked: true } : { beginAtZero: true }) };
      if (spec.y1Title) cfg.options.scales.y1 = axis(spec.y1Title, { position: "right", beginAtZero: true, grid: { drawOnChartArea: false } });
    }
    return cfg;
  }

  var drawn = [];
  var errors = [];
  specs.forEach(function (spec) {
    var canvas = document.getElementById("chart-" + spec.id);
    try {
      var chart = new Chart(canvas, config(spec));
      drawn.push({
        id: spec.id,
        type: spec.horizontal ? "bar-horizontal" : spec.type,
        title: spec.title,
        series: chart.data.datasets.map(function (d) { return d.label; }),
        labels: spec.labels.slice(),
        points: chart.data.datasets.map(function (d) { return d.data.length; }),
        canvas: { width: canvas.width, height: canvas.height },
      });
    } catch (e) {
      errors.push(spec.id + ": " + (e && e.message));
      console.error("memlane: chart " + spec.id + " failed: " + (e && e.message));
    }
  });
  window.__memlane = { charts: drawn, errors: errors, rendered: true };
})();
