// Markdown for the agent's answers and the preview of a Markdown file,
// built as DOM nodes from marked's tokens, text always as text: what the
// model or the file says can never become markup or script in the page
// (raw HTML shows as written, images as their text, and links work only
// for http, https and mailto).
import { Lexer } from "marked";

const node = (tag, text) => {
  const e = document.createElement(tag);
  if (text != null) e.textContent = text;
  return e;
};

const safeHref = (href) => /^(https?:|mailto:)/i.test(href || "");

function inline(tokens = [], into) {
  for (const t of tokens) {
    switch (t.type) {
      case "strong":
      case "em":
      case "del":
        inline(t.tokens, into.appendChild(node(t.type === "strong" ? "strong" : t.type === "em" ? "em" : "del")));
        break;
      case "codespan":
        into.append(node("code", t.text));
        break;
      case "br":
        into.append(node("br"));
        break;
      case "link": {
        if (!safeHref(t.href)) {
          inline(t.tokens, into);
          break;
        }
        const a = into.appendChild(node("a"));
        a.href = t.href;
        a.target = "_blank";
        a.rel = "noopener noreferrer";
        inline(t.tokens, a);
        break;
      }
      case "image": // no fetching what a model points at
        into.append(`[${t.text || "image"}]`);
        break;
      case "checkbox":
        into.append(t.checked ? "☑ " : "☐ ");
        break;
      case "text":
        if (t.tokens) inline(t.tokens, into);
        else into.append(t.text);
        break;
      default: // escape, html, and what marked adds later: as written
        into.append(t.text ?? t.raw ?? "");
    }
  }
}

function blocks(tokens = [], into, o) {
  for (const t of tokens) {
    switch (t.type) {
      case "paragraph":
        inline(t.tokens, into.appendChild(node("p")));
        break;
      case "heading":
        inline(t.tokens, into.appendChild(node(`h${Math.min(6, t.depth + o.headings)}`)));
        break;
      case "code": {
        const pre = into.appendChild(node("pre"));
        const code = pre.appendChild(node("code", t.text));
        if (t.lang) code.dataset.lang = t.lang;
        break;
      }
      case "blockquote":
        blocks(t.tokens, into.appendChild(node("blockquote")), o);
        break;
      case "list": {
        const list = into.appendChild(node(t.ordered ? "ol" : "ul"));
        if (t.ordered && t.start !== "" && t.start !== 1) list.start = t.start;
        for (const item of t.items) blocks(item.tokens, list.appendChild(node("li")), o);
        break;
      }
      case "table": {
        const table = into.appendChild(node("table"));
        const head = table.appendChild(node("tr"));
        for (const c of t.header) inline(c.tokens, head.appendChild(node("th")));
        for (const row of t.rows) {
          const tr = table.appendChild(node("tr"));
          for (const c of row) inline(c.tokens, tr.appendChild(node("td")));
        }
        break;
      }
      case "hr":
        into.append(node("hr"));
        break;
      case "space":
        break;
      case "text": // inside list items
        inline(t.tokens || [t], into);
        break;
      default:
        into.append(node("p", t.text ?? t.raw ?? ""));
    }
  }
}

// renderMarkdown returns the nodes for text; a half-streamed answer
// renders as far as it goes (an open code fence runs to the end).
// headings is added to a heading's level: # is an h3 in the agent's
// panel (2, the default), an h1 in a file's preview (0).
export function renderMarkdown(text, { headings = 2 } = {}) {
  const frag = document.createDocumentFragment();
  blocks(Lexer.lex(text, { gfm: true }), frag, { headings });
  return frag;
}
