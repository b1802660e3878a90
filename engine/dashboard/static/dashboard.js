// Atoll dashboard: live updates by server-sent events. The server sends the dashboard's version when it
// changes (at most once a second); the page then re-fetches its own fragment (?fragment=1, rendered on the
// server by the same template, so every value is escaped there) and its chart data. No inline scripts:
// the Content-Security-Policy forbids them.
"use strict";
(function () {
  const status = document.getElementById("status");
  const main = document.getElementById("main");
  const page = document.body.dataset.page;
  let shown = Number(status ? status.dataset.version : 0);
  let busy = false, again = false, chart = null;

  function setStatus(text, cls) {
    const s = document.getElementById("status");
    if (s) { s.textContent = text; s.className = cls; }
  }

  function fragmentUrl() {
    const url = new URL(window.location.href);
    url.searchParams.set("fragment", "1");
    return url.toString();
  }

  function editing() {
    const el = document.activeElement;
    return el && main.contains(el) && /^(INPUT|SELECT|TEXTAREA)$/.test(el.tagName);
  }

  async function refresh(version) {
    if (busy) { again = true; return; }
    if (editing()) { setStatus("live · v" + version + " (paused while you edit the filters)", "live"); return; }
    busy = true;
    try {
      const response = await fetch(fragmentUrl(), {cache: "no-store"});
      if (response.ok) {
        const open = Array.from(main.querySelectorAll("details[open]")).map((d) => d.className);
        main.innerHTML = await response.text();
        main.querySelectorAll("details").forEach((d) => { if (open.includes(d.className)) d.open = true; });
        shown = version;
        await drawCharts();
      }
      setStatus("live · v" + version, "live");
    } catch (err) {
      setStatus("update failed: " + err, "down");
    } finally {
      busy = false;
      if (again) { again = false; refresh(version); }
    }
  }

  async function drawCharts() {
    const box = document.getElementById("share-chart");
    if (!box || typeof uPlot === "undefined") return;
    const response = await fetch(box.dataset.src, {cache: "no-store"});
    if (!response.ok) return;
    const data = await response.json();
    const history = data.history || [];
    const names = (data.queues || []).map((q) => q.name);
    if (chart) { chart.destroy(); chart = null; }
    box.textContent = "";
    if (history.length < 1) { box.textContent = "no samples yet"; return; }
    const xs = history.map((h) => h.time);
    const series = [{label: data.header.absoluteTimes ? "time" : "t (s)"}];
    const columns = [xs];
    const palette = ["#3b7dd8", "#d9822b", "#2e8540", "#7b4fbf", "#c23030", "#1f9aa8", "#8a6d3b", "#555"];
    names.forEach((name, i) => {
      series.push({label: name, stroke: palette[i % palette.length], width: 1.5,
                   value: (u, v) => v == null ? "-" : (100 * v).toFixed(1) + "%"});
      columns.push(history.map((h) => (name in h.shares ? h.shares[name] : null)));
    });
    chart = new uPlot({width: Math.max(320, box.clientWidth || 800), height: 220, series: series,
                       scales: {x: {time: !!data.header.absoluteTimes}, y: {range: [0, 1]}},
                       axes: [{}, {values: (u, ticks) => ticks.map((v) => (100 * v).toFixed(0) + "%")}]},
                      columns, box);
  }

  if (!status || !window.EventSource) return;
  setStatus("connecting", "");
  drawCharts().catch((err) => setStatus("chart failed: " + err, "down"));
  const source = new EventSource("/events?page=" + encodeURIComponent(page));
  source.addEventListener("update", (event) => {
    const version = JSON.parse(event.data).version;
    if (version !== shown) refresh(version); else setStatus("live · v" + version, "live");
  });
  source.onerror = () => setStatus("disconnected; reconnecting", "down");
})();
