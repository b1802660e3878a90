// atoll simulate --html: draw the charts from the embedded JSON and make the jobs tables sortable.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const palette = ["#3b7dd8", "#d9822b", "#2e8540", "#7b4fbf", "#c23030", "#1f9aa8", "#8a6d3b", "#555", "#e377c2", "#17becf"];
  const pct = (u, v) => (v == null ? "-" : (100 * v).toFixed(1) + "%");
  const axes = [{label: "t (s)"}, {values: (u, ticks) => ticks.map((v) => (100 * v).toFixed(0) + "%")}];

  function chart(box, run) {
    const c = run.charts;
    const series = [{label: "t (s)"}];
    const columns = [c.time];
    let names;
    if (box.dataset.kind === "clusters") {
      names = Object.keys(c.clusters);
      names.forEach((n, i) => { series.push({label: n, stroke: palette[i % palette.length], width: 1.5, value: pct}); columns.push(c.clusters[n]); });
    } else {
      names = Object.keys(c.queues);
      names.forEach((n, i) => {
        const color = palette[i % palette.length];
        series.push({label: n, stroke: color, width: 1.5, value: pct});
        columns.push(c.queues[n]);
        if (c.targets[n] != null) {
          series.push({label: n + " target", stroke: color, width: 1, dash: [6, 4], value: pct});
          columns.push(c.time.map(() => c.targets[n]));
        }
      });
    }
    if (!c.time.length) { box.textContent = "no samples"; return; }
    new uPlot({width: Math.max(480, Math.min(1100, box.clientWidth || 900)), height: 240, series: series,
               scales: {x: {time: false}, y: {range: [0, 1]}}, axes: axes}, columns, box);
  }

  function sortable(table) {
    const heads = table.tHead.rows[0].cells;
    Array.from(heads).forEach((th, col) => {
      th.addEventListener("click", () => {
        const asc = th.getAttribute("aria-sort") !== "ascending";
        Array.from(heads).forEach((h) => h.removeAttribute("aria-sort"));
        th.setAttribute("aria-sort", asc ? "ascending" : "descending");
        const numeric = th.dataset.type === "num";
        const body = table.tBodies[0];
        const rows = Array.from(body.rows).map((row, index) => ({row, index}));
        const key = (r) => { const cell = r.row.cells[col]; const v = cell.dataset.v !== undefined ? cell.dataset.v : cell.textContent;
          if (!numeric) return v; return v === "" ? Infinity : Number(v); };
        rows.sort((a, b) => { const x = key(a), y = key(b);
          const order = numeric ? x - y : String(x).localeCompare(String(y));
          return (asc ? order : -order) || a.index - b.index; });      // stable: ties keep their order
        rows.forEach((r) => body.appendChild(r.row));
      });
    });
  }

  let drawn = 0;
  document.querySelectorAll(".chart").forEach((box) => { chart(box, data.runs[Number(box.dataset.run)]); drawn += 1; });
  document.querySelectorAll("table.sortable").forEach(sortable);
  const status = document.getElementById("chart-status");
  status.textContent = drawn + " charts drawn.";
  document.body.dataset.charts = String(drawn);
})();
