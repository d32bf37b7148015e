/* The chat page's recent chats (templates/planner/_recent_chats.html): beside the conversation on
 * wide screens; narrower, folded behind the "Recent chats" button (aria-expanded), which opens
 * and closes them from the keyboard too; Esc in the open list closes it. The open chat's entry
 * follows its heading (a rename, the planner's title) and whether it waits for the reader
 * (chat.js's "ballet:chat-waiting"). */
(() => {
  "use strict";

  const sidebar = document.getElementById("chat-sidebar");
  const toggle = document.getElementById("recent-toggle");
  if (!sidebar || !toggle) return;

  function show(open) {
    toggle.setAttribute("aria-expanded", String(open));
    sidebar.classList.toggle("open", open);
  }

  const heading = document.getElementById("chat-title");
  const current = sidebar.querySelector('a[aria-current="page"] .recent-title');
  if (heading && current) {
    const follow = () => {
      const kind = current.querySelector(".session-kind");
      current.replaceChildren(...(kind ? [kind, " "] : []), heading.textContent.trim() || "Untitled chat");
    };
    new MutationObserver(follow).observe(heading, { childList: true, characterData: true, subtree: true });
  }

  const entry = current && current.closest("li");
  document.addEventListener("ballet:chat-waiting", (event) => {
    if (!entry) return;
    const waits = Boolean(event.detail && event.detail.waits);
    entry.classList.toggle("waiting", waits);
    const meta = entry.querySelector(".recent-meta");
    const badge = meta && meta.querySelector(".badge.waiting");
    if (waits && meta && !badge) {
      const added = document.createElement("span");
      added.className = "badge waiting";
      added.textContent = "waiting for you";
      meta.prepend(added, " ");
    } else if (!waits && badge) {
      badge.remove();
    }
  });

  sidebar.classList.add("foldable");
  toggle.hidden = false;
  toggle.addEventListener("click", () => show(toggle.getAttribute("aria-expanded") !== "true"));
  sidebar.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || !sidebar.classList.contains("open")) return;
    event.preventDefault();
    event.stopPropagation(); // Esc here folds the list, it stops no turn
    show(false);
    toggle.focus();
  });
})();
