// Copy buttons (the members page's new agent key and MCP configuration): a button marked
// data-copy-target="ID" copies the value of the field ID. Without the clipboard (plain http), the
// field's text is selected so Ctrl+C (⌘C) copies it. No inline script: the pages' CSP allows only
// this origin's files.
(() => {
  "use strict";

  function say(text) {
    const status = document.querySelector("[data-copy-status]");
    if (status) status.textContent = text;
  }

  document.addEventListener("click", async (event) => {
    const button = event.target instanceof Element ? event.target.closest("[data-copy-target]") : null;
    if (!button) return;
    const field = document.getElementById(button.getAttribute("data-copy-target"));
    if (!field) return;
    try {
      if (!navigator.clipboard) throw new Error("no clipboard");
      await navigator.clipboard.writeText(field.value);
      say("Copied.");
    } catch (error) {
      field.focus();
      field.select();
      say("Selected: copy it with Ctrl+C (⌘C).");
    }
  });
})();
