/* Ballet's references in the chat: item keys (DEMO-12), "changeset #7", "knowledge #12", commit
 * hashes and repository paths as links.
 *
 * What the chat shows (model text included) is first plain text. This file finds the references
 * in its text nodes — never in code, existing links or controls — and asks the server, in one
 * batched request, which of them exist and may be read (`/projects/{key}/refs/`, its address in
 * the page's data-refs-url). Only those become links, and their address is the one the server
 * answered, built from its own URL builder: whatever the model writes, a link here points only
 * to a page of this site. Answers are kept for the page's life, so a streaming reply links what
 * is known at once and asks at most every half second for what is new (docs/protocol.md).
 */
(() => {
  "use strict";

  // An item key: a project key (2 to 10 uppercase letters or digits, a letter first), a dash and
  // its number; "changeset 7" and "changeset #7"; "knowledge #12", "knowledge 12", "knowledge:12"
  // and "entry #12". Case matters for keys only (checked on each match).
  // A commit hash (7 to 40 lowercase hex characters, not all digits) and a repository path
  // ("app:README.md", or with a slash and an extension: "src/app/models.py"), as
  // tracker/repos/refs.py finds them; the server says which are a commit or a file.
  const PATTERN = new RegExp(
    "\\b([A-Z][A-Z0-9]{1,9}-[0-9]{1,9})\\b|\\b(changeset\\s+#?)([0-9]{1,9})\\b|\\b(knowledge\\s+#?|knowledge:|entry\\s+#)([0-9]{1,18})\\b" +
      "|(?<![\\w/.:-])([0-9a-f]{7,40})(?![\\w/-])" +
      "|(?<![\\w/.:@-])((?:[a-z0-9][a-z0-9_-]{0,49}:)?(?:[A-Za-z0-9_][A-Za-z0-9_.-]*/)*[A-Za-z0-9_][A-Za-z0-9_.-]*\\.[A-Za-z0-9]{1,10})(?![\\w/-]|\\.\\w)",
    "gi",
  );
  const SHA = /^(?!\d+$)[0-9a-f]{7,40}$/;
  const PATH = /^(?:[a-z0-9][a-z0-9_-]{0,49}:\S+|\S*\/\S+)$/;
  const ANY = new RegExp(PATTERN.source, "i"); // whether a text has one (PATTERN keeps a position)
  const KEY = /^[A-Z][A-Z0-9]{1,9}-[0-9]+$/;
  const SKIP = "a, code, button, textarea, input, select, label, summary, .unsafe-link";
  const MAX_PER_KIND = 200; // of one request, as the server takes
  const QUIET_MS = 200; // after the last reference found, before asking
  const EVERY_MS = 500; // at most one request in this time

  function number(text) {
    return text.replace(/^0+(?=\d)/, "");
  }

  /** The references in `text`: {index, length, kind, id}. */
  function references(text) {
    const found = [];
    PATTERN.lastIndex = 0;
    for (let match = PATTERN.exec(text); match; match = PATTERN.exec(text)) {
      if (match[1]) {
        if (KEY.test(match[1])) found.push({ index: match.index, length: match[0].length, kind: "items", id: match[1] });
      } else if (match[3]) {
        found.push({ index: match.index, length: match[0].length, kind: "changesets", id: number(match[3]) });
      } else if (match[5]) {
        found.push({ index: match.index, length: match[0].length, kind: "knowledge", id: number(match[5]) });
      } else if ((match[6] && SHA.test(match[6])) || (match[7] && PATH.test(match[7]))) {
        found.push({ index: match.index, length: match[0].length, kind: "code", id: match[6] || match[7] });
      }
    }
    return found;
  }

  /** A path on this site, or null: the only kind of address a reference link may have. */
  function local(raw) {
    if (typeof raw !== "string" || !raw.startsWith("/") || raw.startsWith("//")) return null;
    let url;
    try {
      url = new URL(raw, window.location.origin);
    } catch {
      return null;
    }
    return url.origin === window.location.origin ? url.pathname : null;
  }

  function describe(kind, id, info) {
    const title = typeof info.title === "string" ? info.title : "";
    if (kind === "items") return `${id} · ${title}${info.state ? ` (${String(info.state).replace(/_/g, " ")})` : ""}`;
    if (kind === "changesets") return `Changeset #${id} · ${title}${info.status ? ` (${info.status})` : ""}`;
    if (kind === "code") return title || id;
    return `Knowledge #${id} · ${title}`;
  }

  /**
   * A linker for one page: `link(root, {collect})` turns the references under `root` that the
   * server confirmed into links and (with `collect`, the default) asks about the ones not known
   * yet; `onResolved` runs once an answer came, to link what it confirmed.
   */
  function create({ url, onResolved }) {
    const known = new Map(); // "kind:id" -> the server's answer, or null: absent or not readable
    const pending = new Set();
    let timer = null;
    let lastAsked = 0;

    function anchor(text, kind, id, info) {
      const href = local(info.url);
      if (!href) return null;
      const a = document.createElement("a");
      a.href = href;
      a.className = `ref ref-${kind}`;
      a.textContent = text;
      a.title = describe(kind, id, info);
      a.dataset.ref = `${kind}:${id}`;
      return a;
    }

    function textNodes(root) {
      const nodes = [];
      const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
        acceptNode(node) {
          const parent = node.parentElement;
          if (parent && parent.closest(SKIP)) return NodeFilter.FILTER_REJECT;
          // A streaming reply's own text nodes are replaced at its next render, not split.
          if (parent && parent.matches(".bubble.streaming")) return NodeFilter.FILTER_REJECT;
          return ANY.test(node.data) ? NodeFilter.FILTER_ACCEPT : NodeFilter.FILTER_REJECT;
        },
      });
      for (let node = walker.nextNode(); node; node = walker.nextNode()) nodes.push(node);
      return nodes;
    }

    function linkNode(node, collect) {
      const text = node.data;
      const parts = [];
      let at = 0;
      for (const ref of references(text)) {
        const name = `${ref.kind}:${ref.id}`;
        const info = known.get(name);
        if (info === undefined && collect) pending.add(name);
        const a = info ? anchor(text.slice(ref.index, ref.index + ref.length), ref.kind, ref.id, info) : null;
        if (!a) continue;
        if (ref.index > at) parts.push(text.slice(at, ref.index));
        parts.push(a);
        at = ref.index + ref.length;
      }
      if (!parts.length) return;
      if (at < text.length) parts.push(text.slice(at));
      node.replaceWith(...parts);
    }

    function link(root, { collect = true } = {}) {
      if (!root) return;
      for (const node of textNodes(root)) linkNode(node, collect);
      if (collect && pending.size) schedule();
    }

    function schedule() {
      if (timer !== null || !url) return;
      const wait = Math.max(QUIET_MS, lastAsked + EVERY_MS - performance.now());
      timer = setTimeout(ask, wait);
    }

    async function ask() {
      timer = null;
      lastAsked = performance.now();
      const batch = { items: [], changesets: [], knowledge: [], code: [] };
      for (const name of pending) {
        const [kind, id] = [name.slice(0, name.indexOf(":")), name.slice(name.indexOf(":") + 1)];
        if (batch[kind].length < MAX_PER_KIND) batch[kind].push(id);
      }
      const asked = Object.entries(batch).flatMap(([kind, ids]) => ids.map((id) => `${kind}:${id}`));
      for (const name of asked) pending.delete(name);
      const query = Object.entries(batch)
        .filter(([, ids]) => ids.length)
        .map(([kind, ids]) => `${kind}=${encodeURIComponent(ids.join(","))}`)
        .join("&");
      let answer = null;
      try {
        const response = await fetch(`${url}?${query}`, {
          credentials: "same-origin",
          headers: { Accept: "application/json" },
          cache: "no-store",
        });
        if (response.ok) answer = await response.json();
      } catch {
        answer = null; // they stay plain text; the next time they are shown asks again
      }
      if (answer && typeof answer === "object") {
        for (const name of asked) {
          const [kind, id] = [name.slice(0, name.indexOf(":")), name.slice(name.indexOf(":") + 1)];
          const group = answer[kind] && typeof answer[kind] === "object" ? answer[kind] : {};
          const info = Object.hasOwn(group, id) && group[id] && typeof group[id] === "object" ? group[id] : null;
          known.set(name, info);
        }
        if (onResolved) onResolved();
      }
      if (pending.size) schedule();
    }

    return Object.freeze({ link });
  }

  window.BalletRefs = Object.freeze({ create, references });
})();
