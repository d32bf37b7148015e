// Every page's keyboard and live filters (templates/base.html loads it; docs/architecture.md#pages).
//
// - "/" focuses the page's search field (the first search field in <main>).
// - "j" / "k" move a visible focus down / up through the page's list rows (plan tree and board
//   rows, changesets, knowledge entries, chats, and any element marked data-row): the row's first
//   link takes the focus, so Enter opens it as any focused link does.
// - Escape in a search field leaves it (so j and k work again).
// - Filter forms (the plan's, and any form marked data-autosubmit) apply as they change: a select
//   or checkbox at once, a text field once typing pauses. The forms keep their submit buttons, so
//   they work without script; after the reload the field typed in has the focus back.
// None of it acts while the reader types in a field or holds a modifier. "c" belongs to the plan's
// quick-create. No inline script anywhere: the pages' CSP allows only this origin's files.
(() => {
  "use strict";

  const ROWS = [
    ".ticket-row",
    "table.changesets tbody tr",
    ".entry-list > li",
    ".session-list > li",
    "[data-row]",
  ].join(", ");
  const FILTER_FORMS = "form.plan-filters, form.filters, form.chat-search, form[data-autosubmit]";
  const TYPING_PAUSE = 600; // ms
  const RESTORE = "ballet:refocus";

  function typing(target) {
    if (!(target instanceof Element)) return false;
    return Boolean(target.closest("input, textarea, select, [contenteditable=''], [contenteditable='true']"));
  }

  function searchField() {
    const main = document.getElementById("main") || document.body;
    return main.querySelector("input[type='search']");
  }

  function rows() {
    return Array.from(document.querySelectorAll(ROWS)).filter(
      (row) => row.checkVisibility() && row.querySelector("a[href]"),
    );
  }

  function move(step) {
    const all = rows();
    if (!all.length) return false;
    const current = document.querySelector(".row-current");
    let index = current ? all.indexOf(current) : -1;
    if (index === -1) {
      const focused = document.activeElement;
      index = all.findIndex((row) => row.contains(focused));
    }
    const next = index === -1 ? (step > 0 ? 0 : all.length - 1) : Math.min(Math.max(index + step, 0), all.length - 1);
    if (current) current.classList.remove("row-current");
    const row = all[next];
    row.classList.add("row-current");
    const link = row.querySelector("a[href]");
    link.focus({ preventScroll: true });
    row.scrollIntoView({ block: "nearest" });
    return true;
  }

  document.addEventListener("focusout", (event) => {
    const current = document.querySelector(".row-current");
    if (current && event.relatedTarget && !current.contains(event.relatedTarget)) current.classList.remove("row-current");
  });

  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey || event.isComposing) return;
    if (event.key === "Escape" && event.target instanceof HTMLInputElement && event.target.type === "search") {
      event.target.blur();
      return;
    }
    if (typing(event.target)) return;
    if (event.key === "/") {
      const field = searchField();
      if (!field) return;
      event.preventDefault();
      field.focus();
      field.select();
    } else if (event.key === "j" || event.key === "k") {
      if (move(event.key === "j" ? 1 : -1)) event.preventDefault();
    }
  });

  // ------------------------------------------------------------------ filters as they change
  function submit(form, field) {
    if (field && field.id) {
      const caret = typeof field.selectionStart === "number" ? field.selectionStart : null;
      try {
        sessionStorage.setItem(RESTORE, JSON.stringify({ path: location.pathname, id: field.id, caret }));
      } catch (error) {
        // storage refused (private mode): the filter still applies, the focus is not restored
      }
    }
    if (typeof form.requestSubmit === "function") form.requestSubmit();
    else form.submit();
  }

  function live(form) {
    let timer = null;
    form.addEventListener("change", (event) => {
      const field = event.target;
      if (!(field instanceof HTMLSelectElement || (field instanceof HTMLInputElement && (field.type === "checkbox" || field.type === "radio")))) return;
      clearTimeout(timer);
      submit(form, field);
    });
    form.addEventListener("input", (event) => {
      const field = event.target;
      if (!(field instanceof HTMLInputElement) || !["search", "text"].includes(field.type)) return;
      clearTimeout(timer);
      timer = setTimeout(() => submit(form, field), TYPING_PAUSE);
    });
    form.addEventListener("submit", () => clearTimeout(timer));
  }

  function restore() {
    let saved = null;
    try {
      saved = JSON.parse(sessionStorage.getItem(RESTORE) || "null");
      sessionStorage.removeItem(RESTORE);
    } catch (error) {
      return;
    }
    if (!saved || saved.path !== location.pathname) return;
    const field = document.getElementById(saved.id);
    if (!field) return;
    field.focus({ preventScroll: false });
    if (typeof saved.caret === "number" && typeof field.setSelectionRange === "function") {
      try {
        field.setSelectionRange(saved.caret, saved.caret);
      } catch (error) {
        // not a text field (a select): focused is enough
      }
    }
  }

  function start() {
    // Only a GET form is a filter: a form that writes is never sent without its button.
    document.querySelectorAll(FILTER_FORMS).forEach((form) => {
      if (form.method.toLowerCase() === "get") live(form);
    });
    restore();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
