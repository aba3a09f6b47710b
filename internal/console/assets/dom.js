// dom.js: building elements without innerHTML, so no text from the API is ever
// parsed as markup.

// h builds an element: attrs sets properties ("on…" adds listeners, "class",
// "for", "aria-…" and "data-…" become attributes); children are nodes, strings or
// arrays of them (null and false are skipped).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "class" || k === "for" || k.startsWith("aria-") || k.startsWith("data-") || k === "role")
      el.setAttribute(k, v === true ? "" : String(v));
    else el[k] = v;
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

// clear empties el and appends children.
export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// when formats a time for humans.
export function when(t) {
  if (!t) return "";
  const d = new Date(t);
  return isNaN(d) ? "" : d.toLocaleString();
}

// fold shows a long text folded: its first lines (at most about 1500
// characters) and, behind a disclosure, the rest.
export function fold(text, lines = 12) {
  text = String(text || "");
  let cut = -1;
  for (let i = 0, n = 0; i < text.length && i < 1500; i++) if (text[i] === "\n" && ++n === lines) { cut = i; break; }
  if (cut >= 0 && !text.slice(cut).trim()) cut = -1; // nothing after the last line shown
  const cutAtLine = cut >= 0;
  if (cut < 0 && text.length > 2000) cut = text.lastIndexOf(" ", 1500) > 1000 ? text.lastIndexOf(" ", 1500) : 1500;
  if (cut < 0) return h("pre", { class: "text" }, text);
  const rest = text.slice(cut);
  const more = rest.replace(/^\n/, "").replace(/\n$/, "").split("\n").length;
  return h("div", { class: "fold" }, h("pre", { class: "text" }, text.slice(0, cut)),
    h("details", {}, h("summary", {}, cutAtLine ? `show ${more} more lines` : `show ${rest.length} more characters`),
      h("pre", { class: "text" }, rest.replace(/^\n/, ""))));
}

// td is a table cell that carries its column's name, shown beside the value
// when a narrow screen lays the table out as cards.
export function td(label, ...children) { return h("td", { "data-label": label }, ...children); }

// badge is a status label.
export function badge(status) {
  return h("span", { class: "badge s-" + String(status).replace(/[^a-z_]/g, "") }, status);
}

// toast shows a short message in the status region.
export function toast(msg) {
  const t = document.getElementById("toast");
  t.textContent = msg;
  t.classList.add("on");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => t.classList.remove("on"), 4000);
}

// untoast hides the toast now (a new view is not about the last one's action).
export function untoast() {
  clearTimeout(toast.timer);
  document.getElementById("toast").classList.remove("on");
}

// problemBox renders an API error: its status, code and detail.
export function problemBox(err) {
  if (!err) return null;
  const p = err.problem || {};
  return h("div", { class: "problem", role: "alert" },
    h("strong", {}, `${p.status || err.status || ""} ${p.code || "error"}`), " ",
    h("span", { class: "detail" }, p.detail || err.message || String(err)));
}

// paged renders items into el a page at a time: the first size, then a button in
// foot that shows the next page (for lists the API returns whole).
export function paged(el, items, render, size, foot, noun) {
  let shown = 0;
  const next = () => {
    for (const it of items.slice(shown, shown + size)) el.append(render(it));
    shown = Math.min(items.length, shown + size);
    const rest = items.length - shown;
    clear(foot, rest > 0 && h("button", { type: "button", class: "more", onclick: () => { next(); } },
      `Show more ${noun} (${rest} left)`));
  };
  next();
}
