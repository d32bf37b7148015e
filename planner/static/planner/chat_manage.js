/* Rename and archive a chat from its page (its owner only), through the REST API (docs/protocol.md#the-rest-side).
 *
 * Rename edits the title in place: "Rename" opens a labelled input, Enter or Save saves, Esc or
 * Cancel puts the heading back; the server's error is shown under the input. Archive asks first,
 * then goes to the chat list. Titles reach the page as text only (textContent, value).
 * The title the planner proposes arrives as a `title` frame, handled by chat.js.
 */
(() => {
  "use strict";

  const root = document.getElementById("chat");
  const manage = document.getElementById("chat-manage");
  if (!root || !manage) return;

  const titleNode = document.getElementById("chat-title");
  const renameButton = document.getElementById("rename-button");
  const form = document.getElementById("rename-form");
  const input = document.getElementById("rename-input");
  const cancel = document.getElementById("rename-cancel");
  const renameError = document.getElementById("rename-error");
  const archiveButton = document.getElementById("archive-button");
  const confirmBox = document.getElementById("archive-confirm");
  const archiveYes = document.getElementById("archive-yes");
  const archiveNo = document.getElementById("archive-no");
  const archiveError = document.getElementById("archive-error");

  function csrfToken() {
    const field = form.querySelector("input[name=csrfmiddlewaretoken]");
    return field ? field.value : "";
  }

  function errorMessage(status, body) {
    const error = body && body.error;
    if (error && error.fields && Array.isArray(error.fields.title) && error.fields.title.length) {
      return error.fields.title.join(" ");
    }
    if (error && typeof error.message === "string" && error.message) return error.message;
    if (status === 401 || status === 403) return "You are signed out, or may no longer change this chat.";
    return `The server could not do it (HTTP ${status}); try again.`;
  }

  async function request(method, body) {
    let response;
    try {
      response = await fetch(root.dataset.apiUrl, {
        method,
        credentials: "same-origin",
        headers: { Accept: "application/json", "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch {
      throw new Error("The server cannot be reached; check the connection and try again.");
    }
    if (response.status === 204) return null;
    let data = null;
    try {
      data = await response.json();
    } catch {
      data = null;
    }
    if (!response.ok) throw new Error(errorMessage(response.status, data));
    return data;
  }

  function showTitle(title) {
    titleNode.textContent = title;
    document.title = `${title} · ${root.dataset.project} · Ballet`;
  }

  // ---------------------------------------------------------------- rename

  function openRename() {
    closeArchive();
    input.value = titleNode.textContent.trim();
    renameError.textContent = "";
    input.removeAttribute("aria-invalid");
    titleNode.hidden = true;
    manage.hidden = true;
    form.hidden = false;
    input.focus();
    input.select();
  }

  function closeRename() {
    form.hidden = true;
    titleNode.hidden = false;
    manage.hidden = false;
    renameButton.focus();
  }

  function refuse(message) {
    renameError.textContent = message;
    input.setAttribute("aria-invalid", "true");
    input.focus();
  }

  async function saveRename() {
    if (!input.value.trim()) {
      refuse("Write a title."); // the server says so too; no need to ask it
      return;
    }
    const saveButton = form.querySelector("button[type=submit]");
    saveButton.disabled = true;
    try {
      const session = await request("PATCH", { title: input.value });
      showTitle(session.title);
      closeRename();
    } catch (error) {
      refuse(error.message);
    } finally {
      saveButton.disabled = false;
    }
  }

  renameButton.addEventListener("click", openRename);
  cancel.addEventListener("click", closeRename);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    saveRename();
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.preventDefault();
      event.stopPropagation(); // Esc here cancels the rename, nothing else on the page
      closeRename();
    }
  });

  // ---------------------------------------------------------------- archive

  function openArchive() {
    archiveError.textContent = "";
    confirmBox.hidden = false;
    archiveNo.focus();
  }

  function closeArchive() {
    if (!confirmBox || confirmBox.hidden) return;
    confirmBox.hidden = true;
    if (archiveButton) archiveButton.focus();
  }

  async function archive() {
    archiveYes.disabled = true;
    try {
      await request("DELETE");
      window.location.assign(manage.dataset.listUrl);
    } catch (error) {
      archiveError.textContent = error.message;
      archiveYes.disabled = false;
    }
  }

  if (archiveButton) {
    archiveButton.addEventListener("click", openArchive);
    archiveNo.addEventListener("click", closeArchive);
    archiveYes.addEventListener("click", archive);
    confirmBox.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault();
        event.stopPropagation();
        closeArchive();
      }
    });
  }
})();
