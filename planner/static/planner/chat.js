/* Ballet's chat page: the transcript over REST, live frames over the WebSocket, Markdown as DOM.
 *
 * Safety: model text reaches the page only through text nodes (createTextNode, textContent)
 * and attribute setters on elements this file creates; nothing here parses HTML. Links are
 * limited to http(s), mailto and relative URLs. The page's Content-Security-Policy forbids
 * inline scripts and styles besides.
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

  // ------------------------------------------------------------------ Markdown, built as DOM

  const SAFE_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);
  const MAX_DEPTH = 8;
  const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)/;
  const HEADING = /^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$/;
  const RULE = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
  const QUOTE = /^ {0,3}> ?/;
  const LIST_ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:\s+(.*)|$)/;
  const TABLE_RULE = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;
  const ESCAPABLE = /[\\`*_{}[\]()#+\-.!|~<>"']/;
  const BARE_URL = /https?:\/\/[^\s<>"]+/y;
  const ANGLE_URL = /<((?:https?:\/\/|mailto:)[^\s<>]+)>/y;

  /** An http(s), mailto or relative URL, resolved; null for anything else (javascript:, data:...). */
  function safeUrl(raw) {
    const text = String(raw).replace(/[\u0000-\u001f\u007f]/g, "").trim();
    if (!text) return null;
    let url;
    try {
      url = new URL(text, window.location.href);
    } catch {
      return null;
    }
    return SAFE_PROTOCOLS.has(url.protocol) ? url.href : null;
  }

  function renderMarkdown(text) {
    const fragment = document.createDocumentFragment();
    renderBlocks(String(text).replace(/\r\n?/g, "\n").split("\n"), fragment, 0);
    return fragment;
  }

  function startsBlock(line) {
    return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) || LIST_ITEM.test(line);
  }

  function isTableStart(lines, i) {
    return lines[i].includes("|") && i + 1 < lines.length && lines[i + 1].includes("-") && TABLE_RULE.test(lines[i + 1]);
  }

  function renderBlocks(lines, parent, depth) {
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      if (!line.trim()) {
        i += 1;
      } else if (depth > MAX_DEPTH) {
        parent.append(el("p", null, lines.slice(i).join("\n")));
        return;
      } else if (FENCE.test(line)) {
        i = codeBlock(lines, i, parent);
      } else if (HEADING.test(line)) {
        const [, marks, content] = HEADING.exec(line);
        const heading = el(`h${Math.min(marks.length + 2, 6)}`, `md-h${marks.length}`);
        renderInline(content, heading, 0);
        parent.append(heading);
        i += 1;
      } else if (RULE.test(line)) {
        parent.append(el("hr"));
        i += 1;
      } else if (QUOTE.test(line)) {
        i = quoteBlock(lines, i, parent, depth);
      } else if (LIST_ITEM.test(line)) {
        i = listBlock(lines, i, parent, depth);
      } else if (isTableStart(lines, i)) {
        i = tableBlock(lines, i, parent);
      } else {
        i = paragraph(lines, i, parent);
      }
    }
  }

  function paragraph(lines, i, parent) {
    const body = [lines[i].trim()];
    i += 1;
    while (i < lines.length && lines[i].trim() && !startsBlock(lines[i]) && !isTableStart(lines, i)) {
      body.push(lines[i].trim());
      i += 1;
    }
    const p = el("p");
    renderInline(body.join("\n"), p, 0);
    parent.append(p);
    return i;
  }

  function codeBlock(lines, i, parent) {
    const [, marker, lang] = FENCE.exec(lines[i]);
    const closing = new RegExp(`^ {0,3}${marker[0] === "`" ? "`" : "~"}{${marker.length},}\\s*$`);
    const body = [];
    i += 1;
    while (i < lines.length && !closing.test(lines[i])) {
      body.push(lines[i]);
      i += 1;
    }
    const pre = el("pre", "md-code");
    const code = el("code", null, body.join("\n"));
    if (lang) code.dataset.lang = lang;
    pre.append(code);
    parent.append(pre);
    return i + 1; // past the closing fence (or the end, while a reply still streams)
  }

  function quoteBlock(lines, i, parent, depth) {
    const body = [];
    while (i < lines.length && QUOTE.test(lines[i])) {
      body.push(lines[i].replace(QUOTE, ""));
      i += 1;
    }
    const quote = el("blockquote");
    renderBlocks(body, quote, depth + 1);
    parent.append(quote);
    return i;
  }

  function indentOf(line) {
    return line.length - line.trimStart().length;
  }

  function listBlock(lines, i, parent, depth) {
    const first = LIST_ITEM.exec(lines[i]);
    const ordered = /\d/.test(first[2]);
    const base = first[1].length;
    const list = el(ordered ? "ol" : "ul");
    if (ordered && parseInt(first[2], 10) !== 1) list.start = parseInt(first[2], 10);
    const items = [];
    let loose = false;
    let current = null;
    while (i < lines.length) {
      const line = lines[i];
      const item = LIST_ITEM.exec(line);
      if (item && item[1].length <= base + 1) {
        if (/\d/.test(item[2]) !== ordered) break;
        current = { lines: [item[3] || ""], indent: item[1].length + item[2].length + 1 };
        items.push(current);
      } else if (!line.trim()) {
        let next = i + 1;
        while (next < lines.length && !lines[next].trim()) next += 1;
        const after = next < lines.length ? LIST_ITEM.exec(lines[next]) : null;
        const sibling = after && after[1].length <= base + 1 && /\d/.test(after[2]) === ordered;
        if (next >= lines.length || (!sibling && indentOf(lines[next]) <= base)) break;
        loose = loose || sibling;
        current.lines.push("");
      } else if (indentOf(line) > base) {
        current.lines.push(line.slice(Math.min(indentOf(line), current.indent)));
      } else if (!startsBlock(line)) {
        current.lines.push(line.trim()); // a lazy continuation of the item's paragraph
      } else {
        break;
      }
      i += 1;
    }
    for (const entry of items) {
      const li = el("li");
      renderBlocks(entry.lines, li, depth + 1);
      if (!loose) unwrapParagraphs(li);
      list.append(li);
    }
    parent.append(list);
    return i;
  }

  function unwrapParagraphs(li) {
    for (const child of Array.from(li.children)) {
      if (child.tagName === "P") child.replaceWith(...child.childNodes);
    }
  }

  function tableRow(line) {
    let text = line.trim();
    if (text.startsWith("|")) text = text.slice(1);
    if (text.endsWith("|") && !text.endsWith("\\|")) text = text.slice(0, -1);
    return text.split(/(?<!\\)\|/).map((cell) => cell.trim().replace(/\\\|/g, "|"));
  }

  function tableBlock(lines, i, parent) {
    const head = tableRow(lines[i]);
    const aligns = tableRow(lines[i + 1]).map((cell) => {
      if (cell.startsWith(":") && cell.endsWith(":")) return "align-center";
      if (cell.endsWith(":")) return "align-right";
      return "";
    });
    i += 2;
    const table = el("table");
    const headRow = el("tr");
    head.forEach((cell, col) => {
      const th = el("th", aligns[col] || null);
      th.scope = "col";
      renderInline(cell, th, 0);
      headRow.append(th);
    });
    const thead = el("thead");
    thead.append(headRow);
    const tbody = el("tbody");
    while (i < lines.length && lines[i].trim() && lines[i].includes("|")) {
      const row = el("tr");
      const cells = tableRow(lines[i]);
      head.forEach((_, col) => {
        const td = el("td", aligns[col] || null);
        renderInline(cells[col] || "", td, 0);
        row.append(td);
      });
      tbody.append(row);
      i += 1;
    }
    table.append(thead, tbody);
    const wrap = el("div", "table-wrap");
    wrap.append(table);
    parent.append(wrap);
    return i;
  }

  /** Inline Markdown of `text` appended to `parent`: code, emphasis, links, line breaks. */
  function renderInline(text, parent, depth) {
    let buffer = "";
    const flush = () => {
      if (buffer) parent.append(document.createTextNode(buffer));
      buffer = "";
    };
    let i = 0;
    while (i < text.length) {
      const c = text[i];
      if (c === "\\" && i + 1 < text.length && ESCAPABLE.test(text[i + 1])) {
        buffer += text[i + 1];
        i += 2;
        continue;
      }
      if (c === "\n") {
        flush();
        parent.append(el("br"));
        i += 1;
        continue;
      }
      const span = depth < MAX_DEPTH ? inlineSpan(text, i, depth) : null;
      if (span) {
        flush();
        parent.append(span.node);
        i = span.end;
        continue;
      }
      buffer += c;
      i += 1;
    }
    flush();
  }

  function inlineSpan(text, i, depth) {
    const c = text[i];
    if (c === "`") return codeSpan(text, i);
    if (c === "[" || (c === "!" && text[i + 1] === "[")) return linkSpan(text, c === "!" ? i + 1 : i, depth, c === "!");
    if (c === "*" || c === "_" || c === "~") return emphasis(text, i, depth);
    if (c === "<") return angleLink(text, i);
    if (c === "h" && (i === 0 || /[\s(]/.test(text[i - 1]))) return bareLink(text, i);
    return null;
  }

  function codeSpan(text, i) {
    let run = 0;
    while (text[i + run] === "`") run += 1;
    const fence = "`".repeat(run);
    let end = text.indexOf(fence, i + run);
    while (end !== -1 && text[end + run] === "`") {
      let skip = end;
      while (text[skip] === "`") skip += 1;
      end = text.indexOf(fence, skip);
    }
    if (end === -1) return { node: document.createTextNode(fence), end: i + run };
    let body = text.slice(i + run, end).replace(/\n/g, " ");
    if (body.length > 2 && body.startsWith(" ") && body.endsWith(" ")) body = body.slice(1, -1);
    return { node: el("code", null, body), end: end + run };
  }

  function closingDelimiter(text, from, delim) {
    const c = delim[0];
    let j = from;
    while ((j = text.indexOf(delim, j)) !== -1) {
      if (text[j + delim.length] === c) {
        // Part of a longer run: a single delimiter skips the run, a double one closes at its end.
        if (delim.length === 1) {
          while (text[j] === c) j += 1;
        } else {
          j += 1;
        }
        continue;
      }
      const wordAfter = c === "_" && /[\p{L}\p{N}]/u.test(text[j + delim.length] || "");
      if (!/\s/.test(text[j - 1]) && !wordAfter) return j;
      j += delim.length;
    }
    return -1;
  }

  function emphasis(text, i, depth) {
    const c = text[i];
    if (c === "~" && text[i + 1] !== "~") return null;
    if (c === "_" && i > 0 && /[\p{L}\p{N}]/u.test(text[i - 1])) return null; // snake_case stays
    const delim = text[i + 1] === c ? c + c : c;
    const start = i + delim.length;
    if (start >= text.length || /\s/.test(text[start])) return null;
    const end = closingDelimiter(text, start + (delim.length === 1 ? 1 : 0), delim);
    if (end === -1 || end <= start) return null;
    const tag = c === "~" ? "del" : delim.length === 2 ? "strong" : "em";
    const node = el(tag);
    renderInline(text.slice(start, end), node, depth + 1);
    return { node, end: end + delim.length };
  }

  function linkSpan(text, i, depth, image) {
    let nesting = 0;
    let j = i;
    for (; j < text.length; j += 1) {
      if (text[j] === "\\") {
        j += 1;
      } else if (text[j] === "[") {
        nesting += 1;
      } else if (text[j] === "]") {
        nesting -= 1;
        if (nesting === 0) break;
      }
    }
    if (j >= text.length || text[j + 1] !== "(") return null;
    let parens = 1;
    let k = j + 2;
    for (; k < text.length && parens > 0; k += 1) {
      if (text[k] === "\n") return null;
      if (text[k] === "(") parens += 1;
      if (text[k] === ")") parens -= 1;
    }
    if (parens !== 0) return null;
    const destination = text.slice(j + 2, k - 1).trim();
    const target = /^<([^>]*)>|^(\S*)/.exec(destination);
    const label = text.slice(i + 1, j);
    return { node: link(target[1] || target[2] || "", label, depth, image), end: k };
  }

  function link(href, label, depth, image) {
    const url = safeUrl(href);
    const node = url ? el("a") : el("span", "unsafe-link");
    if (url) {
      node.href = url;
      node.rel = "noopener noreferrer nofollow";
      node.target = "_blank";
    }
    if (image) {
      node.classList.add("md-image");
      node.textContent = label ? `Image: ${label}` : "Image";
    } else {
      renderInline(label, node, depth + 1);
    }
    return node;
  }

  function angleLink(text, i) {
    ANGLE_URL.lastIndex = i;
    const match = ANGLE_URL.exec(text);
    if (!match) return null;
    return { node: link(match[1], match[1].replace(/^mailto:/, ""), MAX_DEPTH, false), end: i + match[0].length };
  }

  function bareLink(text, i) {
    BARE_URL.lastIndex = i;
    const match = BARE_URL.exec(text);
    if (!match) return null;
    let url = match[0];
    while (/[.,;:!?'"*_)\]]$/.test(url)) {
      if (url.endsWith(")") && url.split("(").length > url.split(")").length - 1) break;
      url = url.slice(0, -1);
    }
    return { node: link(url, url, MAX_DEPTH, false), end: i + url.length };
  }

  // ------------------------------------------------------------------ the page

  const config = {
    sessionId: root.dataset.session,
    project: root.dataset.project,
    apiUrl: root.dataset.apiUrl,
    wsPath: root.dataset.wsPath,
    loginUrl: root.dataset.loginUrl,
    user: root.dataset.user,
    canChat: root.dataset.canChat === "true",
    canSend: root.dataset.canSend === "true", // the session's owner: sends, stops, approves
    questionChat: Boolean(root.dataset.question), // a question's sub-chat: members answer its questions
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
    activity: "idle",
    renderedSeq: 0, // the highest message seq the log shows
    bubble: null, // the assistant bubble being streamed
    text: "", // its raw Markdown so far
    renderPending: false,
    lastSent: null,
    loaded: false,
    requests: new Map(), // request id -> the request as last known (its status, who resolved it)
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

  function append(node) {
    clearPlaceholder();
    changing(() => log.append(node));
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

  function userEntry({ text, author, kind, seq }) {
    const entry = el("div", `entry user kind-${kind || "human"}`);
    if (seq) entry.dataset.seq = String(seq);
    entry.append(el("div", "bubble", text));
    const labels = [];
    if (author && author !== config.user) labels.push(author);
    if (kind === "continue") labels.push("continued the turn");
    if (kind === "steer") labels.push("sent while the planner worked");
    if (labels.length) entry.append(el("p", "meta", labels.join(" · ")));
    return append(entry);
  }

  function assistantEntry(text, seq) {
    const entry = el("div", "entry assistant");
    if (seq) entry.dataset.seq = String(seq);
    const bubble = el("div", "bubble md");
    bubble.append(renderMarkdown(text));
    entry.append(bubble);
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

  function toolFold({ id, name, input: args, seq }) {
    const fold = el("details", "tool pending");
    fold.dataset.toolId = id;
    if (seq) fold.dataset.seq = String(seq);
    const summary = el("summary");
    summary.append(el("span", "tool-kicker", "Tool"), el("code", "tool-name", name), el("span", "tool-status", "running…"));
    const body = el("div", "tool-body");
    body.append(el("p", "tool-section", "Input"), el("pre", "json tool-input", pretty(args ?? {})));
    fold.append(summary, body);
    return append(fold);
  }

  function findFold(id) {
    return Array.from(log.querySelectorAll("details.tool")).find((fold) => fold.dataset.toolId === id) || null;
  }

  function setToolOutput(fold, output, isError) {
    const body = fold.querySelector(".tool-body");
    for (const old of body.querySelectorAll(".tool-output, .tool-section.output")) old.remove();
    body.append(el("p", "tool-section output", isError ? "Error" : "Output"), el("pre", "json tool-output", pretty(output)));
    fold.classList.remove("pending");
    fold.classList.toggle("failed", Boolean(isError));
    fold.querySelector(".tool-status").textContent = isError ? "error" : "done";
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
    card.append(el("h3", "card-title", `#${number}${title ? ` · ${title}` : ""}`));
    card.append(el("p", "card-meta"));
    if (typeof operations === "number") card.dataset.operations = String(operations);
    const decision = el("p", "card-decision");
    decision.setAttribute("role", "status");
    card.append(decision);
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
    decision.append(el("span", "decision-line", `${DECISIONS[known]}${decidedBy ? ` by ${decidedBy}` : ""}`));
    const why = known === "conflicted" ? reason : note;
    if (typeof why === "string" && why.trim()) {
      decision.append(el("span", "decision-note", `${known === "conflicted" ? "Why" : "Note"}: ${why}`));
    }
    const review = card.querySelector(".card-action");
    if (review) review.textContent = "Open changeset";
  }

  /** A changeset the session proposed, as it stands now (a `changeset` frame, or the transcript). */
  function changesetStatus(state) {
    if (!state || !Number.isInteger(state.number)) return;
    const card = findChangesetCard(state.number);
    if (card) changing(() => setChangesetStatus(card, state));
  }

  function changesNote(text, seq) {
    const note = el("details", "changes-note");
    note.dataset.seq = String(seq);
    note.append(el("summary", null, "The workspace changed; the planner was told"), el("pre", null, text));
    return append(note);
  }

  function turnEndNotice(reason, error, seq) {
    if (reason === "stopped") notice("Stopped", "stopped", seq);
    if (reason === "max_rounds") notice("Paused after the most tool rounds a turn may take — send a message to continue", "paused", seq);
    if (reason === "failed") notice(error ? `The turn failed: ${error}` : "The turn failed", "failed", seq);
  }

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

  /** Whether this viewer may answer ``request``: its owner any, a member of a question's sub-chat its questions. */
  function mayAnswer(request) {
    if (config.canSend) return true;
    return request.kind === "question" && config.questionChat && config.canChat;
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

  /** While the turn waits on requests the state says so; once none waits, a plain pause. */
  function refreshWaiting() {
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
    refreshWaiting();
  }

  function resolveRequest(frame) {
    const known = view.requests.get(frame.id);
    if (!known) return;
    const resolved = { ...known, status: frame.outcome, by: frame.by, answer: frame.answer ?? frame.reason ?? known.answer };
    view.requests.set(frame.id, resolved);
    const card = findCard(frame.id);
    if (card) changing(() => card.replaceWith(requestCard(resolved)));
    const outcome = frame.outcome;
    if (!pendingRequests().length && outcome !== "cancelled" && (view.activity === "waiting" || view.activity === "paused")) {
      setActivity("thinking"); // the turn resumes with the last answer
    } else {
      refreshWaiting();
    }
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
    return card;
  }

  function waitingFor(request) {
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
    card.append(el("p", "card-kicker", request.status === "pending" ? "Approval needed" : "Approval"));
    const title = el("h3", "card-title");
    title.id = headingId;
    title.append("The planner wants to run ", el("code", "tool-name", request.tool || "a tool"));
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
    const approve = el("button", "approve", "Approve");
    approve.type = "button";
    approve.addEventListener("click", () => answerRequest(card, request, { approve: true }));
    actions.append(approve);
    card.append(actions);
    card.append(replyForm(card, request, {
      label: "Reason for declining (optional)",
      button: "Decline",
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
      toast("Not connected yet; your answer is kept. Reconnecting…");
      reconnectNow();
      return;
    }
    socket.ws.send(JSON.stringify({ type: "answer", request: request.id, ...body }));
    card.classList.add("sending");
    for (const control of card.querySelectorAll("button, textarea")) control.disabled = true;
    card.querySelector(".request-sending").textContent = "Sending…";
  }

  /** An answer the server refused: the card's controls come back (the error frame says why). */
  function answerRefused() {
    for (const card of log.querySelectorAll(".request-card.sending")) {
      card.classList.remove("sending");
      for (const control of card.querySelectorAll("button, textarea")) control.disabled = false;
      card.querySelector(".request-sending").textContent = "";
    }
  }

  function outcomeLine(request) {
    const box = el("div", "request-outcome");
    const who = request.by ? ` by ${request.by}` : "";
    box.append(el("p", "request-outcome-line", `${OUTCOMES[request.status] || request.status}${who}`));
    if (request.answer) {
      const answer = el("p", "request-answer", request.answer);
      if (request.status === "declined") answer.prepend(el("span", "request-answer-label", "Reason: "));
      box.append(answer);
    }
    return box;
  }

  // An approval's input, as the server's preview rows describe it (planner/previews.py); plain JSON else.

  function previewNode(request) {
    const box = el("div", "request-preview");
    const rows = Array.isArray(request.preview) ? request.preview.filter((row) => row && typeof row === "object") : [];
    let fields = null;
    for (const row of rows) {
      if (row.kind === "operation") {
        fields = null;
        box.append(operationNode(row));
      } else {
        if (!fields) fields = box.appendChild(el("dl", "preview-fields"));
        fields.append(el("dt", null, row.label ?? ""), el("dd", "value", row.value ?? ""));
      }
    }
    if (!rows.length) box.append(el("pre", "json", pretty(request.input ?? {})));
    else {
      const raw = el("details", "preview-raw");
      raw.append(el("summary", null, "Input as JSON"), el("pre", "json", pretty(request.input ?? {})));
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
        const name = el("th", null, field.name ?? "");
        name.scope = "row";
        tr.append(name);
        if (row.op === "update") {
          tr.append(el("td", field.changed ? "value before" : "value before unchanged", field.current ?? ""), el("td", "arrow", "→"));
        }
        tr.append(el("td", "value after", `${field.proposed ?? ""}${row.op === "update" && !field.changed ? " (unchanged)" : ""}`));
        body.append(tr);
      }
      table.append(body);
      const wrap = el("div", "table-wrap");
      wrap.append(table);
      op.append(wrap);
    } else if (row.op === "add_dependency" || row.op === "remove_dependency") {
      const added = row.op === "add_dependency";
      const sentence = added ? `${row.blocked} will wait for ${row.blocker}` : `${row.blocked} will no longer wait for ${row.blocker}`;
      op.append(el("p", "dependency", sentence));
    } else {
      op.append(el("pre", "json", row.raw || ""));
    }
    const errors = Array.isArray(row.errors) ? row.errors : [];
    if (errors.length) {
      const list = el("ul", "op-errors");
      for (const error of errors) list.append(el("li", null, error));
      op.append(list);
    }
    return op;
  }

  /** Who answered an agent's question, readably: ``planner:SESSION`` is this chat's planner. */
  function answererName(by) {
    if (typeof by !== "string" || !by) return "";
    if (by.startsWith("planner:")) return " by the planner";
    return ` by ${by.replace(/^user:/, "")}`;
  }

  function questionStatus(question) {
    const node = document.getElementById("question-status");
    if (!node || !question) return;
    const labels = { open: "Open", answered: "Answered", withdrawn: "Withdrawn" };
    node.textContent = labels[question.status] || String(question.status || "");
    node.className = `badge question-${question.status}`;
    const answer = document.getElementById("question-answer");
    if (answer && question.answer) {
      answer.hidden = false;
      answer.replaceChildren(el("span", "request-answer-label", `Answer${answererName(question.answered_by)}: `), question.answer);
    }
  }

  // ---------------------------------------------------------------- streaming text

  function streamText(delta) {
    if (!view.bubble) {
      const entry = assistantEntry("", null);
      view.bubble = entry.querySelector(".bubble");
      view.bubble.classList.add("streaming");
      view.text = "";
    }
    view.text += delta;
    if (!view.renderPending) {
      view.renderPending = true;
      requestAnimationFrame(renderStream);
    }
  }

  function renderStream() {
    view.renderPending = false;
    if (view.bubble) changing(() => view.bubble.replaceChildren(renderMarkdown(view.text)));
  }

  function endStream() {
    if (!view.bubble) return;
    renderStream();
    view.bubble.classList.remove("streaming");
    view.bubble = null;
    view.text = "";
  }

  function dropStream() {
    if (view.bubble) view.bubble.closest(".entry").remove();
    view.bubble = null;
    view.text = "";
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
    let seq = 0;
    let lastEnd = null;
    for (const item of timeline(data)) {
      if (item.message) {
        seq = item.message.seq;
        renderMessage(item.message, calls);
        if (data.summary_up_to && seq === data.summary_up_to) notice("Earlier conversation summarized", "compacted", seq);
      } else {
        lastEnd = item.event.data || {};
        turnEndNotice(lastEnd.reason, lastEnd.error, seq);
      }
    }
    view.renderedSeq = seq;
    for (const request of Array.isArray(data.requests) ? data.requests : []) showRequest(request);
    for (const state of Array.isArray(data.changesets) ? data.changesets : []) changesetStatus(state);
    questionStatus(data.about);
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

  function renderMessage(message, calls) {
    const blocks = Array.isArray(message.content) ? message.content : [];
    const text = blocks.filter((b) => b.type === "text").map((b) => b.text).join("");
    if (message.kind === "changes") {
      changesNote(text, message.seq);
    } else if (message.role === "assistant") {
      for (const block of blocks) {
        if (block.type === "text" && block.text.trim()) assistantEntry(block.text, message.seq);
        if (block.type === "tool_use") renderToolUse(block, calls.get(block.id), message.seq);
      }
    } else if (message.kind === "tool_results") {
      for (const block of blocks) {
        if (block.type === "tool_result") renderToolResult(block, calls.get(block.tool_use_id), message.seq);
      }
    } else {
      userEntry({ text, author: message.author, kind: message.kind, seq: message.seq });
    }
  }

  function renderToolUse(block, call, seq) {
    const fold = toolFold({ id: block.id, name: block.name, input: block.input, seq });
    if (call) setToolOutput(fold, call.output, call.is_error);
  }

  function renderToolResult(block, call, seq) {
    let fold = findFold(block.tool_use_id);
    if (!fold) fold = toolFold({ id: block.tool_use_id, name: call ? call.name : "tool", input: call ? call.input : {}, seq });
    if (!call) {
      setToolOutput(fold, block.content, block.is_error);
      return;
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

  /** The replay of a running turn replaces what the transcript showed of it. */
  function dropFromSeq(seq) {
    const first = Array.from(log.children).find((node) => Number(node.dataset.seq || 0) >= seq);
    if (!first) return;
    while (first.nextSibling) first.nextSibling.remove();
    first.remove();
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
      setToolOutput(fold, frame.output, frame.is_error);
      if (view.answering && view.answering.id === frame.id && !frame.is_error && typeof view.answering.answer === "string") {
        questionStatus({ status: "answered", answer: view.answering.answer, answered_by: "planner:" });
      }
      if (view.activity !== "stopping") setActivity("thinking");
    },
    draft(frame) {
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
    compacted() {
      endStream();
      notice("Earlier conversation summarized", "compacted");
    },
    request(frame) {
      endStream();
      if (RUNNING.has(view.activity)) setActivity("paused"); // the turn waits on it: no turn_ended comes
      showRequest({ ...frame, status: "pending" });
    },
    request_resolved(frame) {
      resolveRequest(frame);
    },
    changeset(frame) {
      changesetStatus(frame);
    },
    title(frame) {
      if (typeof frame.title === "string") setTitle(frame.title); // the planner named the chat
    },
    turn_ended(frame) {
      endStream();
      turnEndNotice(frame.reason, frame.error);
      const next = { completed: "idle", stopped: "idle", max_rounds: "paused", failed: "failed" };
      setActivity(next[frame.reason] || "idle");
      socket.applied.clear();
      if (!socket.sawTurnStart) loadTranscript().catch(() => {}); // joined a turn its replay missed
      socket.sawTurnStart = false;
    },
    error(frame) {
      toast(frame.message || "Something went wrong.");
      answerRefused();
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
      toast("Not connected yet; your message is kept. Reconnecting…");
      reconnectNow();
      return;
    }
    socket.ws.send(JSON.stringify({ type: "message", text }));
    view.lastSent = text;
    input.value = "";
    if (RUNNING.has(view.activity)) {
      // Steering is shown when the planner takes it, at its next step; until then, as queued.
      const entry = userEntry({ text, kind: "queued" });
      entry.classList.add("queued");
      entry.dataset.text = text;
      entry.append(el("p", "meta", "queued — the planner reads it at its next step"));
    }
  }

  function stop() {
    if (!connected()) return;
    socket.ws.send(JSON.stringify({ type: "stop" }));
    setActivity("stopping");
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
      }
    });
    stopButton.addEventListener("click", stop);
  }
  window.addEventListener("online", reconnectNow);
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") reconnectNow();
  });

  // Exposed for tests of the renderer; nothing on the page calls it.
  window.BalletChat = { renderMarkdown, safeUrl };

  setActivity(root.dataset.state === "paused" ? "paused" : root.dataset.state === "running" ? "thinking" : "idle");
  resync();
})();
