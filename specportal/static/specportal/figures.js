// Figures on SpecPortal pages: fetched as JSON when their section scrolls near the viewport
// (cells below the fold load on demand), drawn with the Plotly served from the installed package,
// and redrawn after a live update only when their section's version changed.
(function () {
  "use strict";
  const drawn = new Map(); // section URL -> version drawn

  function draw(section, bundle) {
    for (const holder of section.querySelectorAll("[data-figure]")) {
      const figure = bundle.figures[holder.dataset.figure];
      const plot = holder.querySelector(".plot");
      const loading = holder.querySelector(".loading");
      if (loading) loading.remove();
      if (!figure) { plot.textContent = "no data for this figure"; continue; }
      window.Plotly.react(plot, figure.data, figure.layout, figure.config);
      plot.dataset.drawn = "1";
    }
    section.dataset.drawnVersion = section.dataset.version || "";
  }

  async function load(section) {
    const url = section.dataset.figures;
    const version = section.dataset.version || "";
    if (drawn.get(url) === version) return;
    drawn.set(url, version);
    const response = await fetch(url + (url.includes("?") ? "&" : "?") + "v=" + encodeURIComponent(version),
                                 { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (!response.ok) {
      for (const p of section.querySelectorAll(".loading")) p.textContent = "figures unavailable (" + response.status + ")";
      return;
    }
    draw(section, await response.json());
  }

  const observer = "IntersectionObserver" in window
    ? new IntersectionObserver((entries) => {
        for (const e of entries) if (e.isIntersecting) load(e.target);
      }, { rootMargin: "400px 0px" })
    : null;

  function watch(root) {
    for (const section of root.querySelectorAll("[data-figures]")) {
      if (observer) observer.observe(section); else load(section);
    }
  }

  // A live update brings new section versions: redraw only the sections that changed and that
  // were drawn already (the others load when scrolled to).
  function refreshVersions(root) {
    for (const marker of root.querySelectorAll("[data-section-version]")) {
      const section = document.getElementById(marker.dataset.sectionId);
      if (!section || section.dataset.version === marker.dataset.sectionVersion) continue;
      section.dataset.version = marker.dataset.sectionVersion;
      if (drawn.has(section.dataset.figures)) load(section);
    }
  }

  document.addEventListener("DOMContentLoaded", () => watch(document));
  document.body && document.body.addEventListener("htmx:afterSwap", (e) => refreshVersions(e.target));
  document.addEventListener("htmx:afterSwap", (e) => refreshVersions(e.target));
  window.SpecPortalFigures = { load, watch };
})();
