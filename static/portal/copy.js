// A button with data-copy="text" copies the text (the clipboard API where the page is a secure
// context, else a hidden textarea) and says "copied": SSH commands, configs, new API tokens.
document.addEventListener("click", function (e) {
  const text = e.target.dataset && e.target.dataset.copy;
  if (!text) return;
  const done = function () { e.target.textContent = "copied"; };
  if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).then(done);
  else { const t = document.createElement("textarea"); t.value = text; document.body.appendChild(t); t.select(); document.execCommand("copy"); t.remove(); done(); }
});
