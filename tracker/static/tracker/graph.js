// Zoom for the dependency graph's pictures (templates/tracker/_graph.html, docs/architecture.md#pages).
// Without this script a picture fits its box (graph.css), so this only adds: Zoom in, Zoom out and
// Fit buttons above each picture (real buttons: Enter and Space work), and "+", "-" and "0" while
// the picture's region has focus. Zoomed, the picture keeps its centre and its region scrolls; a
// picture with new tickets (a changeset's "after" graph) scrolls the first of them into view.
(() => {
  "use strict";

  const STEP = 1.5;
  const MAX_SCALE = 2; // of the picture's own size: past it nothing more is readable

  function setUp(region, n) {
    const svg = region.querySelector(":scope > svg");
    if (!svg || region.dataset.zoom) return;
    region.dataset.zoom = "fit";
    const box = svg.viewBox.baseVal;
    const natural = box && box.width ? box.width : svg.getBoundingClientRect().width;
    if (!region.id) region.id = `graph-region-${n}`;
    let factor = 1; // of the fitted width; 1 is "fit"

    const bar = document.createElement("div");
    bar.className = "graph-zoom";
    bar.setAttribute("role", "group");
    bar.setAttribute("aria-label", `Zoom: ${region.getAttribute("aria-label") || "the graph"}`);
    const make = (text, label) => {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "secondary";
      button.textContent = text;
      if (label) button.setAttribute("aria-label", label);
      button.setAttribute("aria-controls", region.id);
      bar.append(button);
      return button;
    };
    const zoomIn = make("Zoom in");
    const zoomOut = make("Zoom out");
    const fit = make("Fit");
    const level = document.createElement("span");
    level.className = "zoom-level";
    level.setAttribute("aria-live", "polite");
    bar.append(level);
    region.before(bar);

    const fitted = () => Math.min(natural, region.clientWidth || natural);
    const largest = () => Math.max(1, (natural * MAX_SCALE) / fitted());

    function apply(next, focusNew) {
      const centreX = (region.scrollLeft + region.clientWidth / 2) / Math.max(region.scrollWidth, 1);
      const centreY = (region.scrollTop + region.clientHeight / 2) / Math.max(region.scrollHeight, 1);
      factor = Math.min(Math.max(next, 1), largest());
      if (factor === 1) {
        region.classList.remove("zoomed");
        svg.style.width = "";
        region.dataset.zoom = "fit";
      } else {
        region.classList.add("zoomed");
        svg.style.width = `${Math.round(fitted() * factor)}px`;
        region.dataset.zoom = String(factor);
        const firstNew = focusNew ? svg.querySelector(".node.new") : null;
        if (firstNew) {
          firstNew.scrollIntoView({ block: "nearest", inline: "center" });
        } else {
          region.scrollLeft = centreX * region.scrollWidth - region.clientWidth / 2;
          region.scrollTop = centreY * region.scrollHeight - region.clientHeight / 2;
        }
      }
      const percent = Math.round((fitted() * factor * 100) / natural);
      level.textContent = factor === 1 ? `Fitted (${percent}%)` : `${percent}%`;
      // Never disabled: a disabled button would drop the focus of whoever just pressed it.
    }

    zoomIn.addEventListener("click", () => apply(factor * STEP, true));
    zoomOut.addEventListener("click", () => apply(factor / STEP, false));
    fit.addEventListener("click", () => apply(1, false));
    region.addEventListener("keydown", (event) => {
      if (event.altKey || event.ctrlKey || event.metaKey) return;
      const actions = {
        "+": () => apply(factor * STEP, true),
        "=": () => apply(factor * STEP, true),
        "-": () => apply(factor / STEP, false),
        "0": () => apply(1, false),
      };
      const action = actions[event.key];
      if (!action) return;
      event.preventDefault();
      action();
    });
    window.addEventListener("resize", () => apply(factor, false));
    apply(1, false);
  }

  function start() {
    document.querySelectorAll(".graph-scroll").forEach(setUp);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
