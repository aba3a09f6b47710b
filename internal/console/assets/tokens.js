// tokens.js: the tokens of a full token: listed (id, level, workspace, name,
// created, last used, revoked), created and revoked. A secret is shown once, right
// after its token is created (the API never returns it again); revoking asks for a
// confirmation in the page first.
import { h, clear, when, problemBox, toast, paged, td } from "./dom.js";
import { get, post, call, enc } from "./api.js";

export function tokensView(root, me) {
  if (me.level !== "full") { clear(root, h("p", { class: "muted" }, "Tokens are managed with a full token.")); return () => {}; }
  const err = h("div", { id: "tokens-error" });
  const secret = h("div", { id: "new-token" });
  const listBox = h("div");
  const level = h("select", { id: "tok-level", name: "level" }, ["workspace", "readonly", "full"].map((l) => h("option", { value: l }, l)));
  const ws = h("input", { id: "tok-ws", name: "workspace", autocomplete: "off", placeholder: "acme" });
  const name = h("input", { id: "tok-name", name: "name", autocomplete: "off", placeholder: "ci, reviewer…" });
  const syncWS = () => { ws.disabled = level.value === "full"; ws.required = !ws.disabled; };
  level.addEventListener("change", syncWS);
  syncWS();
  const form = h("form", { class: "row token-form", onsubmit: async (ev) => {
    ev.preventDefault();
    clear(err); clear(secret);
    try {
      const t = await post("api/tokens", { level: level.value, workspace: ws.disabled ? "" : ws.value, name: name.value });
      // The one display of the secret; it is not kept anywhere but this element,
      // which the next action (or leaving the view) clears.
      const shown = h("input", { id: "new-token-secret", class: "secret", readOnly: true, value: t.secret, "data-token": t.id, spellcheck: false, "aria-label": "Secret of token " + t.id });
      clear(secret, h("div", { class: "banner", role: "status" },
        h("p", {}, h("strong", {}, `Token ${t.id} created. `), "Copy its secret now: it is shown only this once."),
        h("div", { class: "row" }, h("label", { for: "new-token-secret", class: "sr" }, "Secret"), shown,
          h("button", { type: "button", id: "copy-secret", onclick: async () => {
            try { await navigator.clipboard.writeText(shown.value); toast("secret copied"); } catch { shown.select(); toast("press Ctrl+C to copy"); }
          } }, "Copy"),
          h("button", { type: "button", id: "hide-secret", onclick: () => clear(secret) }, "Done"))));
      shown.focus(); shown.select();
      name.value = "";
      await load();
    } catch (e) { clear(err, problemBox(e)); }
  } }, h("label", { for: "tok-level" }, "Level"), level, h("label", { for: "tok-ws" }, "Workspace"), ws,
  h("label", { for: "tok-name" }, "Name"), name, h("button", { type: "submit", id: "create-token" }, "Create token"));

  const revoke = async (t, cell) => {
    clear(cell,
      h("span", {}, "Revoke " + t.id + "? "),
      h("button", { type: "button", class: "danger", id: "confirm-revoke", onclick: async () => {
        clear(err);
        try { await call("api/tokens/" + enc(t.id), { method: "DELETE" }); toast("revoked " + t.id); await load(); }
        catch (e) { clear(err, problemBox(e)); }
      } }, "Yes, revoke"), " ",
      h("button", { type: "button", id: "cancel-revoke", onclick: () => load() }, "Cancel"));
    cell.querySelector("#cancel-revoke").focus();
  };
  const row = (t) => {
    const cell = td("");
    const self = t.id === me.id;
    if (t.revoked_at) clear(cell, h("span", { class: "badge s-rolled_back" }, "revoked " + when(t.revoked_at)));
    else if (self) clear(cell, h("span", { class: "muted" }, "this session's token"));
    else clear(cell, h("button", { type: "button", class: "danger revoke", "aria-label": "Revoke token " + t.id, onclick: () => revoke(t, cell) }, "Revoke"));
    return h("tr", { "data-token": t.id, class: t.revoked_at ? "revoked" : null },
      td("Id", h("code", {}, t.id)), td("Level", t.level), td("Workspace", t.workspace || "—"), td("Name", t.name || ""),
      td("Created", when(t.created_at)), td("Last used", t.last_used_at ? when(t.last_used_at) : "never"), cell);
  };
  const load = async () => {
    let ts;
    try { ts = (await get("api/tokens")).tokens; } catch (e) { clear(listBox, problemBox(e)); return; }
    // Valid tokens first, the newest first; the revoked ones after them.
    ts.sort((a, b) => (!!a.revoked_at - !!b.revoked_at) || String(b.created_at).localeCompare(String(a.created_at)));
    const tbody = h("tbody");
    const foot = h("div", { class: "row" });
    clear(listBox, h("div", { class: "table-scroll" }, h("table", { class: "runs stack", id: "tokens-table" },
      h("caption", { class: "sr" }, "Tokens"),
      h("thead", {}, h("tr", {}, ["Id", "Level", "Workspace", "Name", "Created", "Last used", ""].map((c) => h("th", { scope: "col" }, c)))), tbody)), foot);
    paged(tbody, ts, row, 25, foot, "tokens");
  };
  clear(root, h("h2", {}, "Tokens"), h("h3", {}, "New token"), form, err, secret, h("h3", {}, "All tokens"), listBox);
  load();
  return () => clear(secret);
}
