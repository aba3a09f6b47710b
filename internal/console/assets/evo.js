// evo.js: the Evolution tab: the runs list, a run's review and its applies.
import { h, clear, when, problemBox, fold, badge, toast, td } from "./dom.js";
import { get, post, call, enc } from "./api.js";
import { onChange } from "./feed.js";
import { sideBySide } from "./diff.js";

const STATUSES = ["", "pending", "running", "awaiting_review", "approved", "applied", "rolled_back", "rejected", "skipped", "failed", "timeout"];
const RETRYABLE = ["awaiting_review", "rejected", "skipped", "failed", "timeout", "rolled_back", "approved"];
const DELETABLE = ["awaiting_review", "rejected", "skipped", "failed", "timeout", "rolled_back", "applied"];

export function evolutionView(root, me, id, applyID) {
  if (me.level !== "full") { clear(root, h("p", { class: "muted" }, "The evolution review needs a full token.")); return () => {}; }
  if (applyID) return applyView(root, applyID);
  if (id) return runView(root, id);
  return listView(root);
}

function listView(root) {
  const q = new URLSearchParams(location.hash.split("?")[1] || "");
  const status = h("select", { id: "f-status", name: "status" }, STATUSES.map((s) => h("option", { value: s, selected: q.get("status") === s }, s || "any status")));
  const view = h("select", { id: "f-view", name: "view" }, h("option", { value: "" }, "current"), h("option", { value: "archived", selected: q.get("view") === "archived" }, "archived"));
  const filter = h("select", { id: "f-filter", name: "filter" }, ["", "auto", "observation"].map((f) => h("option", { value: f, selected: q.get("filter") === f }, f || "all runs")));
  const apply = () => {
    const p = new URLSearchParams();
    if (status.value) p.set("status", status.value);
    if (view.value) p.set("view", view.value);
    if (filter.value) p.set("filter", filter.value);
    location.hash = "#/evolution" + (p.toString() ? "?" + p : "");
  };
  [status, view, filter].forEach((s) => s.addEventListener("change", apply));
  const tbody = h("tbody");
  const foot = h("div", { class: "row" });
  const err = h("div");
  clear(root, h("h2", {}, "Evolution runs"),
    h("div", { class: "row filters" }, h("label", { for: "f-status" }, "Status"), status, h("label", { for: "f-view" }, "View"), view, h("label", { for: "f-filter" }, "Filter"), filter),
    err, h("div", { class: "table-scroll" }, h("table", { class: "runs stack" },
      h("thead", {}, h("tr", {}, ["Run", "Status", "Workspace", "Trigger", "Score", "Created"].map((c) => h("th", { scope: "col" }, c)))), tbody)), foot);
  let cursor = "";
  const base = () => {
    const p = new URLSearchParams({ limit: "25" });
    if (status.value) p.set("status", status.value);
    if (view.value) p.set("view", view.value);
    if (filter.value) p.set("filter", filter.value);
    return p;
  };
  const load = async (reset) => {
    const p = base();
    if (!reset && cursor) p.set("cursor", cursor);
    try {
      const r = await get("api/evolution/runs?" + p);
      if (reset) tbody.replaceChildren();
      for (const v of r.items) tbody.append(h("tr", { "data-run": v.id },
        td("Run", h("a", { href: "#/evolution/" + enc(v.id) }, v.id)), td("Status", badge(v.status)), td("Workspace", v.workspace),
        td("Trigger", v.trigger + (v.hint ? ": " + v.hint.slice(0, 60) : "")), td("Score", v.score ? String(v.score.avg) : ""), td("Created", when(v.created_at))));
      if (reset && !r.items.length) tbody.append(h("tr", {}, h("td", { colSpan: 6, class: "muted" }, "No runs.")));
      cursor = r.next_cursor;
      clear(foot, cursor ? h("button", { type: "button", onclick: () => load(false) }, "Next page") : null);
      clear(err);
    } catch (e) { clear(err, problemBox(e)); }
  };
  load(true);
  return onChange((evs) => { if (evs.some((e) => e.kind === "run")) load(true); });
}

function runView(root, id) {
  const err = h("div", { id: "run-error" });
  const body = h("div");
  clear(root, h("p", {}, h("a", { href: "#/evolution" }, "← all runs")), err, body);
  const act = async (what, fn) => {
    clear(err);
    try { await fn(); toast(what + " done"); await load(); }
    catch (e) { clear(err, problemBox(e)); }
  };
  // The hint outlives re-renders, so a live update never drops what is typed.
  const hint = h("input", { id: "review-hint", name: "hint", class: "wide", placeholder: "hint (reviewer hint on approve, new hint on retry)" });
  let shown = "";
  const load = async () => {
    let d;
    try { d = await get("api/evolution/runs/" + enc(id)); } catch (e) { clear(err, problemBox(e)); return; }
    // Re-render only when something shown changed: a re-render under the
    // reviewer's pointer would move the buttons.
    const sig = JSON.stringify([d.status, d.updated_at, d.applies.map((a) => [a.status, a.updated_at])]);
    if (sig === shown) return;
    shown = sig;
    const review = d.status === "awaiting_review";
    const actions = h("div", { class: "row actions" },
      review && h("button", { type: "button", id: "approve", onclick: () => act("approve", () => post(`api/evolution/runs/${enc(id)}/approve`, hint.value ? { reviewer_hint: hint.value } : {})) }, "Approve"),
      review && h("button", { type: "button", id: "reject", onclick: () => act("reject", () => post(`api/evolution/runs/${enc(id)}/reject`, {})) }, "Reject"),
      RETRYABLE.includes(d.status) && !d.archived_at && h("button", { type: "button", id: "retry", onclick: () => act("retry", () => post(`api/evolution/runs/${enc(id)}/retry`, { hint: hint.value })) }, "Retry"),
      DELETABLE.includes(d.status) && h("button", { type: "button", id: "delete", class: "danger", onclick: () => {
        if (confirm("Delete run " + id + " and its artifacts?")) act("delete", async () => { await call("api/evolution/runs/" + enc(id), { method: "DELETE" }); location.hash = "#/evolution"; });
      } }, "Delete"));
    const v = d.verdict;
    const s = d.score;
    clear(body,
      h("h2", {}, "Run ", d.id, " ", badge(d.status)),
      h("dl", { class: "facts" },
        fact("Workspace", d.workspace), fact("Trigger", d.trigger), fact("Hint", d.hint), fact("Reviewer hint", d.reviewer_hint),
        fact("Agent", d.agent), fact("Source", d.source_access), fact("Attempts", String(d.attempts)), fact("Reason", d.reason),
        fact("Approved by", d.approved_by), fact("Created", when(d.created_at)), fact("Updated", when(d.updated_at)),
        d.source_session && h("div", {}, h("dt", {}, "Session"), h("dd", {}, h("a", { href: `#/chat/${enc(d.workspace)}/${enc(d.source_session)}` }, d.source_session)))),
      (review || RETRYABLE.includes(d.status)) && h("div", { class: "row" }, h("label", { for: "review-hint" }, "Hint"), hint), actions,
      d.auto_apply && h("p", { class: "banner" }, `Auto apply (${d.auto_apply.level}): `, d.auto_apply.applied ? "applied " + (d.auto_apply.apply_status || "") : (d.auto_apply.reason || "in flight")),
      d.skip_reason && h("p", {}, "Skipped: " + d.skip_reason),
      d.patch && h("section", {}, h("h3", {}, "Rationale"), fold(d.patch.rationale, 8),
        h("h3", {}, "Test scenario"), h("p", {}, d.patch.test_scenario.description), fold(d.patch.test_scenario.message, 8)),
      d.dry_run && h("section", { id: "dry-run" }, h("h3", {}, "Dry-run reply"), d.dry_run.error ? h("p", { class: "problem" }, d.dry_run.error) : fold(d.dry_run.reply, 12)),
      d.patch_md && h("section", { id: "patch" }, h("h3", {}, "Patch against the live surface"), sideBySide(d.patch_md)),
      s && h("section", { id: "score" }, h("h3", {}, `Score ${s.avg} (${s.confidence})`),
        h("ul", {}, h("li", {}, `lint ${s.lint} · behavior ${s.behavior} · scope ${s.scope}`),
          Object.entries(s.checks || {}).map(([k, ok]) => h("li", {}, (ok ? "✓ " : "✗ ") + k))),
        s.notes && h("p", {}, s.notes)),
      v && h("section", { id: "verdict" }, h("h3", {}, "Verdict: ", v.passed ? "gates passed" : "gates failed" + (v.reason ? " (" + v.reason + ")" : "")),
        h("ul", {}, (v.gates || []).map((g) => h("li", {}, (g.passed ? "✓ " : "✗ ") + g.name + (g.reason ? ": " + g.reason : ""))))),
      (d.observation || d.has_observation) && h("section", { id: "observation" }, h("h3", {}, "Larger observation"), fold(d.observation || "(see the patch)", 10)),
      h("section", {}, h("h3", {}, "Applies"), d.applies.length ? h("ul", {}, d.applies.map((a) => h("li", {}, h("a", { href: "#/evolution/apply/" + enc(a.id) }, a.id), " ", badge(a.status), a.reason ? " " + a.reason : "", a.published ? " · " + a.published.join(", ") : ""))) : h("p", { class: "muted" }, "None.")),
      h("details", {}, h("summary", {}, `Log (${d.logs.length})`), h("ul", { class: "log" }, d.logs.map((l) => h("li", {}, when(l.at) + " " + (l.attempt ? `[${l.attempt}] ` : "") + l.msg)))));
  };
  load();
  return onChange((evs) => { if (evs.some((e) => (e.kind === "run" && e.id === id) || e.kind === "apply")) load(); });
}

function fact(k, v) { return v ? h("div", {}, h("dt", {}, k), h("dd", {}, v)) : null; }

function applyView(root, id) {
  const err = h("div", { id: "apply-error" });
  const body = h("div");
  const result = h("div", { id: "rollback-result" });
  clear(root, h("p", {}, h("a", { href: "#/evolution" }, "← all runs")), err, result, body);
  const rollback = async (force) => {
    clear(err); clear(result);
    try {
      const r = await post(`api/evolution/applies/${enc(id)}/rollback`, force ? { force: true } : {});
      clear(result, h("div", { class: "banner" }, h("strong", {}, "Rolled back. "),
        list("restored", r.restored), list("removed", r.removed), list("removed dirs", r.removedDirs), list("kept dirs (not empty)", r.keptDirs)));
      load();
    } catch (e) {
      const p = e.problem || {};
      const parts = [problemBox(e)];
      if (p.code === "conflict" && p.details && p.details.conflicts) {
        parts.push(h("ul", { id: "conflicts" }, p.details.conflicts.map((c) => h("li", {}, c.rel + ": " + c.reason))),
          h("button", { type: "button", id: "force-rollback", class: "danger", onclick: () => rollback(true) }, "Force the rollback"));
      }
      if (p.code === "backup_mismatch" && p.details) parts.push(h("p", {}, "Backup does not match: " + JSON.stringify(p.details.files || p.details)));
      clear(err, parts);
    }
  };
  let shown = "";
  const load = async () => {
    let a;
    try { a = await get("api/evolution/applies/" + enc(id)); } catch (e) { clear(err, problemBox(e)); return; }
    const sig = JSON.stringify([a.status, a.updated_at]);
    if (sig === shown) return;
    shown = sig;
    const m = a.manifest;
    clear(body, h("h2", {}, "Apply ", a.id, " ", badge(a.status)),
      h("dl", { class: "facts" }, fact("Workspace", a.workspace), fact("Approved by", a.approved_by), fact("Level", a.level),
        fact("Reason", a.reason || a.failure_reason), fact("Applied", when(a.applied_at)), fact("Attempts", String(a.attempts))),
      h("p", {}, "Runs: ", a.runs.map((r) => [h("a", { href: "#/evolution/" + enc(r.id) }, r.id), " ", badge(r.status), " "])),
      a.status === "applied" && h("button", { type: "button", id: "rollback", onclick: () => rollback(false) }, "Roll back"),
      h("h3", {}, "Published"), a.published.length ? h("ul", {}, a.published.map((p) => h("li", {}, p))) : h("p", { class: "muted" }, "Nothing yet."),
      m && h("section", { id: "manifest" }, h("h3", {}, `Manifest (attempt ${m.attempt}, ${m.overwrites} overwritten, ${m.new} new)`),
        h("ul", {}, (m.files || []).map((f) => h("li", {}, h("strong", {}, f.rel), ` — ${f.kind}${f.unchanged ? " (unchanged)" : ""}`,
          h("span", { class: "muted" }, ` before ${f.before ? f.before.slice(0, 12) : "none"}, after ${f.after ? f.after.slice(0, 12) : "none"}`)))),
        m.created_dirs && m.created_dirs.length ? list("created dirs", m.created_dirs) : null),
      a.rollback && h("section", {}, h("h3", {}, "Rollback"), h("pre", {}, JSON.stringify(a.rollback, null, 2))),
      a.observation && h("section", {}, h("h3", {}, "Observation"), fold(a.observation)));
  };
  load();
  return onChange((evs) => { if (evs.some((e) => (e.kind === "apply" || e.kind === "apply_rollback") && (e.id === id || e.kind === "apply_rollback"))) load(); });
}

function list(label, xs) { return xs && xs.length ? h("div", {}, label + ": " + xs.join(", ")) : null; }
