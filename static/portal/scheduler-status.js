// The "scheduler has not run" banner of an open page, kept current: ask the portal every few
// seconds (portal/scheduler_status.py) and show, change or take away the banner. A failed
// request leaves the banner as it is; the next one tries again.
(function () {
  "use strict";
  const box = document.getElementById("scheduler-status");
  if (!box) return;
  const url = box.dataset.url;
  const every = Number(box.dataset.everyMs) || 10000;

  function show(message) {
    let banner = box.querySelector(".scheduler-late");
    if (!message) {
      if (banner) banner.remove();
      return;
    }
    if (!banner) {
      banner = document.createElement("p");
      banner.className = "scheduler-late";
      banner.setAttribute("role", "alert");
      box.appendChild(banner);
    }
    if (banner.textContent !== message) banner.textContent = message;
  }

  async function check() {
    try {
      const answer = await fetch(url, { headers: { Accept: "application/json" }, cache: "no-store" });
      if (answer.ok) {
        const body = await answer.json();
        show(body.late ? body.message : "");
      }
    } catch (error) {
      // the portal did not answer: keep what the page shows
    } finally {
      setTimeout(check, every);
    }
  }
  setTimeout(check, every);
})();
