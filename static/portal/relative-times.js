// Times read as "3 min ago" / "in 2 h", with the absolute time on hover (its title): every
// <time datetime> of the page, again as time passes and whenever the page swaps a part in
// (issue 28). Without JavaScript the absolute time the server wrote stays.
(function () {
  "use strict";
  const STEPS = [[60, "s", 1], [3600, "min", 60], [86400, "h", 3600], [Infinity, "d", 86400]];

  function relative(seconds) {
    const ago = seconds >= 0;
    const span = Math.abs(seconds);
    if (span < 5) return "just now";
    for (const [below, unit, size] of STEPS) {
      if (span < below) {
        const n = Math.floor(span / size);
        return ago ? n + " " + unit + " ago" : "in " + n + " " + unit;
      }
    }
    return "";
  }

  function render(root) {
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      const when = Date.parse(el.getAttribute("datetime"));
      if (Number.isNaN(when)) return;
      if (!el.dataset.absolute) el.dataset.absolute = el.textContent;
      el.title = el.dataset.absolute;
      el.textContent = relative((Date.now() - when) / 1000);
    });
  }

  function renderAll() { render(document); }
  new MutationObserver(function (changes) {
    changes.forEach(function (change) {
      change.addedNodes.forEach(function (node) { if (node.querySelectorAll) render(node); });
    });
  }).observe(document.documentElement, { childList: true, subtree: true });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", renderAll);
  else renderAll();
  setInterval(renderAll, 30000);
  window.relativeTime = relative;
})();
