// Log boxes (pre.tail with an id) open at their end and follow new lines, as a terminal does;
// a person who scrolls up stays where they are, with a "Jump to latest" button, and following
// resumes once they are back at the end. The boxes are replaced whole when the page reads the
// logs again (htmx swaps), so what each one does is kept here by its id (issue 28: the job
// page's box showed the oldest lines and jumped back to the top on every refresh).
(function () {
  "use strict";
  const NEAR_END_PX = 8;
  const held = new Map();  // box id -> scrollTop, for the boxes a person scrolled up in
  window.logFollow = held;

  function atEnd(box) {
    return box.scrollHeight - box.scrollTop - box.clientHeight <= NEAR_END_PX;
  }

  function jumpButton(box) {
    let button = box.nextElementSibling;
    if (!button || !button.classList.contains("jump-latest")) {
      button = document.createElement("button");
      button.type = "button";
      button.className = "jump-latest secondary";
      button.textContent = "Jump to latest ↓";
      button.dataset.box = box.id;
      box.after(button);
    }
    return button;
  }

  function place(box) {
    if (held.has(box.id)) {
      box.scrollTop = held.get(box.id);
      jumpButton(box).hidden = atEnd(box);
    } else {
      box.scrollTop = box.scrollHeight;
      const button = box.nextElementSibling;
      if (button && button.classList.contains("jump-latest")) button.hidden = true;
    }
  }

  function placeAll() {
    document.querySelectorAll("pre.tail[id]").forEach(place);
  }

  // scroll does not bubble: listen while it goes down to the box.
  document.addEventListener("scroll", function (e) {
    const box = e.target;
    if (!(box instanceof HTMLElement) || !box.matches("pre.tail[id]")) return;
    if (atEnd(box)) held.delete(box.id);
    else held.set(box.id, box.scrollTop);
    jumpButton(box).hidden = atEnd(box);
  }, true);

  document.addEventListener("click", function (e) {
    const button = e.target;
    if (!(button instanceof HTMLElement) || !button.classList.contains("jump-latest")) return;
    held.delete(button.dataset.box);
    const box = document.getElementById(button.dataset.box);
    if (box) place(box);
  });

  document.addEventListener("htmx:afterSwap", placeAll);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", placeAll);
  else placeAll();
})();
