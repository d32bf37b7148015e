/* Ballet's chat page: the transcript over REST, live frames over the WebSocket, Markdown as DOM.
 *
 * Safety: model text reaches the page only through text nodes (createTextNode, textContent)
 * and attribute setters on elements this file creates, and through markdown.js, which builds
 * the same way; nothing here parses HTML. Links are limited to http(s), mailto and relative
 * URLs. The page's Content-Security-Policy forbids inline scripts and styles besides.
 *
 * Reconnection: when the socket drops, the page reloads the transcript over REST and opens a
 * new socket; the server then sends `state` and, while a turn runs, that turn's frames so far,
 * which replace what the transcript showed of the turn. Frames carry an increasing `n`; a
 * frame already applied on this connection is ignored.
 */
(() => {
  "use strict";

  const root = document.getElementById("chat");
  if (!root) return;

  // ------------------------------------------------------------------ small DOM helpers

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  // ------------------------------------------------------------------ Markdown (markdown.js)

  const { renderMarkdown, safeUrl, streamCut, cutsAreExact } = window.BalletMarkdown;

  // ------------------------------------------------------------------ the page

  const config = {
    sessionId: root.dataset.session,
    project: root.dataset.project,
    apiUrl: root.dataset.apiUrl,
    wsPath: root.dataset.wsPath,
    loginUrl: root.dataset.loginUrl,
    user: root.dataset.user,
    canChat: root.dataset.canChat === "true",
    canSend: root.dataset.canSend === "true", // the session's owner: sends, stops
    // The tools whose calls this viewer approves: an ordinary chat's owner all; in a question's
    // sub-chat the project's members entitled to (never the agent that asked).
    approves: new Set((root.dataset.approves || "").split(" ").filter(Boolean)),
    questionChat: Boolean(root.dataset.question), // a question's sub-chat: members answer its questions
    // Apply / Reject on the changeset cards: holders of changeset.apply (four eyes: the server refuses).
    canApply: root.dataset.canApply === "true",
    changesetsApi: root.dataset.changesetsApi || "",
    csrf: root.dataset.csrf || "",
  };
  const log = document.getElementById("chat-log");
  const statePill = document.getElementById("chat-state");
  const connection = document.getElementById("chat-connection");
  const toasts = document.getElementById("chat-toasts");
  const titleNode = document.getElementById("chat-title");
  const form = document.getElementById("composer");
  const input = document.getElementById("composer-input");
  const sendButton = document.getElementById("send-button");
  const stopButton = document.getElementById("stop-button");

  // References (DEMO-12, changeset #7, knowledge #12) become links once the server confirms them
  // (refs.js); an answer links them all over the log.
  const refs = window.BalletRefs
    ? window.BalletRefs.create({ url: root.dataset.refsUrl, onResolved: () => refs.link(log, { collect: false }) })
    : null;

  function linkRefs(node, options) {
    if (refs) refs.link(node, options);
    return node;
  }

  // The planner's knowledge writes and a compaction's drafts as cards (chat_knowledge.js).
  const KNOWLEDGE_WRITES = new Set(["create_knowledge", "update_knowledge"]);
  const knowledge = window.BalletKnowledge.create({
    el,
    renderMarkdown,
    linkRefs,
    safeUrl,
    csrf: config.csrf,
    draftsUrl: `${config.apiUrl.replace(/\/+$/, "")}/drafts/`,
    canDecide: () => config.canSend, // the session's owner: drafts are theirs alone
    toast: (text) => toast(text),
  });

  function knowledgeCard(change, seq) {
    const card = knowledge.writtenCard(change, seq);
    if (card && !log.querySelector(`.knowledge-card[data-artifact="${card.dataset.artifact}"]`)) append(card);
  }

  function compactionNotice(seq) {
    return notice("Earlier conversation summarized", "compacted", seq);
  }

  const ACTIVITY = {
    idle: "Idle",
    thinking: "Thinking…",
    writing: "Writing…",
    tools: "Running tools…",
    stopping: "Stopping…",
    paused: "Paused — send a message to continue",
    waiting: "Waiting for an answer",
    failed: "Failed",
  };
  const RUNNING = new Set(["thinking", "writing", "tools", "stopping"]);
  const PLACEHOLDER = {
    running: "Add to the running turn (the planner reads it at its next step)",
    paused: "Send a message to continue",
    idle: "Message the planner",
  };
  const FATAL_CLOSES = {
    4401: "You are signed out.",
    4403: "You can read this chat but not write in it (you need the planner.chat permission).",
    4404: "This chat does not exist, or you no longer have access to it.",
  };

  const view = {
    knowledgeCards: {}, // the transcript's cards of knowledge writes, by tool_use_id
    activity: "idle",
    renderedSeq: 0, // the highest message seq the log shows
    bubble: null, // the assistant bubble being streamed
    text: "", // its raw Markdown so far
    kept: 0, // the length of view.text rendered for good (up to a cut) while it streams
    tail: [], // the nodes rendered from the rest, replaced at each render
    renderPending: false,
    nextRender: 0, // performance.now() before which the stream is not rendered again
    lastSent: null,
    retracting: null, // the queued message a retract frame asked to take back, until the server answers
    loaded: false,
    requests: new Map(), // request id -> the request as last known (its status, who resolved it)
    subchats: new Map(), // request id -> a sub-chat the planner started (start_subchat), as last known
    answering: null, // the answer_question call in flight: its id and answer, for the question's banner
  };
  const socket = {
    ws: null,
    generation: 0,
    attempts: 0,
    timer: null,
    closed: false, // for good: signed out, no access
    applied: new Set(), // frame numbers applied on this connection, since the last turn ended
    awaitingReplay: false,
    sawTurnStart: false, // this connection saw the running turn from its start
    resynced: false,
    sendOnOpen: false, // a message was sent before the socket was open: send the box once it is
    answersOnOpen: new Map(), // request id → an answer given before the socket was open
  };

  // ---------------------------------------------------------------- scrolling and notices

  function nearBottom() {
    const page = document.documentElement;
    return window.innerHeight + window.scrollY >= page.scrollHeight - 160;
  }

  function changing(mutate) {
    const follow = nearBottom();
    const result = mutate();
    if (follow) window.scrollTo(0, document.documentElement.scrollHeight);
    return result;
  }

  function clearPlaceholder() {
    for (const node of log.querySelectorAll(".chat-placeholder")) node.remove();
  }

  /** A new entry goes at the end of the log, above the messages still queued for the planner:
   * those stay last until the planner reads them. */
  function append(node) {
    clearPlaceholder();
    const queued = node.classList.contains("queued") ? null : log.querySelector(":scope > .entry.queued");
    changing(() => (queued ? log.insertBefore(node, queued) : log.append(node)));
    return node;
  }

  function toast(message, { persistent = false, action = null } = {}) {
    const note = el("div", persistent ? "toast persistent" : "toast", message);
    if (action) {
      const a = el("a", null, action.label);
      a.href = action.href;
      note.append(" ", a);
    }
    toasts.append(note);
    while (toasts.children.length > 3) toasts.firstElementChild.remove();
    if (!persistent) setTimeout(() => note.remove(), 6000);
  }

  function notice(text, kind, seq) {
    const line = el("p", `notice-line ${kind}`, text);
    if (seq !== undefined) line.dataset.seq = String(seq);
    return append(line);
  }

  // ---------------------------------------------------------------- state indicator

  function setActivity(name) {
    view.activity = name;
    statePill.textContent = ACTIVITY[name];
    statePill.className = `state-pill state-${name}`;
    log.setAttribute("aria-busy", name === "writing" ? "true" : "false");
    refreshControls();
    refreshRedo();
  }

  function setConnection(text, kind) {
    connection.textContent = text;
    connection.className = `connection ${kind}`;
    refreshControls();
  }

  function connected() {
    return socket.ws !== null && socket.ws.readyState === WebSocket.OPEN;
  }

  function refreshControls() {
    if (!form) return;
    const running = RUNNING.has(view.activity);
    form.classList.toggle("turn-running", running); // on phones one button: Send, or Stop while a turn runs
    stopButton.disabled = !(running && view.activity !== "stopping" && connected());
    sendButton.disabled = socket.closed;
    input.disabled = socket.closed;
    const mode = running ? "running" : view.activity === "paused" ? "paused" : "idle";
    input.placeholder = waitingPlaceholder() || PLACEHOLDER[mode];
  }

  function setTitle(title) {
    if (!title) return;
    titleNode.textContent = title;
    document.title = `${title} · ${config.project} · Ballet`;
  }

  // ---------------------------------------------------------------- log entries

  /** A human's message; `at` (ISO 8601) when it was sent: the client's clock when a frame has none. */
  function userEntry({ text, author, kind, seq, at }) {
    const entry = el("div", `entry user kind-${kind || "human"}${kind === "queued" ? " queued" : ""}`);
    if (seq) entry.dataset.seq = String(seq);
    entry.append(linkRefs(el("div", "bubble", text)));
    const labels = [];
    if (kind === "question") labels.push(askedBy(author));
    else if (author && author !== config.user) labels.push(author);
    if (kind === "continue") labels.push("continued the turn");
    if (kind === "steer") labels.push("sent while the planner worked");
    const meta = el("p", "meta");
    const when = kind === "queued" ? null : timeNode(at || new Date().toISOString()); // queued: not sent yet
    if (when) meta.append(when);
    if (labels.length) meta.append(`${when ? " · " : ""}${labels.join(" · ")}`);
    if (meta.firstChild) entry.append(meta);
    return append(entry);
  }

  /** Who asked the question a sub-chat opened with, and about what: "Question from builder about DEMO-4". */
  function askedBy(author) {
    const item = root.dataset.questionItem || "";
    return `Question from ${author || "an agent"}${item ? ` about ${item}` : ""}`;
  }

  /**
   * An assistant's message, its time and, once its text is whole, copy buttons. A streamed one
   * (`streaming`) starts empty and is finished by endStream.
   */
  function assistantEntry(text, seq, at, { streaming = false } = {}) {
    const entry = el("div", "entry assistant");
    if (seq) entry.dataset.seq = String(seq);
    const bubble = el("div", "bubble md");
    const foot = el("p", "meta entry-foot");
    const when = timeNode(at || new Date().toISOString());
    if (when) foot.append(when);
    entry.append(bubble, foot);
    if (!streaming) {
      const started = performance.now();
      bubble.append(linkRefs(renderMarkdown(text)));
      finishAssistant(entry, text);
      performance.measure("ballet:render-message", { start: started }); // the browser tests read these
    }
    return append(entry);
  }

  function pretty(value) {
    if (typeof value === "string") {
      try {
        return JSON.stringify(JSON.parse(value), null, 2);
      } catch {
        return value;
      }
    }
    return JSON.stringify(value === undefined ? null : value, null, 2);
  }

  function toolFold({ id, name, input: args, seq, label }) {
    const fold = el("details", "tool pending");
    fold.dataset.toolId = id;
    if (seq) fold.dataset.seq = String(seq);
    const summary = el("summary");
    summary.append(el("span", "tool-label"), el("span", "tool-status"));
    const body = el("div", "tool-body");
    const called = el("p", "tool-called");
    called.append("Tool ", el("code", "tool-name", name));
    body.append(called, el("p", "tool-section", "Input"), scroller(linkRefs(el("pre", "json tool-input", pretty(args ?? {})))));
    fold.append(summary, body);
    setFoldLabel(fold, label, name);
    return append(fold);
  }

  /** ``node``, which may scroll, reachable from the keyboard so that it can be scrolled without a mouse. */
  function scroller(node, label) {
    node.tabIndex = 0;
    if (label) {
      node.setAttribute("role", "group");
      node.setAttribute("aria-label", label);
    }
    return node;
  }

  function findFold(id) {
    return Array.from(log.querySelectorAll("details.tool")).find((fold) => fold.dataset.toolId === id) || null;
  }

  function setToolOutput(fold, output, isError, label) {
    const body = fold.querySelector(".tool-body");
    for (const old of body.querySelectorAll(".tool-output, .tool-section.output")) old.remove();
    body.append(el("p", "tool-section output", isError ? "Error" : "Output"), scroller(linkRefs(el("pre", "json tool-output", pretty(output)))));
    fold.classList.remove("pending", "waiting");
    fold.classList.toggle("failed", Boolean(isError));
    fold.classList.toggle("done", !isError);
    setFoldLabel(fold, label);
    fold.querySelector(".tool-status").textContent = "";
  }

  // A fold says in words what the call does or did ("Looked up runnable tickets"): the server's
  // `label` (docs/protocol.md, "Tool calls in words"); the tool's name only from a server without one.

  function setFoldLabel(fold, label, name) {
    const node = fold.querySelector(".tool-label");
    if (typeof label === "string" && label) node.textContent = label;
    else if (!node.textContent) node.textContent = name || fold.querySelector(".tool-name").textContent;
  }

  const CHANGESET_STATUS = {
    proposed: "proposed",
    applied: "applied",
    rejected: "rejected",
    conflicted: "conflicts with the plan",
  };
  const DECISIONS = { applied: "Applied", rejected: "Rejected", conflicted: "Apply failed" };

  function findChangesetCard(number) {
    const key = `changeset:${number}`;
    return Array.from(log.querySelectorAll(".changeset-card")).find((card) => card.dataset.artifact === key) || null;
  }

  function changesetCard({ number, title, operations, status, reviewUrl, seq }) {
    if (!Number.isInteger(number) || findChangesetCard(number)) return null;
    const card = el("article", "changeset-card");
    card.dataset.artifact = `changeset:${number}`;
    if (seq) card.dataset.seq = String(seq);
    card.append(el("p", "card-kicker", "Proposed changeset"));
    card.append(linkRefs(el("h3", "card-title", `#${number}${title ? ` · ${title}` : ""}`)));
    card.append(el("p", "card-meta"));
    if (typeof operations === "number") card.dataset.operations = String(operations);
    const decision = el("p", "card-decision");
    decision.setAttribute("role", "status");
    card.append(decision);
    if (config.canApply && config.changesetsApi) card.append(decisionControls(card, number));
    const url = safeUrl(reviewUrl || "");
    if (url) {
      const review = el("a", "card-action", "Review changeset");
      review.href = url;
      review.rel = "noopener noreferrer nofollow";
      review.target = "_blank";
      card.append(review);
    }
    setChangesetStatus(card, { status: status || "proposed" });
    return append(card);
  }

  /** The card's status as it stands: a decision says who made it, and their note or the conflict. */
  function setChangesetStatus(card, { status, decided_by: decidedBy, note, reason }) {
    const known = Object.hasOwn(CHANGESET_STATUS, status) ? status : "proposed";
    for (const name of Object.keys(CHANGESET_STATUS)) card.classList.toggle(`status-${name}`, name === known);
    const facts = [];
    const operations = Number(card.dataset.operations);
    if (card.dataset.operations) facts.push(`${operations} operation${operations === 1 ? "" : "s"}`);
    facts.push(CHANGESET_STATUS[known]);
    card.querySelector(".card-meta").textContent = facts.join(" · ");
    const decision = card.querySelector(".card-decision");
    decision.replaceChildren();
    if (known === "proposed") return;
    const controls = card.querySelector(".changeset-decide");
    if (controls) controls.remove(); // decided: here, in another tab, on the review page, over REST
    decision.append(el("span", "decision-line", `${DECISIONS[known]}${decidedBy ? ` by ${decidedBy}` : ""}`));
    const why = known === "conflicted" ? reason : note;
    if (typeof why === "string" && why.trim()) {
      decision.append(linkRefs(el("span", "decision-note", `${known === "conflicted" ? "Why" : "Note"}: ${why}`)));
    }
    const review = card.querySelector(".card-action");
    if (review) review.textContent = "Open changeset";
  }

  // Apply / Reject in place, through the REST API (docs/protocol.md, "References and decisions"): the
  // server checks changeset.apply and four eyes, and says why when it refuses; the decision then
  // reaches every open tab as a `changeset` frame.

  const DECIDING = { apply: "Applying…", reject: "Rejecting…" };

  function decisionControls(card, number) {
    const box = el("div", "changeset-decide");
    const noteId = `changeset-${number}-note`;
    const fold = el("details", "changeset-note");
    const label = el("label", null, "Note kept with your decision");
    label.htmlFor = noteId;
    const note = el("textarea");
    note.id = noteId;
    note.rows = 2;
    note.maxLength = 5000;
    fold.append(el("summary", null, "Add a note"), label, note);
    const actions = el("div", "request-actions");
    for (const [action, text, className] of [["apply", "Apply", "approve"], ["reject", "Reject", "secondary decline"]]) {
      const button = el("button", className, text);
      button.type = "button";
      button.dataset.action = action;
      button.setAttribute("aria-label", `${text} changeset #${number}`);
      button.addEventListener("click", () => decide(card, number, action));
      actions.append(button);
    }
    const problem = el("p", "field-error changeset-error");
    problem.setAttribute("role", "alert");
    const sending = el("p", "visually-hidden changeset-sending");
    sending.setAttribute("role", "status");
    box.append(actions, fold, problem, sending);
    return box;
  }

  async function decide(card, number, action) {
    const box = card.querySelector(".changeset-decide");
    if (!box || box.classList.contains("busy")) return;
    const note = box.querySelector("textarea").value;
    const controls = box.querySelectorAll("button, textarea");
    box.classList.add("busy");
    for (const control of controls) control.disabled = true;
    box.querySelector(".changeset-error").textContent = "";
    box.querySelector(".changeset-sending").textContent = DECIDING[action];
    const outcome = await decisionRequest(number, action, note.trim() ? { note } : {});
    box.classList.remove("busy");
    box.querySelector(".changeset-sending").textContent = "";
    if (outcome.changeset) changesetStatus(decidedState(outcome.changeset));
    if (!box.isConnected) return; // decided: the card shows by whom
    for (const control of controls) control.disabled = false;
    box.querySelector(".changeset-error").textContent = outcome.problem || "";
  }

  /** POST apply or reject: {changeset} as it stands after, and {problem} in words if refused. */
  async function decisionRequest(number, action, body) {
    let response;
    try {
      response = await fetch(`${config.changesetsApi}${number}/${action}/`, {
        method: "POST",
        credentials: "same-origin",
        headers: { Accept: "application/json", "Content-Type": "application/json", "X-CSRFToken": config.csrf },
        body: JSON.stringify(body),
      });
    } catch {
      return { problem: "The server cannot be reached; check the connection and try again." };
    }
    let data = null;
    try {
      data = await response.json();
    } catch {
      data = null;
    }
    if (response.ok) return { changeset: data };
    const error = data && data.error ? data.error : {};
    const fields = error.fields && typeof error.fields === "object" ? Object.values(error.fields).flat().join(" ") : "";
    const message = typeof error.message === "string" && error.message ? error.message : "";
    const fallback = response.status === 403 || response.status === 401
      ? "You may not decide on this changeset (you need changeset.apply), or you are signed out."
      : `The server could not do it (HTTP ${response.status}); try again.`;
    return { changeset: response.status === 409 ? error.current : null, problem: [message, fields].filter(Boolean).join(" ") || fallback };
  }

  /** A changeset as the REST API describes it, as the `changeset` frame says it. */
  function decidedState(changeset) {
    if (!changeset || typeof changeset !== "object") return null;
    return {
      number: changeset.number,
      status: changeset.status,
      decided_by: changeset.decided_by || "",
      note: changeset.decision_note || "",
      reason: changeset.conflict_reason || "",
    };
  }

  /** A changeset the session proposed, as it stands now (a `changeset` frame, or the transcript). */
  function changesetStatus(state) {
    if (!state || !Number.isInteger(state.number)) return;
    const card = findChangesetCard(state.number);
    if (card) changing(() => setChangesetStatus(card, state));
  }

  /** Others changed the workspace and the planner was told: what changed in a line (the server's
   * `summary`, its keys linked), what the planner read in a fold. */
  function changesNote(text, seq, summary) {
    const note = el("div", "changes-note");
    note.dataset.seq = String(seq);
    const line = el("p", "changes-summary");
    line.append(el("span", "changes-kicker", "Workspace changes: "), typeof summary === "string" && summary ? summary : "others changed the plan");
    const told = el("details", "changes-told");
    told.append(el("summary", null, "What the planner was told"), linkRefs(el("pre", null, text)));
    note.append(linkRefs(line), told);
    return append(note);
  }

  function turnEndNotice(reason, error, seq) {
    if (reason === "stopped") notice("Stopped", "stopped", seq);
    if (reason === "max_rounds") notice("Paused after the most tool rounds a turn may take — send a message to continue", "paused", seq);
    if (reason === "failed") notice(error ? `The turn failed: ${error}` : "The turn failed", "failed", seq);
  }

  // ---------------------------------------------------------------- message time and copy

  const copySources = new WeakMap(); // an assistant entry -> its raw Markdown
  const copyTimers = new WeakMap(); // a copy button -> the timer that puts its label back
  const copyStatus = el("p", "visually-hidden");
  copyStatus.setAttribute("role", "status");
  root.append(copyStatus);
  const MINUTE = 60 * 1000;

  /** A <time>: relative ("5 min ago"), the exact local date and time on hover; null if `iso` is no time. */
  function timeNode(iso) {
    const date = new Date(iso);
    if (Number.isNaN(date.getTime())) return null;
    const node = el("time", "when", relativeTime(date, new Date()));
    node.dateTime = date.toISOString();
    node.title = date.toLocaleString(undefined, {
      weekday: "long", year: "numeric", month: "long", day: "numeric",
      hour: "2-digit", minute: "2-digit", second: "2-digit",
    });
    return node;
  }

  function clock(date) {
    return date.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
  }

  /** "just now", "5 min ago", "14:02" (today), "yesterday 14:02", "3 Nov", "3 Nov 2025". */
  function relativeTime(date, now) {
    const ago = now - date;
    if (ago < MINUTE) return "just now"; // a clock a little ahead of the server's too
    if (ago < 60 * MINUTE) return `${Math.floor(ago / MINUTE)} min ago`;
    const day = (d) => new Date(d.getFullYear(), d.getMonth(), d.getDate()).getTime();
    const days = Math.round((day(now) - day(date)) / (24 * 60 * MINUTE));
    if (days === 0) return clock(date);
    if (days === 1) return `yesterday ${clock(date)}`;
    const options = { day: "numeric", month: "short" };
    if (date.getFullYear() !== now.getFullYear()) options.year = "numeric";
    return date.toLocaleDateString(undefined, options);
  }

  function refreshTimes() {
    const now = new Date();
    for (const node of log.querySelectorAll("time.when")) {
      const text = relativeTime(new Date(node.dateTime), now);
      if (node.textContent !== text) node.textContent = text;
    }
  }

  /** An assistant entry whose text is whole: its code blocks and itself get copy buttons. */
  function finishAssistant(entry, text) {
    copySources.set(entry, text);
    decorateCode(entry.querySelector(".bubble"));
    const foot = entry.querySelector(".entry-foot");
    if (foot && !foot.querySelector(".copy-message")) foot.append(" ", copyButton("copy-message", "Copy message"));
  }

  function copyButton(className, label) {
    const button = el("button", `copy-button ${className}`, "Copy");
    button.type = "button";
    button.setAttribute("aria-label", label);
    return button;
  }

  /** Each code block gets a head: its language and a button copying its code, exactly. */
  function decorateCode(container) {
    for (const pre of container.querySelectorAll("pre.md-code")) {
      if (pre.parentElement.classList.contains("code-block")) continue;
      const lang = pre.firstElementChild ? pre.firstElementChild.dataset.lang || "" : "";
      const block = el("div", "code-block");
      const head = el("div", "code-head");
      head.append(el("span", "code-lang", lang || "code"), copyButton("copy-code", lang ? `Copy ${lang} code` : "Copy code"));
      pre.replaceWith(block);
      block.append(head, pre);
    }
  }

  async function copyClicked(button) {
    const code = button.classList.contains("copy-code");
    const text = code
      ? button.closest(".code-block").querySelector("pre").textContent
      : copySources.get(button.closest(".entry"));
    if (typeof text !== "string") return;
    try {
      if (!navigator.clipboard) throw new Error("no clipboard here (the page is not https)");
      await navigator.clipboard.writeText(text);
      copyFeedback(button, "Copied", code ? "Code copied" : "Message copied");
    } catch {
      copyFeedback(button, "Not copied", "");
      toast("The browser refused the clipboard: select the text and copy it with Ctrl+C (⌘C).");
    }
  }

  function copyFeedback(button, label, announce) {
    button.textContent = label;
    button.classList.toggle("copied", label === "Copied");
    copyStatus.textContent = announce;
    clearTimeout(copyTimers.get(button));
    copyTimers.set(button, setTimeout(() => {
      button.textContent = "Copy";
      button.classList.remove("copied");
    }, 2000));
  }

  log.addEventListener("click", (event) => {
    const button = event.target.closest(".copy-button");
    if (button && log.contains(button)) copyClicked(button);
  });
  setInterval(refreshTimes, MINUTE);
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") refreshTimes();
  });

  // ---------------------------------------------------------------- questions and approvals

  const OUTCOMES = {
    answered: "Answered",
    approved: "Approved",
    declined: "Declined",
    cancelled: "Cancelled",
  };

  function pendingRequests() {
    return Array.from(view.requests.values()).filter((request) => request.status === "pending");
  }

  /** Whether this viewer may answer ``request``: a question its owner, or any member of a question's
   * sub-chat; an approval those the server names (``data-approves``). */
  function mayAnswer(request) {
    if (request.kind === "approval") return config.approves.has(request.tool);
    if (config.canSend) return true;
    return config.questionChat && config.canChat;
  }

  /** What the composer's placeholder says while requests wait: a message answers or declines them. */
  function waitingPlaceholder() {
    const pending = pendingRequests();
    if (!pending.length) return null;
    const questions = pending.some((request) => request.kind === "question");
    const approvals = pending.some((request) => request.kind === "approval");
    if (questions && approvals) return "A message answers the planner's questions and declines its pending approvals (the message is the reason)";
    if (questions) return "A message answers the planner's question";
    return "A message declines the pending approval (the message is the reason)";
  }

  /** Whether the chat waits for this reader, which its entry in the recent chats follows
   * (chat_nav.js): a pending request they may answer, or a question left to the humans. */
  function announceWaiting() {
    const status = document.getElementById("question-status");
    const waits = Boolean(status && status.classList.contains("question-needs_human")) || pendingRequests().some(mayAnswer);
    document.dispatchEvent(new CustomEvent("ballet:chat-waiting", { detail: { waits } }));
  }

  /** While the turn waits on requests the state says so; once none waits, a plain pause. */
  function refreshWaiting() {
    announceWaiting();
    if (view.activity !== "paused" && view.activity !== "waiting") {
      refreshControls();
      return;
    }
    const pending = pendingRequests();
    if (!pending.length) {
      setActivity("paused");
      return;
    }
    setActivity("waiting");
    const approvals = pending.every((request) => request.kind === "approval");
    statePill.textContent = approvals ? "Waiting for approval" : ACTIVITY.waiting;
  }

  function findCard(id) {
    return Array.from(log.querySelectorAll(".request-card")).find((card) => card.dataset.request === id) || null;
  }

  /** A card per request: placed after the tool call that asked (from the transcript), or last (live). */
  function showRequest(request) {
    if (request && typeof request.id === "string" && request.kind === "subchat") {
      showSubchat(request);
      return;
    }
    if (!request || typeof request.id !== "string" || (request.kind !== "question" && request.kind !== "approval")) return;
    const known = view.requests.get(request.id);
    const status = request.status || "pending";
    // A replayed `request` frame of a request resolved since keeps what is known of it.
    const replayed = known && known.status !== "pending" && status === "pending";
    const merged = replayed ? known : { ...(known || {}), ...request, status };
    view.requests.set(request.id, merged);
    const old = findCard(request.id);
    if (old && (replayed || (status === "pending" && old.classList.contains("pending")))) {
      refreshWaiting(); // the card stands as it is, with whatever its reader was typing
      return;
    }
    const card = requestCard(merged);
    const fold = merged.tool_use_id ? findFold(merged.tool_use_id) : null;
    if (old) {
      old.replaceWith(card);
    } else if (fold) {
      if (fold.dataset.seq) card.dataset.seq = fold.dataset.seq;
      clearPlaceholder();
      changing(() => fold.after(card));
    } else {
      append(card);
    }
    foldWaits(merged);
    refreshWaiting();
  }

  // The fold of a call that waits for a human (ask_human, an approval) says so until it is settled,
  // then how it was settled until its result comes; the request names its call (`tool_use_id`).

  function foldWaits(request) {
    const fold = typeof request.tool_use_id === "string" ? findFold(request.tool_use_id) : null;
    if (!fold || !(fold.classList.contains("pending") || fold.classList.contains("waiting"))) return;
    const pending = request.status === "pending";
    fold.classList.toggle("waiting", pending);
    fold.classList.toggle("pending", !pending);
    fold.querySelector(".tool-status").textContent = pending ? waitingWords(request) : OUTCOMES[request.status] || "";
  }

  function waitingWords(request) {
    if (request.kind === "approval") return "Waiting for approval";
    return mayAnswer(request) ? "Waiting for your answer" : "Waiting for an answer";
  }

  function resolveRequest(frame) {
    const started = view.subchats.get(frame.id);
    if (started) {
      showSubchat({ ...started, status: frame.outcome, answer: frame.answer });
      return;
    }
    const known = view.requests.get(frame.id);
    if (!known) return;
    const resolved = { ...known, status: frame.outcome, by: frame.by, answer: frame.answer ?? frame.reason ?? known.answer };
    view.requests.set(frame.id, resolved);
    const card = findCard(frame.id);
    if (card) changing(() => card.replaceWith(requestCard(resolved)));
    foldWaits(resolved);
    const outcome = frame.outcome;
    if (!pendingRequests().length && outcome !== "cancelled" && (view.activity === "waiting" || view.activity === "paused")) {
      setActivity("thinking"); // the turn resumes with the last answer
      announceWaiting();
    } else {
      refreshWaiting();
    }
  }

  // A sub-chat the planner started (start_subchat, docs/domain.md#sub-chats): a line after its
  // call's fold that links to the sub-chat and says whether it runs or how it ended.

  const SUBCHAT_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

  function showSubchat(request) {
    const input = request.input && typeof request.input === "object" ? request.input : {};
    const session = typeof request.session === "string" ? request.session : input.session;
    if (typeof session !== "string" || !SUBCHAT_ID.test(session)) return;
    const named = [request.title, input.title, request.brief, input.brief].find((text) => typeof text === "string" && text.trim());
    const merged = { ...request, session, title: named ? named.trim().slice(0, 120) : "A sub-chat", status: request.status || "pending" };
    view.subchats.set(request.id, merged);
    const line = el("p", `subchat-line ${merged.status === "pending" ? "pending" : "ended"}`);
    line.dataset.subchat = request.id;
    const link = el("a", "subchat-link", merged.title);
    link.href = `/projects/${encodeURIComponent(config.project)}/chat/${session}/`;
    line.append(el("span", "card-kicker", "Sub-chat "), link, el("span", "subchat-status", ` — ${subchatWords(merged)}`));
    const old = Array.from(log.querySelectorAll(".subchat-line")).find((node) => node.dataset.subchat === request.id);
    const fold = typeof merged.tool_use_id === "string" ? findFold(merged.tool_use_id) : null;
    if (old) {
      changing(() => old.replaceWith(line));
    } else if (fold) {
      if (fold.dataset.seq) line.dataset.seq = fold.dataset.seq;
      clearPlaceholder();
      changing(() => fold.after(line));
    } else {
      append(line);
    }
  }

  function subchatWords(request) {
    if (request.status === "pending") return "working";
    if (request.status === "cancelled") return "stopped";
    let outcome = "";
    try {
      outcome = JSON.parse(request.answer || "{}").outcome || "";
    } catch {
      outcome = "";
    }
    return outcome && outcome !== "completed" ? `ended (${outcome})` : "answered";
  }

  function requestCard(request) {
    const pending = request.status === "pending";
    const card = el("section", `request-card ${request.kind} ${pending ? "pending" : `resolved outcome-${request.status}`}`);
    card.dataset.request = request.id;
    const headingId = `request-${request.id}-title`;
    card.setAttribute("aria-labelledby", headingId);
    if (request.kind === "question") questionBody(card, request, headingId);
    else approvalBody(card, request, headingId);
    if (!pending) card.append(outcomeLine(request));
    else if (!mayAnswer(request)) card.append(el("p", "request-note", waitingFor(request)));
    card.append(el("p", "request-sending visually-hidden"));
    card.querySelector(".request-sending").setAttribute("role", "status");
    return linkRefs(card);
  }

  function waitingFor(request) {
    if (request.kind === "approval" && config.questionChat) {
      return "Waiting for a member of the project who may approve it to approve or decline.";
    }
    if (request.kind === "approval") return "Waiting for the chat's owner to approve or decline.";
    return "Waiting for an answer from the chat's owner.";
  }

  function questionBody(card, request, headingId) {
    const kicker = config.questionChat ? "The planner asks the project's members" : "The planner asks";
    card.append(el("p", "card-kicker", kicker));
    const question = el("div", "request-question md");
    question.id = headingId;
    question.append(renderMarkdown(request.question || ""));
    card.append(question);
    if (request.status !== "pending" || !mayAnswer(request)) {
      const options = Array.isArray(request.options) ? request.options.filter((o) => typeof o === "string") : [];
      if (options.length && request.status === "pending") card.append(el("p", "request-options-list", `Options: ${options.join(" · ")}`));
      return;
    }
    const options = Array.isArray(request.options) ? request.options.filter((o) => typeof o === "string" && o) : [];
    if (options.length) {
      const group = el("div", "request-options");
      group.setAttribute("role", "group");
      group.setAttribute("aria-label", "Answer with an option");
      for (const option of options) {
        const button = el("button", "option", option);
        button.type = "button";
        button.addEventListener("click", () => answerRequest(card, request, { text: option }));
        group.append(button);
      }
      card.append(group);
    }
    card.append(replyForm(card, request, {
      label: options.length ? "Or answer in your own words" : "Your answer",
      button: "Send answer",
      required: true,
      submit: (text) => ({ text }),
    }));
  }

  function approvalBody(card, request, headingId) {
    // A knowledge write waits as a draft: published or discarded (docs/domain.md#knowledge-cards).
    const writes = KNOWLEDGE_WRITES.has(request.tool);
    const pending = request.status === "pending";
    const kicker = writes ? (pending ? "Knowledge draft — publish or discard" : "Knowledge draft") : pending ? "Approval needed" : "Approval";
    card.append(el("p", "card-kicker", kicker));
    const title = el("h3", "card-title");
    title.id = headingId;
    if (writes) title.append("The planner wants to write to the knowledge base");
    else title.append("The planner wants to run ", el("code", "tool-name", request.tool || "a tool"));
    card.append(title);
    const preview = previewNode(request);
    if (request.status === "pending") {
      card.append(preview);
    } else {
      const fold = el("details", "request-fold");
      fold.append(el("summary", null, "What it asked to run"), preview);
      card.append(fold);
    }
    if (request.status !== "pending" || !mayAnswer(request)) return;
    const actions = el("div", "request-actions");
    const approve = el("button", "approve", writes ? "Publish" : "Approve");
    approve.type = "button";
    approve.addEventListener("click", () => answerRequest(card, request, { approve: true }));
    actions.append(approve);
    card.append(actions);
    card.append(replyForm(card, request, {
      label: writes ? "Why discard it (optional, the planner reads it)" : "Reason for declining (optional)",
      button: writes ? "Discard" : "Decline",
      required: false,
      submit: (reason) => (reason.trim() ? { approve: false, reason } : { approve: false }),
    }));
  }

  function replyForm(card, request, { label, button, required, submit }) {
    const form = el("form", "request-reply");
    const id = `request-${request.id}-${required ? "answer" : "reason"}`;
    const labelNode = el("label", null, label);
    labelNode.htmlFor = id;
    const box = el("textarea");
    box.id = id;
    box.rows = required ? 2 : 1;
    box.maxLength = 32000;
    const send = el("button", required ? null : "secondary decline", button);
    send.type = "submit";
    const row = el("div", "request-reply-row");
    row.append(box, send);
    form.append(labelNode, row);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (required && !box.value.trim()) {
        box.focus();
        return;
      }
      answerRequest(card, request, submit(box.value));
    });
    box.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.altKey && !event.isComposing) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
    return form;
  }

  function answerRequest(card, request, body) {
    if (card.classList.contains("sending")) return;
    if (!connected()) {
      // It goes once the chat is live: at once when the page has just opened (its socket still
      // connecting), or when a lost connection is back; unless the request was settled meanwhile.
      socket.answersOnOpen.set(request.id, body);
      cardSending(card, "Sends as soon as the chat is live…", { shown: true });
      reconnectNow();
      return;
    }
    sendAnswer(card, request.id, body);
  }

  function sendAnswer(card, id, body) {
    socket.ws.send(JSON.stringify({ type: "answer", request: id, ...body }));
    cardSending(card, "Sending…");
  }

  /** A card whose answer is on its way, ``note`` saying how (shown to all while it waits for the
   * socket), or with null, its controls back. */
  function cardSending(card, note, { shown = false } = {}) {
    const sending = note !== null;
    card.classList.toggle("sending", sending);
    for (const control of card.querySelectorAll("button, textarea")) control.disabled = sending;
    const status = card.querySelector(".request-sending");
    status.textContent = note || "";
    status.classList.toggle("visually-hidden", !shown);
  }

  /** The answers given while the socket was not open, now that it is. */
  function sendKeptAnswers() {
    for (const [id, body] of socket.answersOnOpen) {
      const card = findCard(id);
      const request = view.requests.get(id);
      if (!card || !request || request.status !== "pending") continue; // settled meanwhile: its card says how
      sendAnswer(card, id, body);
    }
    socket.answersOnOpen.clear();
  }

  /** An answer the server refused: the card's controls come back (the error frame says why). */
  function answerRefused() {
    for (const card of log.querySelectorAll(".request-card.sending")) cardSending(card, null);
  }

  const DRAFT_OUTCOMES = { approved: "Published", declined: "Discarded" };

  function outcomeLine(request) {
    const box = el("div", "request-outcome");
    const who = request.by ? ` by ${request.by}` : "";
    const words = (KNOWLEDGE_WRITES.has(request.tool) && DRAFT_OUTCOMES[request.status]) || OUTCOMES[request.status];
    box.append(el("p", "request-outcome-line", `${words || request.status}${who}`));
    if (request.answer) {
      const answer = el("p", "request-answer", request.answer);
      if (request.status === "declined") answer.prepend(el("span", "request-answer-label", "Reason: "));
      box.append(answer);
    }
    return box;
  }

  // An approval's input, as the server's preview rows describe it (planner/domain/services/previews.py); plain JSON else.

  function previewNode(request) {
    const box = el("div", "request-preview");
    const rows = Array.isArray(request.preview) ? request.preview.filter((row) => row && typeof row === "object") : [];
    let fields = null;
    for (const row of rows) {
      if (row.kind === "operation") {
        fields = null;
        box.append(operationNode(row));
      } else if (row.kind === "knowledge") {
        fields = null;
        box.append(knowledge.previewRow(row));
      } else {
        if (!fields) fields = box.appendChild(el("dl", "preview-fields"));
        fields.append(el("dt", null, row.label ?? ""), el("dd", "value", row.value ?? ""));
      }
    }
    if (!rows.length) box.append(scroller(el("pre", "json", pretty(request.input ?? {}))));
    else {
      const raw = el("details", "preview-raw");
      raw.append(el("summary", null, "Input as JSON"), scroller(el("pre", "json", pretty(request.input ?? {}))));
      box.append(raw);
    }
    return box;
  }

  function operationNode(row) {
    const op = el("div", "preview-op");
    op.dataset.op = String(row.op || "unknown");
    const number = Number.isInteger(row.index) ? `${row.index + 1}. ` : "";
    op.append(el("h4", null, `${number}${row.label || "Operation"}${row.subject ? `: ${row.subject}` : ""}`));
    if (row.warning) op.append(el("p", "op-warning", row.warning));
    const fields = Array.isArray(row.fields) ? row.fields : [];
    if (row.op === "update" || row.op === "create") {
      const table = el("table", "preview-table");
      const body = el("tbody");
      for (const field of fields) {
        const tr = el("tr");
        const name = el("th", null, field.label ?? field.name ?? "");
        name.scope = "row";
        tr.append(name);
        if (row.op === "update") {
          tr.append(el("td", field.changed ? "value before" : "value before unchanged", field.current ?? ""), el("td", "arrow", "→"));
        }
        tr.append(el("td", "value after", `${field.proposed ?? ""}${row.op === "update" && !field.changed ? " (unchanged)" : ""}`));
        body.append(tr);
      }
      table.append(body);
      const wrap = scroller(el("div", "table-wrap"), `${number}${row.label || "Operation"}: fields`);
      wrap.append(table);
      op.append(wrap);
    } else if (row.op === "add_dependency" || row.op === "remove_dependency") {
      const added = row.op === "add_dependency";
      const sentence = added ? `${row.blocked} will wait for ${row.blocker}` : `${row.blocked} will no longer wait for ${row.blocker}`;
      op.append(el("p", "dependency", sentence));
    } else {
      op.append(scroller(el("pre", "json", row.raw || "")));
    }
    const errors = Array.isArray(row.errors) ? row.errors : [];
    if (errors.length) {
      const list = el("ul", "op-errors");
      for (const error of errors) list.append(el("li", null, error));
      op.append(list);
    }
    return op;
  }

  /** Who answered an agent's question, readably: ``planner:SESSION`` is this chat's planner; a
   * human's name with ``via`` set, the planner's words of that human's reply. */
  function answererName(by, via) {
    if (typeof by !== "string" || !by) return "";
    if (by.startsWith("planner:")) return " by the planner";
    const name = by.replace(/^user:/, "");
    return via ? ` by the planner, from ${name}'s reply` : ` by ${name}`;
  }

  function questionStatus(question) {
    const node = document.getElementById("question-status");
    if (!node || !question) return;
    const labels = { open: "Open", needs_human: "Needs a human", answered: "Answered", withdrawn: "Withdrawn" };
    node.textContent = labels[question.status] || String(question.status || "");
    node.className = `badge question-${question.status}`;
    announceWaiting();
    const answer = document.getElementById("question-answer");
    if (answer && question.answer) {
      answer.hidden = false;
      const label = `Answer${answererName(question.answered_by, question.answered_via)}: `;
      answer.replaceChildren(el("span", "request-answer-label", label), question.answer);
    }
  }

  // ---------------------------------------------------------------- context and spend

  const usageBox = document.getElementById("chat-usage");
  const NUMBER = new Intl.NumberFormat("en-US");
  const PERCENT = new Intl.NumberFormat("en-US", { style: "percent", maximumFractionDigits: 0 });

  function dollars(cost, unpriced) {
    const text = cost > 0 && cost < 0.01 ? "< $0.01" : `≈ $${cost.toFixed(2)}`;
    return `${text}${unpriced ? " + unpriced models" : ""}`;
  }

  /** "12,400 tokens (9,800 cached)": every token, cached input included, the cached said apart — as
   * the usage chart and the budget count them (planner/web/usage_chart.py ``tokens_text``). */
  function tokenFigure(spend) {
    const tokens = `${NUMBER.format(Number(spend.tokens) || 0)} tokens`;
    const cached = Number(spend.cached_tokens) || 0;
    return cached > 0 ? `${tokens} (${NUMBER.format(cached)} cached)` : tokens;
  }

  function chatTokens(spend) {
    return typeof spend.tokens === "number" ? `${tokenFigure(spend)}, ` : "";
  }

  /** The session's context against its compaction threshold, the chat's cost, and the project's day. */
  function showUsage(usage) {
    if (!usageBox || !usage || typeof usage !== "object" || !usage.today || !usage.session) return;
    const fraction = Math.max(0, Number(usage.context_fraction) || 0);
    const meter = document.getElementById("context-meter");
    meter.value = Math.min(1, fraction);
    document.getElementById("context-figure").textContent =
      `${NUMBER.format(usage.context_tokens)} of ${NUMBER.format(usage.compact_at_tokens)} tokens ` +
      `(${PERCENT.format(fraction)}) before the planner summarizes`;
    const today = usage.today;
    const parts = [tokenFigure(today), dollars(Number(today.estimated_cost) || 0, today.unpriced)];
    parts.push(`this chat ${chatTokens(usage.session)}${dollars(Number(usage.session.estimated_cost) || 0, usage.session.unpriced)}`);
    const budget = document.getElementById("budget-meter");
    if (typeof today.budget === "number") {
      budget.hidden = false;
      budget.value = Math.min(1, Number(today.fraction_used) || 0);
      parts.push(`${PERCENT.format(Number(today.fraction_used) || 0)} of the ${NUMBER.format(today.budget)}-token daily budget`);
    } else {
      budget.hidden = true;
    }
    document.getElementById("spend-figure").textContent = parts.join(" · ");
    usageBox.hidden = false;
  }

  let usageTimer = null;

  /** Read the figures again once model calls were metered (a turn's end, a pause, a compaction);
   * frames close together make one request. */
  function refreshUsage() {
    if (!usageBox || usageTimer !== null) return;
    usageTimer = setTimeout(async () => {
      usageTimer = null;
      try {
        const response = await fetch(`${config.apiUrl.replace(/\/?$/, "")}/usage/`, {
          credentials: "same-origin",
          headers: { Accept: "application/json" },
          cache: "no-store",
        });
        if (response.ok) showUsage(await response.json());
      } catch {
        // The figures wait for the next turn; the conversation is what matters.
      }
    }, 300);
  }

  // ---------------------------------------------------------------- streaming text

  function streamText(delta) {
    if (!view.bubble) {
      const entry = assistantEntry("", null, null, { streaming: true });
      view.bubble = entry.querySelector(".bubble");
      view.bubble.classList.add("streaming");
      view.text = "";
      view.kept = 0;
      view.tail = [];
      performance.clearMeasures("ballet:render-stream");
    }
    view.text += delta;
    if (!view.renderPending) {
      view.renderPending = true;
      const wait = view.nextRender - performance.now();
      if (wait > 0) setTimeout(() => requestAnimationFrame(renderStream), wait);
      else requestAnimationFrame(renderStream);
    }
  }

  /**
   * The reply so far: the text up to the last cut (markdown.js's streamCut) is rendered once
   * and kept, the rest again at each render, its closed code blocks highlighted (from a cache)
   * and the one still being written plain. The next render waits three times as long as this
   * one took: however long the tail grows, the page keeps most of its time.
   */
  function renderStream() {
    view.renderPending = false;
    if (!view.bubble) return;
    const started = performance.now();
    const cut = streamCut(view.text, view.kept);
    changing(() => {
      for (const node of view.tail) node.remove();
      if (cut > view.kept) view.bubble.append(linkRefs(renderMarkdown(view.text.slice(view.kept, cut))));
      view.kept = cut;
      // The tail may still be written ("DEMO-1" of "DEMO-12"): linked from what is known, asked at the end.
      const tail = linkRefs(renderMarkdown(view.text.slice(cut), { streaming: true }), { collect: false });
      view.tail = Array.from(tail.childNodes);
      view.bubble.append(tail);
    });
    const now = performance.now();
    view.nextRender = now + 3 * (now - started);
    performance.measure("ballet:render-stream", { start: started, end: now });
  }

  /** The whole reply: its tail rendered a last time (all of it, if the cuts might differ). */
  function endStream() {
    if (!view.bubble) return;
    const bubble = view.bubble;
    const started = performance.now();
    changing(() => {
      if (!cutsAreExact(view.text)) {
        bubble.replaceChildren(linkRefs(renderMarkdown(view.text)));
      } else {
        for (const node of view.tail) node.remove();
        bubble.append(linkRefs(renderMarkdown(view.text.slice(view.kept))));
      }
      finishAssistant(bubble.closest(".entry"), view.text);
    });
    performance.measure("ballet:render-message", { start: started });
    bubble.classList.remove("streaming");
    view.bubble = null;
    view.text = "";
    view.tail = [];
  }

  function dropStream() {
    if (view.bubble) view.bubble.closest(".entry").remove();
    view.bubble = null;
    view.text = "";
    view.tail = [];
  }

  // ---------------------------------------------------------------- the transcript

  async function loadTranscript() {
    const response = await fetch(config.apiUrl, {
      credentials: "same-origin",
      headers: { Accept: "application/json" },
      cache: "no-store",
    });
    if (response.status === 401 || response.status === 403) throw new FatalError(4401);
    if (response.status === 404) throw new FatalError(4404);
    if (!response.ok) throw new Error(`transcript: HTTP ${response.status}`);
    renderTranscript(await response.json());
  }

  class FatalError extends Error {
    constructor(code) {
      super(FATAL_CLOSES[code]);
      this.code = code;
    }
  }

  function timeline(data) {
    const items = data.messages.map((message) => ({ at: Date.parse(message.created_at), message }));
    for (const event of data.events || []) {
      if (event.kind === "turn_ended") items.push({ at: Date.parse(event.created_at), event });
    }
    return items.sort((a, b) => a.at - b.at || (a.event ? 1 : 0) - (b.event ? 1 : 0));
  }

  function renderTranscript(data) {
    const follow = !view.loaded || nearBottom(); // a reconnect keeps the reader's place
    view.loaded = true;
    view.bubble = null;
    view.text = "";
    view.requests = new Map();
    if (typeof data.can_send === "boolean") config.canSend = data.can_send;
    if (data.question !== undefined) config.questionChat = Boolean(data.question);
    if (form && !config.canSend) form.hidden = true;
    log.replaceChildren();
    const calls = new Map((data.tool_calls || []).map((call) => [call.tool_use_id, call]));
    view.knowledgeCards = data.knowledge && typeof data.knowledge === "object" ? data.knowledge : {};
    let seq = 0;
    let lastEnd = null;
    for (const item of timeline(data)) {
      if (item.message) {
        seq = item.message.seq;
        renderMessage(item.message, calls);
        if (data.summary_up_to && seq === data.summary_up_to) compactionNotice(seq);
      } else {
        lastEnd = item.event.data || {};
        turnEndNotice(lastEnd.reason, lastEnd.error, seq);
      }
    }
    view.renderedSeq = seq;
    for (const request of Array.isArray(data.requests) ? data.requests : []) showRequest(request);
    for (const state of Array.isArray(data.changesets) ? data.changesets : []) changesetStatus(state);
    const compactions = log.querySelectorAll(".notice-line.compacted");
    knowledge.showDrafts(compactions[compactions.length - 1], data.drafts);
    const queued = Array.isArray(data.queued) ? data.queued.filter((text) => typeof text === "string") : [];
    for (const text of queued) queuedEntry(text);
    if (view.retracting !== null && !connected()) retractSettled(data, queued);
    questionStatus(data.about);
    for (const message of data.messages) if (message.superseded) supersede([message.seq], message.role === "assistant" ? "retried" : "edited");
    showUsage(data.usage);
    if (!log.children.length) {
      log.append(el("p", "chat-placeholder", `Ask the planner about ${config.project}: what can run next, what is blocked, or what to change.`));
    }
    setTitle(data.title);
    if (data.state === "running") setActivity("thinking");
    else if (data.state === "paused") setActivity("paused");
    else setActivity(lastEnd && lastEnd.reason === "failed" ? "failed" : "idle");
    refreshWaiting();
    if (follow) window.scrollTo(0, document.documentElement.scrollHeight);
  }

  /** The text blocks of a stored message, joined. */
  function messageText(message) {
    const blocks = Array.isArray(message.content) ? message.content : [];
    return blocks.filter((b) => b.type === "text").map((b) => b.text).join("");
  }

  function renderMessage(message, calls) {
    const blocks = Array.isArray(message.content) ? message.content : [];
    const text = messageText(message);
    if (message.kind === "changes") {
      changesNote(text, message.seq, message.summary);
    } else if (message.role === "assistant") {
      const labels = message.labels && typeof message.labels === "object" ? message.labels : {};
      for (const block of blocks) {
        if (block.type === "text" && block.text.trim()) assistantEntry(block.text, message.seq, message.created_at);
        if (block.type === "tool_use") renderToolUse(block, calls.get(block.id), message.seq, labels[block.id]);
      }
    } else if (message.kind === "tool_results") {
      for (const block of blocks) {
        if (block.type === "tool_result") renderToolResult(block, calls.get(block.tool_use_id), message.seq);
      }
    } else {
      userEntry({ text, author: message.author, kind: message.kind, seq: message.seq, at: message.created_at });
    }
  }

  function renderToolUse(block, call, seq, label) {
    const fold = toolFold({ id: block.id, name: block.name, input: block.input, seq, label });
    if (call) setToolOutput(fold, call.output, call.is_error, call.label);
  }

  function renderToolResult(block, call, seq) {
    let fold = findFold(block.tool_use_id);
    if (!fold) fold = toolFold({ id: block.tool_use_id, name: call ? call.name : "tool", input: call ? call.input : {}, seq, label: call ? call.label : "" });
    if (!call) {
      setToolOutput(fold, block.content, block.is_error);
      return;
    }
    if (KNOWLEDGE_WRITES.has(call.name) && Object.hasOwn(view.knowledgeCards, block.tool_use_id)) {
      knowledgeCard(view.knowledgeCards[block.tool_use_id], seq);
    }
    const changeset = call.output && call.output.changeset;
    if (call.name === "propose_changeset" && !call.is_error && changeset) {
      const operations = Array.isArray(call.input.operations) ? call.input.operations.length : undefined;
      changesetCard({
        number: changeset.number,
        title: call.input.title,
        operations,
        status: changeset.status,
        reviewUrl: changeset.review_url,
        seq,
      });
    }
  }

  /** The replay of a running turn replaces what the transcript showed of it (from `seq`); the
   * messages still queued stay. */
  function dropFromSeq(seq) {
    const nodes = Array.from(log.children);
    const first = nodes.findIndex((node) => Number(node.dataset.seq || 0) >= seq);
    if (first < 0) return;
    for (const node of nodes.slice(first)) if (!node.classList.contains("queued")) node.remove();
  }

  // ---------------------------------------------------------------- frames

  const HANDLERS = {
    state(frame) {
      if (frame.state === "running") {
        socket.awaitingReplay = true;
        setActivity("thinking");
        return;
      }
      setActivity(frame.state === "paused" ? "paused" : view.activity === "failed" ? "failed" : "idle");
      refreshWaiting();
      if (frame.last_seq > view.renderedSeq && !socket.resynced) {
        socket.resynced = true; // the turn ended between the transcript and the socket
        loadTranscript().catch(() => {});
      }
    },
    user_message(frame) {
      endStream();
      if (socket.awaitingReplay && frame.seq <= view.renderedSeq) dropFromSeq(frame.seq);
      if (frame.kind === "steer") {
        const queued = Array.from(log.querySelectorAll(".entry.queued")).find((node) => node.dataset.text === frame.text);
        if (queued) queued.remove();
      }
      userEntry(frame);
      view.renderedSeq = Math.max(view.renderedSeq, frame.seq);
      if (view.lastSent === frame.text) view.lastSent = null;
      if (!RUNNING.has(view.activity)) setActivity("thinking");
      if (titleNode.textContent === "New chat") setTitle(frame.text.split(/\s+/).join(" ").slice(0, 60));
    },
    turn_started() {
      socket.sawTurnStart = true;
      setActivity("thinking");
    },
    text_delta(frame) {
      streamText(frame.text);
      if (view.activity !== "stopping") setActivity("writing");
    },
    text_reset() {
      dropStream();
      if (view.activity !== "stopping") setActivity("thinking");
    },
    tool_call(frame) {
      endStream();
      toolFold(frame);
      if (frame.name === "answer_question" && frame.input) view.answering = { id: frame.id, answer: frame.input.answer };
      if (view.activity !== "stopping") setActivity("tools");
    },
    tool_result(frame) {
      endStream();
      const fold = findFold(frame.id) || toolFold({ id: frame.id, name: frame.name, input: {} });
      setToolOutput(fold, frame.output, frame.is_error, frame.label);
      if (view.answering && view.answering.id === frame.id && !frame.is_error && typeof view.answering.answer === "string") {
        const out = frame.output || {};
        questionStatus({
          status: "answered",
          answer: view.answering.answer,
          answered_by: out.answered_by || "planner:",
          answered_via: out.answered_via || "",
        });
      }
      if (view.activity !== "stopping") setActivity("thinking");
    },
    draft(frame) {
      if (frame.kind === "knowledge" && frame.snapshot) knowledgeCard(frame.snapshot);
      if (frame.kind !== "changeset" || !frame.snapshot) return;
      const snap = frame.snapshot;
      changesetCard({
        number: snap.number,
        title: snap.title,
        operations: Array.isArray(snap.operations) ? snap.operations.length : undefined,
        status: snap.status,
        reviewUrl: snap.review_url,
      });
    },
    compacted(frame) {
      endStream();
      const line = compactionNotice();
      if (Number.isInteger(frame.drafts) && frame.drafts > 0) knowledge.reload(line);
      refreshUsage();
    },
    knowledge_draft(frame) {
      knowledge.update(frame);
    },
    request(frame) {
      endStream();
      if (RUNNING.has(view.activity)) setActivity("paused"); // the turn waits on it: no turn_ended comes
      showRequest({ ...frame, status: "pending" });
      refreshUsage();
    },
    request_resolved(frame) {
      resolveRequest(frame);
    },
    changeset(frame) {
      changesetStatus(frame);
    },
    title(frame) {
      if (typeof frame.title === "string") setTitle(frame.title); // the planner named the chat
      refreshUsage(); // its call was metered
    },
    turn_ended(frame) {
      endStream();
      turnEndNotice(frame.reason, frame.error);
      const next = { completed: "idle", stopped: "idle", max_rounds: "paused", failed: "failed" };
      setActivity(next[frame.reason] || "idle");
      refreshUsage();
      socket.applied.clear();
      if (!socket.sawTurnStart) loadTranscript().catch(() => {}); // joined a turn its replay missed
      socket.sawTurnStart = false;
    },
    steer_retracted(frame) {
      retracted(frame.text);
    },
    superseded(frame) {
      supersede(frame.seqs, frame.reason);
    },
    error(frame) {
      toast(frame.message || "Something went wrong.");
      answerRefused();
      redoRefused();
      if (view.retracting !== null) {
        retractRefused(); // the message stays as it was: queued, or read already
        return;
      }
      if (input && view.lastSent && !input.value) input.value = view.lastSent;
      view.lastSent = null;
    },
  };

  function applyFrame(frame) {
    if (!frame || typeof frame.type !== "string" || !HANDLERS[frame.type]) return;
    if (typeof frame.n === "number") {
      if (socket.applied.has(frame.n)) return;
      socket.applied.add(frame.n);
    }
    if (frame.type !== "state" && frame.type !== "user_message") socket.awaitingReplay = false;
    HANDLERS[frame.type](frame);
    if (frame.type === "user_message") socket.awaitingReplay = false;
  }

  // ---------------------------------------------------------------- the socket

  function connect() {
    const generation = ++socket.generation;
    view.retracting = null; // an answer to a retract sent on the old socket never comes
    const scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(`${scheme}//${window.location.host}${config.wsPath}`);
    socket.ws = ws;
    socket.applied = new Set();
    socket.awaitingReplay = false;
    socket.sawTurnStart = false;
    socket.resynced = false;
    ws.addEventListener("open", () => {
      if (generation !== socket.generation) return;
      socket.attempts = 0;
      setConnection("Live", "live");
      sendKeptAnswers();
      if (socket.sendOnOpen && form) {
        socket.sendOnOpen = false;
        announce("");
        send(); // what the box holds now, if anything
      }
    });
    ws.addEventListener("message", (event) => {
      if (generation !== socket.generation) return;
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch {
        return;
      }
      applyFrame(frame);
    });
    ws.addEventListener("close", (event) => {
      if (generation !== socket.generation) return;
      socket.ws = null;
      closed(event.code);
    });
  }

  function closed(code) {
    if (FATAL_CLOSES[code]) {
      giveUp(code);
      return;
    }
    endStream();
    setConnection("Reconnecting…", "reconnecting");
    const delay = Math.min(15000, 500 * 2 ** socket.attempts) * (0.75 + Math.random() * 0.5);
    socket.attempts += 1;
    clearTimeout(socket.timer);
    socket.timer = setTimeout(resync, delay);
  }

  function giveUp(code) {
    socket.closed = true;
    socket.answersOnOpen.clear();
    answerRefused(); // kept answers never go: their cards take them again
    setConnection("Disconnected", "offline");
    const action = code === 4401 ? { label: "Sign in", href: config.loginUrl } : null;
    toast(FATAL_CLOSES[code], { persistent: true, action });
    if (RUNNING.has(view.activity)) setActivity("idle");
  }

  async function resync() {
    socket.timer = null;
    try {
      await loadTranscript();
    } catch (error) {
      if (error instanceof FatalError) giveUp(error.code);
      else closed(1006);
      return;
    }
    if (config.canChat) {
      connect();
    } else {
      setConnection("Read only", "offline"); // the socket is for those who may chat
    }
  }

  function reconnectNow() {
    if (socket.timer !== null && !socket.closed) {
      clearTimeout(socket.timer);
      resync();
    }
  }

  // ---------------------------------------------------------------- the composer

  function send() {
    const text = input.value;
    if (!text.trim() || socket.closed) return;
    if (!connected()) {
      // The message stays in the box and goes once the chat is live: at once when the page has
      // just opened (its socket still connecting), or when a lost connection is back.
      socket.sendOnOpen = true;
      if (socket.timer === null) {
        announce("Connecting… your message goes as soon as the chat is live.");
      } else {
        toast("Not connected; your message is kept and goes once the chat reconnects. Reconnecting…");
        reconnectNow();
      }
      return;
    }
    socket.ws.send(JSON.stringify({ type: "message", text }));
    view.lastSent = text;
    input.value = "";
    // Steering is shown when the planner takes it, at its next step; until then, as queued.
    if (RUNNING.has(view.activity)) queuedEntry(text);
  }

  function queuedEntry(text) {
    const entry = userEntry({ text, kind: "queued" });
    entry.dataset.text = text;
    const hint = config.canSend ? " · ↑ in the empty box edits it" : "";
    entry.append(el("p", "meta", `queued — the planner reads it at its next step${hint}`));
    return entry;
  }

  function stop() {
    if (!connected()) return;
    socket.ws.send(JSON.stringify({ type: "stop" }));
    setActivity("stopping");
  }

  // ↑ in the empty box takes back the last message still queued for the planner (a `retract`
  // frame); the server answers every watcher with `steer_retracted`, and this page puts the text
  // back in the box to edit, or with an error once the planner has read it.

  function lastQueued() {
    const queued = log.querySelectorAll(".entry.queued");
    return queued.length ? queued[queued.length - 1] : null;
  }

  function retract() {
    const entry = lastQueued();
    if (!entry || view.retracting !== null || !connected()) return false;
    socket.ws.send(JSON.stringify({ type: "retract" }));
    view.retracting = entry.dataset.text;
    entry.classList.add("retracting");
    announce("Taking your queued message back…");
    return true;
  }

  /** A queued message was taken back (by this page or another of its owner's): its bubble goes. */
  function retracted(text) {
    const queued = Array.from(log.querySelectorAll(".entry.queued")).filter((node) => node.dataset.text === text);
    const entry = queued.find((node) => node.classList.contains("retracting")) || queued[queued.length - 1];
    if (entry) entry.remove();
    if (view.lastSent === text) view.lastSent = null;
    if (view.retracting === null || !input) return;
    retractEnded();
    input.value = input.value ? `${text}\n${input.value}` : text;
    input.focus();
    input.setSelectionRange(input.value.length, input.value.length);
    announce("Your message is back in the box: edit it and send it again.");
  }

  /** The socket closed before the answer to a retract came; the transcript says what became of
   * the message: still queued (taken back or not, ↑ again), read by the planner (its last human
   * message), or taken back — its text goes back in the box, as the answer would have put it. */
  function retractSettled(data, queued) {
    const text = view.retracting;
    const humans = data.messages.filter((message) => message.role === "user" && ["human", "continue", "steer"].includes(message.kind));
    const last = humans.length ? humans[humans.length - 1] : null;
    if (queued.includes(text) || (last && messageText(last) === text)) {
      retractRefused();
      return;
    }
    retracted(text);
  }

  /** No retract is in flight any more: a bubble it marked that stays looks queued again. */
  function retractEnded() {
    view.retracting = null;
    for (const node of log.querySelectorAll(".entry.queued.retracting")) node.classList.remove("retracting");
  }

  function retractRefused() {
    retractEnded();
    announce("");
  }

  function announce(text) {
    const status = document.getElementById("composer-status");
    if (status) status.textContent = text;
  }

  /** Esc stops a running turn, as the Stop button does, from the composer or the page itself;
   * anywhere else (a card's reply box, a fold, a field of its own) Esc keeps its own meaning. */
  function escapeStops(event) {
    if (event.key !== "Escape" || event.defaultPrevented || event.isComposing) return false;
    if (event.shiftKey || event.altKey || event.ctrlKey || event.metaKey) return false;
    const target = event.target;
    const onPage = target === document.body || target === document.documentElement || target === document.getElementById("main");
    return (onPage || form.contains(target)) && !stopButton.disabled;
  }

  if (form) {
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      send();
    });
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.altKey && !event.isComposing) {
        event.preventDefault();
        send();
      } else if (event.key === "ArrowUp" && !input.value && !event.shiftKey && !event.altKey && !event.ctrlKey && !event.metaKey && !event.isComposing) {
        if (retract()) event.preventDefault();
      }
    });
    stopButton.addEventListener("click", stop);
    document.addEventListener("keydown", (event) => {
      if (!escapeStops(event)) return;
      event.preventDefault();
      stop();
    });
  }
  window.addEventListener("online", reconnectNow);
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") reconnectNow();
  });

  // ---------------------------------------------------------------- retry and edit
  // (docs/protocol.md#retry-and-edit) After a turn that failed or was stopped, its notice offers
  // Retry (a `retry` frame); while nothing answered the human's last message and no turn runs,
  // that message offers Edit (an `edit` frame naming its seq). The server checks again and
  // refuses with an `error` if the chat moved on meanwhile; what a retry or an edit replaced
  // comes back as a `superseded` frame (or `superseded` in the transcript): shown faded, kept.

  const SUPERSEDED = { edited: "edited — not sent to the planner", retried: "replaced by a retry — not sent to the planner" };

  /** The log's last entry, but for queued messages and the Retry line. */
  function lastShown() {
    const nodes = Array.from(log.children).filter((node) => !node.classList.contains("queued") && !node.classList.contains("retry-line"));
    return nodes.length ? nodes[nodes.length - 1] : null;
  }

  /** The human's last message, if nothing of the planner's answered it yet. */
  function unansweredMessage() {
    const nodes = Array.from(log.children).filter((node) => !node.classList.contains("queued") && !node.classList.contains("superseded"));
    for (let i = nodes.length - 1; i >= 0; i -= 1) {
      const node = nodes[i];
      if (node.matches(".entry.user[data-seq]")) return node;
      if (node.matches(".entry.assistant, details.tool, .changeset-card, .request-card")) return null;
    }
    return null;
  }

  /** Offer Retry and Edit where they apply now, and nowhere else. */
  function refreshRedo() {
    if (!form || !config.canSend) return;
    const idle = view.activity === "idle" || view.activity === "failed";
    const last = idle ? lastShown() : null;
    const retryable = last && last.matches(".notice-line.failed, .notice-line.stopped") ? last : null;
    const editable = idle ? unansweredMessage() : null;
    for (const line of log.querySelectorAll(".retry-line")) if (!retryable || line.previousElementSibling !== retryable) line.remove();
    for (const node of log.querySelectorAll(".edit-actions")) if (node.parentElement !== editable) node.remove();
    if (retryable && !(retryable.nextElementSibling && retryable.nextElementSibling.classList.contains("retry-line"))) {
      const line = el("p", "retry-line");
      line.append(retryButton());
      retryable.after(line);
    }
    if (editable && !editable.querySelector(".edit-actions, .edit-form")) editable.append(editActions(editable));
  }

  function retryButton() {
    const button = el("button", "secondary small retry-button", "Retry");
    button.type = "button";
    button.setAttribute("aria-label", "Retry the turn: the planner answers your last message again");
    button.addEventListener("click", () => {
      if (!connected()) {
        toast("Not connected yet; try again once the chat is live. Reconnecting…");
        reconnectNow();
        return;
      }
      socket.ws.send(JSON.stringify({ type: "retry" }));
      button.disabled = true;
      button.textContent = "Retrying…";
    });
    return button;
  }

  function editActions(entry) {
    const box = el("p", "edit-actions");
    const button = el("button", "secondary small edit-button", "Edit");
    button.type = "button";
    button.setAttribute("aria-label", "Edit your message and send it again");
    button.addEventListener("click", () => openEdit(entry));
    box.append(button);
    return box;
  }

  function openEdit(entry) {
    const bubble = entry.querySelector(".bubble");
    const actions = entry.querySelector(".edit-actions");
    if (actions) actions.remove();
    const editForm = el("form", "edit-form");
    const id = `edit-${entry.dataset.seq}`;
    const label = el("label", "visually-hidden", "Edit your message");
    label.htmlFor = id;
    const box = el("textarea");
    box.id = id;
    box.rows = 3;
    box.maxLength = 32000;
    box.value = bubble.textContent;
    const send = el("button", null, "Send edited");
    send.type = "submit";
    const cancel = el("button", "secondary", "Cancel");
    cancel.type = "button";
    const row = el("div", "edit-form-actions");
    row.append(cancel, send);
    editForm.append(label, box, row);
    bubble.hidden = true;
    entry.insertBefore(editForm, bubble.nextSibling);
    const close = () => {
      editForm.remove();
      bubble.hidden = false;
      refreshRedo();
      const again = entry.querySelector(".edit-button");
      if (again) again.focus();
    };
    cancel.addEventListener("click", close);
    editForm.addEventListener("submit", (event) => {
      event.preventDefault();
      sendEdit(entry, editForm, box);
    });
    box.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault();
        event.stopPropagation(); // Esc here cancels the edit, it stops nothing
        close();
      } else if (event.key === "Enter" && !event.shiftKey && !event.altKey && !event.isComposing) {
        event.preventDefault();
        editForm.requestSubmit();
      }
    });
    box.focus();
    box.setSelectionRange(box.value.length, box.value.length);
  }

  function sendEdit(entry, editForm, box) {
    if (!box.value.trim() || editForm.classList.contains("sending")) return;
    if (!connected()) {
      toast("Not connected yet; your edit is kept. Reconnecting…");
      reconnectNow();
      return;
    }
    socket.ws.send(JSON.stringify({ type: "edit", seq: Number(entry.dataset.seq), text: box.value }));
    editForm.classList.add("sending");
    for (const control of editForm.querySelectorAll("button, textarea")) control.disabled = true;
    announce("Sending your edited message…");
  }

  /** The server refused a retry or an edit (the `error` frame says why): its controls come back. */
  function redoRefused() {
    for (const button of log.querySelectorAll(".retry-button")) {
      button.disabled = false;
      button.textContent = "Retry";
    }
    for (const editForm of log.querySelectorAll(".edit-form.sending")) {
      editForm.classList.remove("sending");
      for (const control of editForm.querySelectorAll("button, textarea")) control.disabled = false;
    }
  }

  /** Messages the model is no longer sent: faded, labelled, kept. */
  function supersede(seqs, reason) {
    const gone = new Set((Array.isArray(seqs) ? seqs : []).map(Number));
    for (const node of log.querySelectorAll(".entry[data-seq]")) {
      if (!gone.has(Number(node.dataset.seq)) || node.classList.contains("superseded")) continue;
      for (const extra of node.querySelectorAll(".edit-form, .edit-actions")) extra.remove();
      const bubble = node.querySelector(".bubble");
      if (bubble) bubble.hidden = false;
      node.classList.add("superseded");
      node.append(el("p", "meta superseded-note", SUPERSEDED[reason] || SUPERSEDED.edited));
    }
    announce("");
  }

  // Exposed for tests of the renderer (markdown.js); nothing on the page calls it.
  window.BalletChat = { renderMarkdown, safeUrl };

  linkRefs(document.querySelector(".question-banner"));
  setActivity(root.dataset.state === "paused" ? "paused" : root.dataset.state === "running" ? "thinking" : "idle");
  resync();
})();
