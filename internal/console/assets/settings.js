// settings.js: the settings form. Each validation error is shown beside the
// field the problem names; the update is sent with If-Match of the revision read,
// so a concurrent change is a 409 (settings_changed) rather than lost.
import { h, clear, problemBox, toast } from "./dom.js";
import { call } from "./api.js";

const FIELDS = [
  ["general.language", "Language (BCP-47)", "text"],
  ["evolution.level", "Evolution level", ["L0", "L1", "L2", "L3"]],
  ["evolution.auto_apply_threshold", "Auto-apply threshold", "number"],
  ["evolution.max_concurrent_run", "Concurrent runs", "number"],
  ["evolution.max_concurrent_apply", "Concurrent applies", "number"],
  ["evolution.run_timeout_minutes", "Run timeout (minutes)", "number"],
  ["evolution.apply_timeout_minutes", "Apply timeout (minutes)", "number"],
  ["evolution.max_attempts", "Max attempts", "number"],
  ["evolution.heartbeat_seconds", "Heartbeat (seconds)", "number"],
  ["evolution.triggers.pre_compact", "Evolve before compaction", "checkbox"],
];

const getPath = (o, p) => p.split(".").reduce((a, k) => (a == null ? a : a[k]), o);
function setPath(o, p, v) { const ks = p.split("."); let a = o; for (const k of ks.slice(0, -1)) a = a[k] ??= {}; a[ks.at(-1)] = v; }

export function settingsView(root, me) {
  const load = async () => {
    let r;
    try { r = await call("api/settings"); } catch (e) { clear(root, problemBox(e)); return; }
    const doc = r.data, etag = r.headers.get("ETag");
    const inputs = {}, errs = {};
    const top = h("div", { id: "settings-error" });
    const rows = FIELDS.map(([path, label, type]) => {
      const id = "set-" + path.replace(/\./g, "-");
      const v = getPath(doc, path);
      let input;
      if (Array.isArray(type)) input = h("select", { id, name: path }, type.map((o) => h("option", { value: o, selected: v === o }, o)));
      else if (type === "checkbox") input = h("input", { id, name: path, type: "checkbox", checked: !!v });
      else input = h("input", { id, name: path, type, value: v ?? "" });
      input.disabled = me.level !== "full";
      inputs[path] = input;
      errs[path] = h("span", { class: "field-error", id: id + "-error", "aria-live": "polite" });
      input.setAttribute("aria-describedby", id + "-error");
      return h("div", { class: "field" }, h("label", { for: id }, label), input, errs[path]);
    });
    const form = h("form", { class: "settings", onsubmit: async (ev) => {
      ev.preventDefault();
      clear(top); Object.values(errs).forEach((e) => clear(e));
      const out = {};
      for (const [path, , type] of FIELDS) {
        const el = inputs[path];
        const v = type === "checkbox" ? el.checked : type === "number" ? (el.value === "" ? null : Number(el.value)) : el.value;
        if (v !== getPath(doc, path)) setPath(out, path, v);
      }
      try { await call("api/settings", { method: "PUT", json: out, headers: { "If-Match": etag } }); toast("settings saved"); load(); }
      catch (e) {
        const f = e.field && Object.keys(errs).find((p) => p === e.field || p.endsWith("." + e.field) || e.field.endsWith(p));
        if (f) { clear(errs[f], e.problem.detail || e.message); inputs[f].setAttribute("aria-invalid", "true"); inputs[f].focus(); }
        else clear(top, problemBox(e));
      }
    } }, rows, me.level === "full" && h("button", { type: "submit", id: "save-settings" }, "Save settings"));
    clear(root, h("h2", {}, "Settings"), top, form);
  };
  load();
  return () => {};
}
