// The plan's "New ticket" (tracker/web/item_actions.py item_new_page): the key c opens it and puts
// the cursor in its title. Without script the form opens by its summary and works the same.
(function () {
  "use strict";
  function typing(target) {
    if (!target || !target.tagName) return false;
    var tag = target.tagName.toLowerCase();
    return tag === "input" || tag === "textarea" || tag === "select" || target.isContentEditable;
  }
  document.addEventListener("keydown", function (event) {
    if (event.key !== "c" || event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    var box = document.getElementById("quick-create");
    var title = document.getElementById("new-ticket-title");
    if (!box || !title) return;
    event.preventDefault();
    box.open = true;
    title.focus();
  });
})();
