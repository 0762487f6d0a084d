// A code editor without a library: a <textarea> over a highlighted <pre> that mirrors it, plus a
// completion list (tables and columns from INFORMATION_SCHEMA, keywords, functions).

import { el } from "./api.js";

export const SQL_KEYWORDS = [
  "SELECT", "FROM", "WHERE", "GROUP", "BY", "ORDER", "HAVING", "LIMIT", "OFFSET", "AS", "AND", "OR",
  "NOT", "IN", "IS", "NULL", "LIKE", "BETWEEN", "CASE", "WHEN", "THEN", "ELSE", "END", "JOIN",
  "LEFT", "RIGHT", "INNER", "OUTER", "FULL", "CROSS", "ON", "USING", "UNION", "ALL", "DISTINCT",
  "ASC", "DESC", "WITH", "EXPLAIN", "PLAN", "FOR", "TIMESTAMP", "INTERVAL", "CAST", "OVER",
  "PARTITION", "FILTER", "TRUE", "FALSE", "EXISTS", "VALUES", "DAY", "HOUR", "MINUTE", "MONTH",
  "YEAR", "WEEK", "SECOND", "INSERT", "INTO", "OVERWRITE", "PARTITIONED", "CLUSTERED", "EXTEND", "TABLE",
];

export const SQL_FUNCTIONS = [
  "COUNT", "SUM", "MIN", "MAX", "AVG", "APPROX_COUNT_DISTINCT", "EARLIEST", "LATEST", "ANY_VALUE",
  "FLOOR", "CEIL", "TIME_FLOOR", "TIME_SHIFT", "TIME_EXTRACT", "TIME_PARSE", "TIME_FORMAT",
  "TIME_IN_INTERVAL", "MILLIS_TO_TIMESTAMP", "TIMESTAMP_TO_MILLIS", "CURRENT_TIMESTAMP",
  "DATE_TRUNC", "EXTRACT", "LOWER", "UPPER", "CONCAT", "SUBSTRING", "LENGTH", "TRIM", "REPLACE",
  "REGEXP_EXTRACT", "REGEXP_LIKE", "COALESCE", "NULLIF", "ABS", "ROUND", "LOOKUP", "STRLEN",
  "ROW_NUMBER", "RANK", "DENSE_RANK", "LAG", "LEAD", "NTILE", "EXTERN",
];

const KEYWORD_SET = new Set(SQL_KEYWORDS);
// Words Druid's SQL parser reserves that are common column names: inserted quoted ("user").
const RESERVED = new Set([...SQL_KEYWORDS, "USER", "COUNT", "START", "VALUE", "RANGE", "ROWS", "TIME", "DATE",
  "LANGUAGE", "POSITION", "SESSION", "LEVEL", "LOCAL", "RESULT", "SYSTEM", "SECTION"]);
const FUNCTION_SET = new Set(SQL_FUNCTIONS);

const SQL_TOKEN = /(--[^\n]*|\/\*[\s\S]*?(?:\*\/|$))|('(?:[^']|'')*'?)|("(?:[^"]|"")*"?)|(\b\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\b)|([A-Za-z_][A-Za-z0-9_]*)|([^\sA-Za-z0-9_'"]+)|(\s+)/g;
const JSON_TOKEN = /("(?:[^"\\]|\\.)*"?)(\s*:)?|(-?\b\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\b)|\b(true|false|null)\b|([\s\S])/g;

function span(cls, text) {
  const node = document.createElement("span");
  node.className = cls;
  node.textContent = text;
  return node;
}

// Highlighted tokens of `text` as DOM nodes (never HTML strings: the text is the user's).
export function highlightSql(text) {
  const out = [];
  for (const m of text.matchAll(SQL_TOKEN)) {
    const [token, comment, string, quoted, number, word, punct] = m;
    if (comment) out.push(span("tok-comment", token));
    else if (string) out.push(span("tok-string", token));
    else if (quoted) out.push(span("tok-ident", token));
    else if (number) out.push(span("tok-number", token));
    else if (word && KEYWORD_SET.has(word.toUpperCase())) out.push(span("tok-keyword", token));
    else if (word && FUNCTION_SET.has(word.toUpperCase())) out.push(span("tok-function", token));
    else if (punct) out.push(span("tok-punct", token));
    else out.push(document.createTextNode(token));
  }
  return out;
}

export function highlightJson(text) {
  const out = [];
  for (const m of text.matchAll(JSON_TOKEN)) {
    const [token, string, colon, number, literal] = m;
    if (string) {
      out.push(span(colon ? "tok-key" : "tok-string", string));
      if (colon) out.push(document.createTextNode(colon));
    } else if (number) out.push(span("tok-number", token));
    else if (literal) out.push(span("tok-keyword", token));
    else out.push(document.createTextNode(token));
  }
  return out;
}

// An editor in `host`: {textarea, value(), setValue(text), setSchema(schema)}; `onRun` on Ctrl-Enter.
export function createEditor(host, { language, onRun, placeholder = "" }) {
  const code = el("code");
  const pre = el("pre", { class: "editor-highlight", "aria-hidden": "true" }, code);
  const textarea = el("textarea", {
    class: "editor-input", spellcheck: "false", wrap: "off", autocapitalize: "off",
    autocomplete: "off", placeholder, "aria-label": language === "sql" ? "SQL" : "Native query JSON",
  });
  const list = el("ul", { class: "completions", role: "listbox", hidden: true });
  host.classList.add("editor");
  host.append(pre, textarea, list);
  let schema = { tables: [], columns: {} };
  let items = [];
  let active = 0;

  const render = () => {
    code.replaceChildren(...(language === "sql" ? highlightSql(textarea.value) : highlightJson(textarea.value)));
    code.append(document.createTextNode("\n")); // keeps the last empty line as tall as the textarea's
    pre.scrollTop = textarea.scrollTop;
    pre.scrollLeft = textarea.scrollLeft;
  };

  const wordBefore = () => {
    const upto = textarea.value.slice(0, textarea.selectionStart);
    const m = /"?[A-Za-z_][A-Za-z0-9_]*$|"$/.exec(upto);
    return m ? m[0] : "";
  };

  const candidates = (word) => {
    const bare = word.replace(/^"/, "").toLowerCase();
    const inFrom = tablesNamed(textarea.value, schema.tables);
    const columns = [];
    for (const table of inFrom.length ? inFrom : schema.tables) {
      for (const c of schema.columns[table] || []) columns.push({ text: c.name, kind: `${c.type} · ${table}` });
    }
    const pool = [
      ...columns,
      ...schema.tables.map((t) => ({ text: t, kind: "table" })),
      ...(word.startsWith('"') ? [] : SQL_KEYWORDS.map((k) => ({ text: k, kind: "keyword" }))),
      ...(word.startsWith('"') ? [] : SQL_FUNCTIONS.map((f) => ({ text: f, kind: "function" }))),
    ];
    const seen = new Set();
    return pool.filter((c) => {
      const key = c.text + "|" + c.kind.split(" ·")[0];
      if (seen.has(key) || !c.text.toLowerCase().startsWith(bare) || c.text.toLowerCase() === bare) return false;
      seen.add(key);
      return true;
    }).slice(0, 12);
  };

  const close = () => {
    list.hidden = true;
    items = [];
  };

  const open = (force) => {
    if (language !== "sql") return;
    const word = wordBefore();
    if (!word && !force) return close();
    items = candidates(word);
    if (!items.length) return close();
    active = 0;
    list.replaceChildren(...items.map((c, i) => el(
      "li",
      { role: "option", "data-index": i, class: i === 0 ? "active" : "", onmousedown: (e) => { e.preventDefault(); accept(i); } },
      el("span", { class: "completion-text", text: c.text }),
      el("span", { class: "completion-kind", text: c.kind }),
    )));
    const caret = caretPosition(textarea);
    list.style.left = `${caret.left}px`;
    list.style.top = `${caret.top + caret.height}px`;
    list.hidden = false;
  };

  const accept = (i) => {
    const choice = items[i];
    if (!choice) return;
    const word = wordBefore();
    const needsQuotes = !/^[A-Za-z_][A-Za-z0-9_]*$/.test(choice.text) || word.startsWith('"') ||
      (choice.kind !== "keyword" && choice.kind !== "function" && RESERVED.has(choice.text.toUpperCase()));
    const text = needsQuotes ? `"${choice.text}"` : choice.text;
    const start = textarea.selectionStart - word.length;
    textarea.setRangeText(text, start, textarea.selectionStart, "end");
    close();
    render();
    textarea.dispatchEvent(new Event("change"));
  };

  const move = (delta) => {
    active = (active + delta + items.length) % items.length;
    [...list.children].forEach((li, i) => li.classList.toggle("active", i === active));
  };

  textarea.addEventListener("input", (e) => {
    render();
    if (e.inputType && e.inputType.startsWith("insert") && /[A-Za-z0-9_"]$/.test(e.data || "")) open(false);
    else close();
  });
  textarea.addEventListener("scroll", render);
  // Late, so a click on an item lands first; not when focus came back meanwhile (a list opened
  // since then belongs to the new focus).
  textarea.addEventListener("blur", () => setTimeout(() => { if (document.activeElement !== textarea) close(); }, 150));
  textarea.addEventListener("keydown", (e) => {
    if ((e.ctrlKey || e.metaKey) && e.key === "Enter") {
      e.preventDefault();
      close();
      onRun();
      return;
    }
    if (e.ctrlKey && e.key === " ") {
      e.preventDefault();
      open(true);
      return;
    }
    if (!list.hidden) {
      if (e.key === "ArrowDown") { e.preventDefault(); move(1); }
      else if (e.key === "ArrowUp") { e.preventDefault(); move(-1); }
      else if (e.key === "Enter" || e.key === "Tab") { e.preventDefault(); accept(active); }
      else if (e.key === "Escape") { e.preventDefault(); close(); }
      return;
    }
    if (e.key === "Tab") {
      e.preventDefault();
      textarea.setRangeText("  ", textarea.selectionStart, textarea.selectionEnd, "end");
      render();
    }
  });

  render();
  return {
    textarea,
    value: () => textarea.value,
    setValue: (text) => { textarea.value = text; render(); },
    setSchema: (s) => { schema = s; },
    completionsOpen: () => !list.hidden,
  };
}

// Tables named after FROM or JOIN in the statement, for ranking their columns first.
function tablesNamed(text, tables) {
  const known = new Map(tables.map((t) => [t.toLowerCase(), t]));
  const out = [];
  for (const m of text.matchAll(/\b(?:FROM|JOIN)\s+("(?:[^"]|"")+"|[A-Za-z_][\w.]*)/gi)) {
    const name = m[1].replace(/^"|"$/g, "").replace(/""/g, '"').toLowerCase();
    if (known.has(name)) out.push(known.get(name));
  }
  return out;
}

// The caret's pixel position inside the textarea (monospace, no wrapping): line and column times
// the measured character size, less the scroll.
function caretPosition(textarea) {
  const before = textarea.value.slice(0, textarea.selectionStart);
  const lines = before.split("\n");
  const style = getComputedStyle(textarea);
  const probe = el("span", { text: "M".repeat(10) });
  probe.style.font = style.font;
  probe.style.position = "absolute";
  probe.style.visibility = "hidden";
  document.body.append(probe);
  const charWidth = probe.getBoundingClientRect().width / 10;
  probe.remove();
  const lineHeight = parseFloat(style.lineHeight) || parseFloat(style.fontSize) * 1.4;
  return {
    left: parseFloat(style.paddingLeft) + charWidth * lines[lines.length - 1].length - textarea.scrollLeft,
    top: parseFloat(style.paddingTop) + lineHeight * (lines.length - 1) - textarea.scrollTop,
    height: lineHeight,
  };
}
