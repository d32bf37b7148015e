/* Ballet's Markdown: model text as DOM, parsed by markdown-it, code coloured by highlight.js.
 *
 * Safety: markdown-it only tokenizes (raw HTML disabled); this file builds the DOM from its
 * tokens with createElement, text nodes and attribute setters, from a fixed list of tags. No
 * HTML string reaches the page: highlight.js's output is parsed in an inert <template> and
 * rebuilt as <span class="hljs-…"> and text only, and dropped unless its text is the code's.
 * Links are limited to http(s), mailto and relative URLs; images become links ("Image: …").
 *
 * Cost: linear in the text, and bounded where markdown-it is not: it scans from every `[` to
 * a closing bracket and from every `://` to the end of a URL (quadratic on a line of 40,000
 * `[`), spends tens of microseconds on every markup character, builds a cell for every `|`
 * of a 40,000-character row and drops what lies past its nesting limit. Here such scans have
 * a budget, and a paragraph with too much markup, a table too wide or too long, and blocks
 * nested too deep show as their text. Code is highlighted once per (language, text) and kept;
 * while a reply streams, the block still being written is left plain.
 */
(() => {
  "use strict";

  const SAFE_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);
  const MAX_NESTING = 20; // block and inline levels; markdown-it keeps the text past them as text
  const MAX_URL = 4000; // a bare http(s) URL linked
  const MAX_COLUMNS = 64; // of a table
  const MAX_CELLS = 2000; // of a table
  const MAX_DEPTH = 40; // elements nested in a message; deeper markup shows as its text
  const MAX_INLINE_MARKS = 2000; // characters that may start markup, in a paragraph; past them, its text
  const MAX_INLINE_ELEMENTS = 1000; // in a paragraph; past them, the paragraph shows as its text
  const MAX_HIGHLIGHT = 20000; // characters of one code block highlighted; longer ones stay plain
  const HIGHLIGHT_CACHE = 200; // highlighted blocks kept (a streaming reply re-renders its text)
  const LANGUAGE = /^[\w+#.-]{1,40}$/;
  const HLJS_CLASS = /^(?:hljs-[\w-]+|[a-z]+_+)$/; // hljs 11 scopes: "hljs-title function_"

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

  // ---------------------------------------------------------------- the parser

  const md = window.markdownit({ html: false, linkify: true, typographer: false, maxNesting: MAX_NESTING });
  const labelWork = new WeakMap(); // markdown-it's inline state -> {steps} spent finding labels
  const MARKS = new Uint8Array(128); // the characters that may start markup (or a line)
  for (const c of "*_~`[!<&\\:\n") MARKS[c.charCodeAt(0)] = 1;

  // Only links with a scheme: "models.py" or "a@b.io" in prose stay text.
  md.linkify.set({ fuzzyLink: false, fuzzyEmail: false, fuzzyIP: false });
  md.linkify.add("ftp:", null).add("//", null);
  // Every link is parsed, so an unsafe one shows as an inert span (safeUrl decides in link()).
  md.validateLink = () => true;
  // safeUrl parses, encodes and checks every URL: markdown-it's costly normalization is not needed.
  md.normalizeLink = (url) => url;
  md.normalizeLinkText = (text) => text;
  md.helpers.parseLinkLabel = parseLinkLabel;
  boundUrls();
  boundTables();
  keepDeepBlocks();
  boundInline();

  /** A bare URL is linked up to MAX_URL characters: linkify-it would match from every `://` to the end. */
  function boundUrls() {
    const matchAtStart = md.linkify.matchAtStart.bind(md.linkify);
    md.linkify.matchAtStart = (text) => {
      const match = matchAtStart(text.slice(0, MAX_URL));
      return match && match.lastIndex < MAX_URL ? match : null; // a longer "URL" stays text
    };
  }

  /**
   * markdown-it's own search for the `]` closing the label opened at `start` (same result),
   * within a budget per paragraph: past it, no more links there. Without one, a line of
   * 40,000 `[` or `![` scans to its end from each of them (quadratic).
   */
  function parseLinkLabel(state, start, disableNested) {
    let work = labelWork.get(state);
    if (!work) labelWork.set(state, (work = { steps: 0, budget: 4 * state.src.length + 4096 }));
    const max = state.posMax;
    const oldPos = state.pos;
    let level = 1;
    let found = false;
    state.pos = start + 1;
    while (state.pos < max && work.steps < work.budget) {
      work.steps += 1;
      const marker = state.src.charCodeAt(state.pos);
      if (marker === 0x5d /* ] */) {
        level -= 1;
        if (level === 0) {
          found = true;
          break;
        }
      }
      const prevPos = state.pos;
      state.md.inline.skipToken(state);
      if (marker === 0x5b /* [ */) {
        if (prevPos === state.pos - 1) {
          level += 1;
        } else if (disableNested) {
          state.pos = oldPos;
          return -1;
        }
      }
    }
    const end = found ? state.pos : -1;
    state.pos = oldPos;
    return end;
  }

  /**
   * Tables of at most MAX_COLUMNS columns and MAX_CELLS cells: a wider header line is no table
   * (its text shows), and rows past the cells are text after the table. A 40,000-character row
   * of `|` would otherwise make tens of thousands of cells, a freeze to lay out.
   */
  function boundTables() {
    // markdown-it's rule, by its ruler's (stable, if underscored) list: `at` replaces a rule by name.
    const rule = md.block.ruler.__rules__.find((entry) => entry.name === "table");
    const table = rule.fn;
    md.block.ruler.at(
      "table",
      (state, startLine, endLine, silent) => {
        let bars = 0;
        for (let i = state.bMarks[startLine]; i < state.eMarks[startLine] && bars <= MAX_COLUMNS + 1; i += 1) {
          if (state.src.charCodeAt(i) === 0x7c /* | */) bars += 1;
        }
        if (bars > MAX_COLUMNS + 1) return false;
        const rows = Math.floor(MAX_CELLS / (bars + 1)); // a row has at most bars + 1 cells
        return table(state, startLine, Math.min(endLine, startLine + 2 + rows), silent);
      },
      { alt: rule.alt.slice() },
    );
  }

  /**
   * markdown-it drops whatever lies deeper than maxNesting (a 21st nested quote or list); here
   * it stays, as the text it is.
   */
  function keepDeepBlocks() {
    const tokenize = md.block.tokenize.bind(md.block);
    md.block.tokenize = (state, startLine, endLine) => {
      if (state.level < MAX_NESTING || startLine >= endLine) {
        tokenize(state, startLine, endLine);
        return;
      }
      const text = state.getLines(startLine, endLine, state.blkIndent, false).trim();
      if (text) {
        state.push("paragraph_open", "p", 1).map = [startLine, endLine];
        state.push("text", "", 0).content = text;
        state.push("paragraph_close", "p", -1);
      }
      state.line = endLine;
    };
  }

  /**
   * A paragraph (or heading, or cell) with more than MAX_INLINE_MARKS characters that may start
   * markup is shown as its text, unparsed: markdown-it spends tens of microseconds on each
   * (tokens, delimiters), a quarter of a second on a line of 40,000 `_a`, and no real message
   * has that many in one paragraph.
   */
  function boundInline() {
    md.core.ruler.at("inline", (state) => {
      for (const token of state.tokens) {
        if (token.type !== "inline") continue;
        if (markCount(token.content) > MAX_INLINE_MARKS) {
          // "text_special": text that markdown-it's linkify leaves alone (text_join makes it text)
          const text = new state.Token("text_special", "", 0);
          text.content = token.content;
          token.children = [text];
        } else {
          state.md.inline.parse(token.content, state.md, state.env, token.children);
        }
      }
    });
  }

  function markCount(text) {
    let count = 0;
    for (let i = 0; i < text.length; i += 1) {
      const code = text.charCodeAt(i);
      if (code < 128) count += MARKS[code];
    }
    return count;
  }

  // ---------------------------------------------------------------- tokens to DOM

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  const ELEMENTS = {
    paragraph_open: "p",
    blockquote_open: "blockquote",
    bullet_list_open: "ul",
    ordered_list_open: "ol",
    list_item_open: "li",
    thead_open: "thead",
    tbody_open: "tbody",
    tr_open: "tr",
    em_open: "em",
    strong_open: "strong",
    s_open: "del",
  };

  /**
   * `text` (Markdown) as a DocumentFragment. With `streaming`, a code block reaching the end of
   * the text may still be written: it stays plain (highlighted once the reply ends).
   */
  function renderMarkdown(text, { streaming = false } = {}) {
    const source = String(text ?? "");
    const fragment = document.createDocumentFragment();
    const lines = streaming ? source.split("\n").length : Infinity;
    build(md.parse(source, {}), fragment, lines);
    return fragment;
  }

  /** Appends the DOM of `tokens` to `root`; runs of text and line breaks become one text node. */
  function build(tokens, root, lines) {
    const stack = [root];
    let text = "";
    const flush = () => {
      if (text) stack[stack.length - 1].append(text);
      text = "";
    };
    const walk = (list) => {
      for (const token of list) {
        if (token.type === "inline") {
          const children = token.children || [];
          if (elementCount(children) > MAX_INLINE_ELEMENTS) text += token.content; // its source, as text
          else walk(children);
        } else if (token.type === "text" || token.type === "text_special") {
          text += token.content;
        } else if (token.type === "softbreak" || token.type === "hardbreak") {
          text += "\n"; // a chat's newlines are meant: .md keeps them (white-space: pre-line)
        } else {
          flush();
          const parent = stack[stack.length - 1];
          if (token.nesting === 1) {
            const node = stack.length > MAX_DEPTH ? null : openNode(token);
            if (node === null) {
              stack.push(parent); // a tight list's paragraph, or too deep: the text goes in the parent
            } else {
              parent.append(node.outer || node.inner);
              stack.push(node.inner);
            }
          } else if (token.nesting === -1) {
            if (stack.length > 1) stack.pop();
          } else {
            const node = leafNode(token, lines);
            if (node) parent.append(node);
          }
        }
      }
    };
    walk(tokens);
    flush();
  }

  function elementCount(children) {
    let count = 0;
    for (const child of children) {
      if (child.nesting === 1 || child.type === "code_inline" || child.type === "image") count += 1;
    }
    return count;
  }

  /** The element a `*_open` token opens ({inner} to fill, in {outer} when wrapped); null: none. */
  function openNode(token) {
    if (token.type === "paragraph_open" && token.hidden) return null;
    if (ELEMENTS[token.type]) {
      const node = el(ELEMENTS[token.type]);
      const start = token.type === "ordered_list_open" ? token.attrGet("start") : null;
      if (start !== null && Number.isSafeInteger(Number(start))) node.start = Number(start);
      return { inner: node };
    }
    switch (token.type) {
      case "heading_open": {
        const level = Number(token.tag.slice(1)) || 1;
        return { inner: el(`h${Math.min(level + 2, 6)}`, `md-h${level}`) };
      }
      case "table_open": {
        const wrap = scrolling(el("div", "table-wrap"), "Table"); // scrolls sideways on its own, not the page
        return { inner: wrap.appendChild(el("table")), outer: wrap };
      }
      case "th_open":
      case "td_open":
        return { inner: cell(token) };
      case "link_open":
        return { inner: link(token.attrGet("href")) };
      default:
        return { inner: el("span") }; // a token type this list misses: its content stays, as text
    }
  }

  function cell(token) {
    const align = /text-align:\s*(right|center)/.exec(token.attrGet("style") || "");
    const node = el(token.tag === "th" ? "th" : "td", align ? `align-${align[1]}` : null);
    if (token.tag === "th") node.scope = "col";
    return node;
  }

  function link(href) {
    const url = safeUrl(href || "");
    if (!url) return el("span", "unsafe-link");
    const node = el("a");
    node.href = url;
    node.rel = "noopener noreferrer nofollow";
    node.target = "_blank";
    return node;
  }

  function leafNode(token, lines) {
    switch (token.type) {
      case "code_inline":
        return el("code", null, token.content);
      case "image": {
        const node = link(token.attrGet("src"));
        const label = (token.children || []).map((child) => child.content).join("");
        node.classList.add("md-image");
        node.textContent = label ? `Image: ${label}` : "Image";
        return node;
      }
      case "hr":
        return el("hr");
      case "fence":
      case "code_block":
        return codeBlock(token, lines);
      default:
        return token.content ? document.createTextNode(token.content) : null; // html_* never (html off)
    }
  }

  function codeBlock(token, lines) {
    const code = el("code");
    const text = token.content.endsWith("\n") ? token.content.slice(0, -1) : token.content;
    const lang = token.type === "fence" ? (token.info.trim().split(/\s+/)[0] || "") : "";
    if (LANGUAGE.test(lang)) code.dataset.lang = lang;
    const open = token.map && token.map[1] >= lines; // may still be written while streaming
    const colored = lang && !open ? highlighted(lang, text) : null;
    if (colored) {
      code.classList.add("hljs");
      code.append(colored);
    } else {
      code.textContent = text;
    }
    const pre = scrolling(el("pre", "md-code"), LANGUAGE.test(lang) ? `Code (${lang})` : "Code");
    pre.append(code);
    return pre;
  }

  /** A box that scrolls sideways is reached with Tab and scrolled with the arrow keys (WCAG 2.1.1). */
  function scrolling(node, label) {
    node.tabIndex = 0;
    node.setAttribute("role", "group");
    node.setAttribute("aria-label", label);
    return node;
  }

  // ---------------------------------------------------------------- streaming

  const FENCE_OPEN = /^ {0,3}(`{3,}|~{3,})/;
  const LIST_OR_INDENT = /^(?:[ \t]|[-*+](?:[ \t]|$)|\d{1,9}[.)](?:[ \t]|$))/;
  const REFERENCE = /^ {0,3}\[[^\]\n]+\]:/m;

  /**
   * Where a reply still streaming can be cut so that the text before renders now as it will
   * once whole: at the start of a line that follows a blank line outside any fenced code, and
   * starts a block of its own (not indented, not a list item, which could join a list above).
   * `from` is such a cut, or 0; the result is the last cut found after it (or `from`). The
   * page renders the text before a cut once and keeps it, so a long reply does not cost a
   * render of all of it at every frame.
   */
  function streamCut(text, from) {
    let cut = from;
    let fence = null;
    let blank = false;
    for (let pos = from, end = text.indexOf("\n", pos); end !== -1; pos = end + 1, end = text.indexOf("\n", pos)) {
      const line = text.slice(pos, end);
      if (fence) {
        const close = FENCE_OPEN.exec(line);
        if (close && close[1][0] === fence[0] && close[1].length >= fence.length && !line.slice(close[0].length).trim()) fence = null;
        continue;
      }
      if (blank && line.trim() && !LIST_OR_INDENT.test(line)) cut = pos;
      const open = FENCE_OPEN.exec(line);
      if (open) fence = open[1];
      blank = !line.trim();
    }
    return cut;
  }

  /** Whether the cuts render as the whole does: not when a link reference is defined, later maybe. */
  function cutsAreExact(text) {
    return !REFERENCE.test(text);
  }

  // ---------------------------------------------------------------- highlighting

  const cache = new Map(); // `${language}\n${code}` -> a highlighted fragment, cloned for each use

  /** `code` coloured as `lang`: a fragment of hljs spans and text, or null (unknown, too long). */
  function highlighted(lang, code) {
    const hljs = window.hljs;
    if (!hljs || code.length > MAX_HIGHLIGHT || !code.trim()) return null;
    const language = hljs.getLanguage(lang);
    if (!language) return null;
    const key = `${lang.toLowerCase()}\n${code}`;
    let fragment = cache.get(key);
    if (fragment === undefined) {
      fragment = colour(hljs, lang, code);
      if (cache.size >= HIGHLIGHT_CACHE) cache.delete(cache.keys().next().value);
      cache.set(key, fragment);
    }
    return fragment ? fragment.cloneNode(true) : null;
  }

  function colour(hljs, lang, code) {
    let html;
    try {
      html = hljs.highlight(code, { language: lang, ignoreIllegals: true }).value;
    } catch {
      return null;
    }
    const inert = document.createElement("template"); // parsed, never run nor loaded
    inert.innerHTML = html;
    const fragment = document.createDocumentFragment();
    rebuild(inert.content, fragment);
    return fragment.textContent === code ? fragment : null;
  }

  /** Only <span> with hljs classes and text survive; other elements give their text. */
  function rebuild(from, to) {
    for (const node of from.childNodes) {
      if (node.nodeType === Node.TEXT_NODE) {
        to.append(document.createTextNode(node.data));
      } else if (node.nodeType === Node.ELEMENT_NODE) {
        const classes = node.tagName === "SPAN" ? Array.from(node.classList).filter((c) => HLJS_CLASS.test(c)) : [];
        if (classes.length) {
          const span = document.createElement("span");
          span.className = classes.join(" ");
          rebuild(node, span);
          to.append(span);
        } else {
          rebuild(node, to);
        }
      }
    }
  }

  window.BalletMarkdown = Object.freeze({ renderMarkdown, safeUrl, streamCut, cutsAreExact });
})();
