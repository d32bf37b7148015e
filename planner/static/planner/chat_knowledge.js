/* The chat's knowledge cards (docs/domain.md#knowledge-cards, #drafts): what the planner wrote to
 * the knowledge base and its diff, a write waiting for approval, and the drafts a compaction left.
 *
 * chat.js creates it with its DOM helpers; the same safety rules hold: text only through text
 * nodes and markdown.js, links only through safeUrl.
 */
(() => {
  "use strict";

  const MARKS = { added: "+", removed: "−", same: " " };
  const SPOKEN = { added: "Added: ", removed: "Removed: " };
  const KIND_WORDS = { document: "Document", decision: "Decision", note: "Note", debt: "Debt record" };
  const DRAFT_STATUS = { pending: "Draft — only you see it", published: "Published", discarded: "Discarded" };

  function create({ el, renderMarkdown, linkRefs, safeUrl, csrf, draftsUrl, canDecide, toast }) {
    /** A diff's rows (knowledge/diffs.py) as lines: added, removed, unchanged, skipped. */
    function diffNode(rows, label) {
      const box = el("div", "kdiff");
      box.setAttribute("role", "group");
      box.setAttribute("aria-label", label || "Changes");
      for (const row of Array.isArray(rows) ? rows : []) {
        if (!row || typeof row !== "object") continue;
        const op = Object.hasOwn(MARKS, row.op) ? row.op : row.op === "skip" || row.op === "cut" ? row.op : "same";
        const line = el(op === "added" ? "ins" : op === "removed" ? "del" : "div", `kdiff-line kdiff-${op}`);
        if (op === "skip" || op === "cut") {
          line.textContent = `… ${row.text || ""}`;
        } else {
          const mark = el("span", "kdiff-mark", MARKS[op]);
          mark.setAttribute("aria-hidden", "true");
          line.append(mark);
          if (SPOKEN[op]) line.append(el("span", "visually-hidden", SPOKEN[op]));
          line.append(document.createTextNode(typeof row.text === "string" && row.text ? row.text : " "));
        }
        box.append(line);
      }
      if (!box.children.length) box.append(el("p", "kdiff-none", "The text is unchanged."));
      return box;
    }

    /** A new entry's text, from its diff's lines (all added), as Markdown. */
    function bodyOf(rows) {
      const lines = (Array.isArray(rows) ? rows : []).filter((row) => row && row.op === "added").map((row) => row.text);
      return lines.join("\n");
    }

    function meta(change) {
      const facts = [KIND_WORDS[change.kind || change.entry_kind] || change.kind || change.entry_kind || "Entry"];
      if (Number.isInteger(change.version)) facts.push(`v${change.version}`);
      const before = change.previous;
      if (before && typeof before === "object") {
        if (Number.isInteger(before.version) && Number.isInteger(change.version)) facts[facts.length - 1] += ` (was v${before.version})`;
        if (before.title && before.title !== change.title) facts.push(`renamed from “${before.title}”`);
        const kindNow = change.kind || change.entry_kind;
        if (before.kind && kindNow && before.kind !== kindNow) facts.push(`was a ${String(KIND_WORDS[before.kind] || before.kind).toLowerCase()}`);
      }
      return facts.join(" · ");
    }

    function content(change, open) {
      const fold = el("details", "kcard-body");
      fold.open = open;
      if (change.op === "create" || !change.previous) {
        fold.append(el("summary", null, "The entry"));
        const text = bodyOf(change.diff);
        fold.append(text.trim() ? linkRefs(renderMarkdown(text)) : el("p", "kdiff-none", "No text."));
      } else {
        fold.append(el("summary", null, "What changed"), diffNode(change.diff, `Changes to ${change.title || "the entry"}`));
      }
      return fold;
    }

    function titleNode(change, tag) {
      const heading = el(tag || "h3", "card-title");
      const url = safeUrl(change.url || "");
      if (url) {
        const link = el("a", null, change.title || "Knowledge entry");
        link.href = url;
        heading.append(link);
      } else {
        heading.textContent = change.title || "Knowledge entry";
      }
      return heading;
    }

    /** The card of a knowledge write that ran (a `draft` frame of kind knowledge, or the transcript). */
    function writtenCard(change, seq) {
      if (!change || typeof change !== "object" || !Number.isInteger(change.id)) return null;
      const card = el("article", "knowledge-card");
      card.dataset.artifact = `knowledge:${change.id}:${change.version}`;
      if (seq) card.dataset.seq = String(seq);
      card.append(el("p", "card-kicker", change.op === "create" ? "Knowledge written" : "Knowledge updated"));
      card.append(titleNode(change), el("p", "card-meta", meta(change)));
      card.append(content(change, change.op !== "create"));
      return card;
    }

    /** An approval's preview row of a knowledge write (planner/domain/knowledge_cards.py). */
    function previewRow(preview) {
      const row = { ...preview, kind: preview.entry_kind }; // the row's own kind is "knowledge"
      const box = el("div", "knowledge-preview");
      const what = row.op === "create" ? "A new entry" : `Changes to knowledge #${row.id}`;
      box.append(el("h4", null, `${what}: ${row.title || "(untitled)"}`), el("p", "card-meta", meta(row)));
      if (row.stale) box.append(el("p", "op-warning", "The planner read an older version: publishing it will conflict and the planner will be asked to merge."));
      if (row.hidden) box.append(el("p", "op-warning", "The entry is linked beyond this project, so its current text is not shown here: this is what would be written."));
      box.append(content(row, true));
      return box;
    }

    // ------------------------------------------------------------ drafts from a compaction

    let draftsBox = null;
    const drafts = new Map(); // id -> draft, as the server last said

    async function post(url, body) {
      try {
        const response = await fetch(url, {
          method: "POST",
          credentials: "same-origin",
          headers: { Accept: "application/json", "Content-Type": "application/json", "X-CSRFToken": csrf },
          body: JSON.stringify(body || {}),
        });
        let data = null;
        try {
          data = await response.json();
        } catch {
          data = null;
        }
        if (response.ok) return { draft: data };
        const error = data && data.error ? data.error : {};
        const message = typeof error.message === "string" && error.message ? error.message : `The server could not do it (HTTP ${response.status}); try again.`;
        return { draft: response.status === 409 ? error.current : null, problem: message };
      } catch {
        return { problem: "The server cannot be reached; check the connection and try again." };
      }
    }

    function draftCard(draft) {
      const card = el("article", "draft-card");
      card.dataset.draft = String(draft.id);
      const heading = el("h4", "card-title", draft.title || "Draft");
      card.append(heading, el("p", "card-meta"));
      const body = el("details", "kcard-body");
      body.append(el("summary", null, "Read the draft"), linkRefs(renderMarkdown(draft.body || "")));
      card.append(body, el("p", "card-decision"));
      card.querySelector(".card-decision").setAttribute("role", "status");
      if (canDecide()) {
        const actions = el("div", "request-actions draft-actions");
        for (const [action, text, className] of [["publish", "Publish", "approve"], ["discard", "Discard", "secondary decline"]]) {
          const button = el("button", className, text);
          button.type = "button";
          button.setAttribute("aria-label", `${text} “${draft.title}”`);
          button.addEventListener("click", () => decide(card, draft.id, action));
          actions.append(button);
        }
        const problem = el("p", "field-error draft-error");
        problem.setAttribute("role", "alert");
        card.append(actions, problem);
      }
      return card;
    }

    function setDraft(card, draft) {
      const items = Array.isArray(draft.items) && draft.items.length ? ` · ${draft.items.join(", ")}` : "";
      card.querySelector(".card-meta").textContent = `${KIND_WORDS[draft.kind] || draft.kind}${items} · ${DRAFT_STATUS[draft.status] || draft.status}`;
      for (const name of Object.keys(DRAFT_STATUS)) card.classList.toggle(`status-${name}`, name === draft.status);
      const decision = card.querySelector(".card-decision");
      decision.replaceChildren();
      if (draft.status === "pending") return;
      const actions = card.querySelector(".draft-actions");
      if (actions) actions.remove();
      const url = safeUrl(draft.url || "");
      if (draft.status === "published" && url) {
        const link = el("a", null, `knowledge #${draft.entry}`);
        link.href = url;
        decision.append("Published as ", link, ": the team’s knowledge now, in search and briefs.");
      } else if (draft.status === "published") {
        decision.textContent = "Published: the team’s knowledge now, in search and briefs.";
      } else {
        decision.textContent = "Discarded: it never becomes knowledge.";
      }
      linkRefs(decision);
    }

    async function decide(card, id, action) {
      if (card.classList.contains("busy")) return;
      card.classList.add("busy");
      const controls = card.querySelectorAll("button");
      for (const control of controls) control.disabled = true;
      const problem = card.querySelector(".draft-error");
      problem.textContent = "";
      const outcome = await post(`${draftsUrl}${id}/${action}/`);
      card.classList.remove("busy");
      if (outcome.draft) update(outcome.draft);
      for (const control of controls) control.disabled = false;
      if (outcome.problem) {
        problem.textContent = outcome.problem;
        if (!outcome.draft) toast(outcome.problem);
      }
    }

    /** The drafts of the chat, shown after ``anchor`` (its latest compaction notice). */
    function showDrafts(anchor, list) {
      const rows = (Array.isArray(list) ? list : []).filter((d) => d && Number.isInteger(d.id));
      if (draftsBox) draftsBox.remove();
      draftsBox = null;
      drafts.clear();
      if (!rows.length || !anchor) return;
      draftsBox = el("section", "drafts-box");
      draftsBox.setAttribute("aria-label", "Knowledge drafts from the summary");
      draftsBox.dataset.seq = anchor.dataset.seq || "";
      draftsBox.append(el("p", "card-kicker", "Worth keeping? The summary’s lasting parts, as knowledge drafts"));
      for (const draft of rows) {
        drafts.set(draft.id, draft);
        const card = draftCard(draft);
        setDraft(card, draft);
        draftsBox.append(card);
      }
      anchor.after(draftsBox);
    }

    /** A draft as it stands now (a `knowledge_draft` frame, or a decision's answer). */
    function update(state) {
      if (!state || !Number.isInteger(state.id) || !draftsBox) return;
      const known = drafts.get(state.id);
      if (!known) return;
      const draft = { ...known, ...state };
      drafts.set(state.id, draft);
      const card = draftsBox.querySelector(`[data-draft="${state.id}"]`);
      if (card) setDraft(card, draft);
    }

    /** The drafts as the server has them: after a `compacted` frame that left some. */
    async function reload(anchor) {
      if (!canDecide()) return;
      try {
        const response = await fetch(draftsUrl, { credentials: "same-origin", headers: { Accept: "application/json" }, cache: "no-store" });
        if (response.ok) showDrafts(anchor, await response.json());
      } catch {
        // the transcript's next load shows them
      }
    }

    return { writtenCard, previewRow, showDrafts, update, reload };
  }

  window.BalletKnowledge = { create };
})();
