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

// fold shows a long text folded: the first lines, then a disclosure for the rest.
export function fold(text, lines = 12) {
  const all = String(text || "").split("\n");
  if (all.length <= lines && text.length < 2000) return h("pre", { class: "text" }, text);
  return h("details", { class: "fold" },
    h("summary", {}, `${all.length} lines — show all`),
    h("pre", { class: "text" }, text));
}

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
      `Show ${Math.min(rest, size)} more ${noun} (${rest} left)`));
  };
  next();
}
