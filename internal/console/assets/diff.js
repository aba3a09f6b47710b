// diff.js: the side-by-side view of a run's patch. patch_md holds one fenced
// unified diff per file (against the live surface, see evolution.RenderPatchMD);
// each is laid out as two columns, live on the left and proposed on the right.
import { h } from "./dom.js";

// parsePatchMD returns [{path, deleted, note, hunks: [lines]}] from patch_md.
export function parsePatchMD(md) {
  const files = [];
  const lines = String(md || "").split("\n");
  let cur = null, inDiff = false, fence = "";
  for (const line of lines) {
    if (!inDiff && line.startsWith("### ")) {
      const name = line.slice(4);
      cur = { path: name.replace(/ \(deleted\)$/, ""), deleted: name.endsWith(" (deleted)"), lines: [], note: "" };
      files.push(cur);
      continue;
    }
    if (!cur) continue;
    if (!inDiff && /^(`{3,}|~{3,})diff\s*$/.test(line)) { inDiff = true; fence = line.match(/^(`+|~+)/)[1]; continue; }
    if (inDiff && line.startsWith(fence) && line.slice(fence.length).trim() === "") { inDiff = false; continue; }
    if (inDiff) cur.lines.push(line);
    else if (line.startsWith("## ")) cur = null;
    else if (line.trim()) cur.note += line + " ";
  }
  return files;
}

// rows pairs a unified diff's lines into [left, right] rows.
function rows(lines) {
  const out = [];
  let oldNo = 0, newNo = 0, dels = [], adds = [];
  const flush = () => {
    const n = Math.max(dels.length, adds.length);
    for (let i = 0; i < n; i++) out.push([dels[i] ? { no: dels[i][0], text: dels[i][1], cls: "del" } : null, adds[i] ? { no: adds[i][0], text: adds[i][1], cls: "add" } : null]);
    dels = []; adds = [];
  };
  for (const l of lines) {
    if (l.startsWith("---") || l.startsWith("+++")) continue;
    const m = l.match(/^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/);
    if (m) { flush(); oldNo = +m[1]; newNo = +m[2]; out.push("hunk"); continue; }
    if (l.startsWith("-")) dels.push([oldNo++, l.slice(1)]);
    else if (l.startsWith("+")) adds.push([newNo++, l.slice(1)]);
    else if (l.startsWith("\\")) continue;
    else { flush(); const t = l.slice(1); out.push([{ no: oldNo++, text: t, cls: "ctx" }, { no: newNo++, text: t, cls: "ctx" }]); }
  }
  flush();
  return out;
}

function cell(c) {
  if (!c) return [h("td", { class: "no empty" }), h("td", { class: "code empty" })];
  return [h("td", { class: "no" }, String(c.no)), h("td", { class: "code " + c.cls }, c.text)];
}

// sideBySide renders the patch's files.
export function sideBySide(md) {
  const files = parsePatchMD(md);
  if (!files.length) return h("p", { class: "muted" }, "No file changes.");
  return files.map((f) => h("section", { class: "diff-file" },
    h("h4", {}, f.path, f.deleted ? " (deleted)" : ""),
    f.lines.length ? h("div", { class: "diff-scroll" }, h("table", { class: "diff", "aria-label": "Changes to " + f.path },
      h("thead", {}, h("tr", {}, h("th", { colSpan: 2, scope: "col" }, "live"), h("th", { colSpan: 2, scope: "col" }, "proposed"))),
      h("tbody", {}, rows(f.lines).map((r) => r === "hunk" ? h("tr", { class: "hunk" }, h("td", { colSpan: 4 }, "…")) : h("tr", {}, cell(r[0]), cell(r[1]))))))
      : h("p", { class: "muted" }, f.note.trim())));
}
