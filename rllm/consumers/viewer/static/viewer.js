// rllm-cli view: draws each [data-chart] element with uPlot, on first load and after every
// htmx swap (a live run's refresh). The data comes with the page; nothing else is fetched.
(function () {
  "use strict";
  var COLOURS = { mean_reward: "#2859c5", accuracy: "#e8590c" };
  var LABELS = { mean_reward: "mean reward", accuracy: "pass rate" };

  function draw(el) {
    if (el.dataset.drawn === "1") return;
    var data = JSON.parse(el.dataset.chart);
    var xs = data.policy_version || [];
    var names = Object.keys(data).filter(function (k) { return k !== "policy_version"; });
    var series = [{ label: "policy version" }].concat(names.map(function (n) {
      return { label: LABELS[n] || n, stroke: COLOURS[n] || "#555", width: 2,
               points: { show: true, size: 7 }, spanGaps: true };
    }));
    var opts = {
      width: Math.max(320, Math.min(el.clientWidth || 800, 900)), height: 260,
      scales: { x: { time: false }, y: { range: function (u, lo, hi) { return [Math.min(0, lo), Math.max(1, hi)]; } } },
      axes: [{ label: "policy version", incrs: [1, 2, 5, 10, 20, 50, 100] }, { label: "" }],
      series: series,
    };
    new uPlot(opts, [xs].concat(names.map(function (n) { return data[n]; })), el);
    el.dataset.drawn = "1";
  }

  function drawAll(root) {
    (root.querySelectorAll ? root : document).querySelectorAll("[data-chart]").forEach(draw);
    if (root.matches && root.matches("[data-chart]")) draw(root);
  }

  document.addEventListener("DOMContentLoaded", function () {
    drawAll(document);
    if (window.htmx) window.htmx.onLoad(drawAll);
  });
})();
