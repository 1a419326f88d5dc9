// Figures on SpecPortal pages. A section ([data-figures]) fetches its figure JSON (precomputed
// when runs landed) when it scrolls near the viewport, so cells below the fold load on demand;
// figures are drawn with the Plotly served from the installed package. Inline figures
// (<script type="application/json" data-figure-inline>) are drawn at once. A live update
// carries each section's version: only sections whose version moved are fetched and redrawn.
(function () {
  "use strict";
  const drawnVersion = new WeakMap(); // section element -> version drawn (or being drawn)

  function plot(holder, figure) {
    const target = holder.querySelector(".plot") || holder;
    const loading = holder.querySelector(".loading");
    if (!figure) { if (loading) loading.textContent = "no data for this figure"; return; }
    if (loading) loading.remove();
    window.Plotly.react(target, figure.data, figure.layout, figure.config);
    target.dataset.drawn = "1";
  }

  async function load(section) {
    const version = section.dataset.version || "";
    if (!version || drawnVersion.get(section) === version) return;
    drawnVersion.set(section, version);
    const url = section.dataset.figures + "?v=" + encodeURIComponent(version);
    const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (!response.ok) {
      for (const p of section.querySelectorAll(".loading")) p.textContent = "figures unavailable (" + response.status + ")";
      return;
    }
    const figures = await response.json();
    for (const holder of section.querySelectorAll("[data-figure]")) plot(holder, figures[holder.dataset.figure]);
    section.dataset.drawnVersion = version;
  }

  const observer = "IntersectionObserver" in window
    ? new IntersectionObserver((entries) => {
        for (const e of entries) if (e.isIntersecting) { e.target.dataset.visible = "1"; load(e.target); }
      }, { rootMargin: "300px 0px" })
    : null;

  function watch(root) {
    for (const section of root.querySelectorAll("[data-figures]")) {
      if (observer) observer.observe(section); else load(section);
    }
    for (const script of root.querySelectorAll("script[data-figure-inline]")) {
      if (script.dataset.done) continue;
      script.dataset.done = "1";
      plot(document.getElementById(script.dataset.figureInline), JSON.parse(script.textContent));
    }
  }

  function refresh(root) {
    for (const marker of root.querySelectorAll("[data-section-version]")) {
      const section = document.getElementById(marker.dataset.sectionId);
      if (!section || section.dataset.version === marker.dataset.sectionVersion) continue;
      section.dataset.version = marker.dataset.sectionVersion;
      for (const p of section.querySelectorAll(".loading")) p.textContent = "loading…";
      if (section.dataset.visible || !observer) load(section);
    }
    for (const marker of root.querySelectorAll("[data-cell-version]")) {
      const cell = document.getElementById(marker.dataset.cellId);
      if (!cell) continue;
      const body = cell.querySelector(".cell-body");
      if (!body || body.dataset.version === marker.dataset.cellVersion) continue; // not revealed yet, or current
      window.htmx.ajax("GET", cell.dataset.cellUrl, { target: body, swap: "outerHTML" });
    }
  }

  document.addEventListener("DOMContentLoaded", () => watch(document));
  document.addEventListener("htmx:afterSettle", (e) => { watch(e.target.parentNode || document); refresh(e.target); });
  window.SpecPortalFigures = { load, watch, refresh };
})();
