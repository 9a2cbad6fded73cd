/* REPORT.html, the start: fill every section (tables at once), hide the ones this report has nothing for (and
   their links), let the browser paint that, then evaluate plotly.js (inlined as an inert block: evaluating its
   4.6 MiB is most of the page's opening cost) and draw the charts in view, the rest as they are scrolled to.
   window.npReport says what happened: ready, errors, and timings in ms since navigation: scripts_ms (this file's
   scripts start), tables_ms (every section filled), charts_ready_ms (plotly.js evaluated), first_screen_ms (the
   charts in view drawn: ready). */
"use strict";

function loadChartLibrary() {
  if (window.Plotly) return;
  const block = document.getElementById("np-chart-library");
  window.PlotlyConfig = {MathJaxConfig: "local"};
  const script = document.createElement("script");
  script.textContent = block.textContent;
  document.head.append(script);  // runs now, synchronously
  if (!window.Plotly) throw new Error("plotly.js did not load");
}

(function start() {
  for (const section of document.querySelectorAll("section.np-section")) {
    const id = section.dataset.section;
    const render = SECTION[id];
    if (!render) continue;
    const body = section.querySelector(".np-body");
    let shown;
    try {
      shown = render(body);
    } catch (err) {
      NP.errors.push(`${id}: ${err && err.stack ? err.stack : err}`);
      body.append(note(`This section could not be drawn: ${err}`, "none"));
      shown = true;
      console.error(err);
    }
    NP.sections[id] = shown !== false;
    if (shown === false) {
      section.hidden = true;
      const link = document.querySelector(`nav [data-nav="${id}"]`);
      if (link) link.hidden = true;
    }
  }
  NP.timings.tables_ms = performance.now();
  // after the tables are painted: the chart library, then the charts in view (below the fold: when scrolled to)
  requestAnimationFrame(() => setTimeout(() => {
    try {
      loadChartLibrary();
    } catch (err) {
      NP.errors.push(`charts: ${err}`);
      console.error(err);
      for (const p of NP.plots) p.el.append(note(`chart not drawn: ${err}`, "none"));
      NP.ready = true;
      return;
    }
    NP.timings.charts_ready_ms = performance.now();
    startLazyDrawing();
    const inView = NP.plots.filter((p) => {
      const r = p.el.getBoundingClientRect();
      return r.bottom > 0 && r.top < window.innerHeight + 300 && !p.el.closest("[hidden]");
    });
    Promise.all(inView.map(drawChart)).then(() => {
      NP.timings.first_screen_ms = performance.now();
      NP.ready = true;
      document.documentElement.dataset.ready = "1";
    });
  }, 0));
})();
