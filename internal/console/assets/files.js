// files.js: the effective surface of a workspace and editing one file with
// If-Match, so a concurrent change is refused (412) and shown, never overwritten.
import { h, paged, clear, when, problemBox, toast } from "./dom.js";
import { get, call, enc, encPath } from "./api.js";

export function filesView(root, me, ws, path) {
  const side = h("aside", { class: "side", "aria-label": "Surface" });
  const pane = h("section", { class: "pane", "aria-label": "File" });
  clear(root, h("div", { class: "split" }, side, pane));
  const loadSide = async () => {
    let wss = [];
    try { wss = (await get("api/workspaces")).items; } catch (e) { clear(side, problemBox(e)); return; }
    const choose = h("select", { id: "files-ws", onchange: (ev) => { location.hash = "#/files/" + enc(ev.target.value); } },
      h("option", { value: "" }, "choose…"), me.level === "full" && h("option", { value: "global", selected: ws === "global" }, "global (inherited by all)"),
      wss.map((w) => h("option", { value: w.name, selected: w.name === ws }, w.name)));
    const parts = [h("label", { for: "files-ws" }, "Workspace"), choose];
    if (ws) {
      try {
        const files = (await get("api/workspaces/" + enc(ws) + "/files")).items;
        const ul = h("ul", { class: "list", "aria-label": "Files" }), more = h("div");
        paged(ul, files, (f) => h("li", {},
          h("a", { href: `#/files/${enc(ws)}/${encPath(f.path)}`, "aria-current": f.path === path ? "page" : null }, f.path),
          " ", h("span", { class: "scope scope-" + f.scope }, f.scope), h("span", { class: "muted" }, ` ${f.size} B`)), 50, more, "files");
        parts.push(ul, more);
        if (!files.length) parts.push(h("p", { class: "muted" }, "No files."));
        if (me.level === "full") {
          const np = h("input", { id: "new-file", placeholder: "path/to/NEW.md", "aria-label": "New file path" });
          parts.push(h("form", { class: "row", onsubmit: (ev) => { ev.preventDefault(); if (np.value) location.hash = `#/files/${enc(ws)}/${encPath(np.value)}?new=1`; } },
            np, h("button", { type: "submit" }, "New file")));
        }
      } catch (e) { parts.push(problemBox(e)); }
    }
    clear(side, parts);
  };
  const loadPane = async () => {
    if (!ws || !path) { clear(pane, h("p", { class: "muted" }, "Choose a file.")); return; }
    const isNew = /[?&]new=1/.test(location.hash);
    let text = "", etag = "", scope = ws === "global" ? "global" : "workspace", meta = null;
    const err = h("div", { id: "file-error" });
    if (!isNew) {
      try {
        const r = await call(`api/workspaces/${enc(ws)}/files/${encPath(path)}`);
        text = r.data; etag = r.headers.get("ETag") || ""; scope = r.headers.get("X-Molt-Scope") || scope;
        meta = r.headers.get("Last-Modified");
      } catch (e) { clear(pane, problemBox(e)); return; }
    }
    const inherited = ws !== "global" && scope === "global";
    const area = h("textarea", { id: "file-content", rows: 20, value: text, readOnly: me.level !== "full", spellcheck: false, "aria-label": "Content of " + path });
    const save = async () => {
      clear(err);
      const headers = {};
      // An inherited file is not the workspace's own: saving it creates an override.
      if (isNew || inherited) headers["If-None-Match"] = "*"; else headers["If-Match"] = etag;
      try {
        const r = await call(`api/workspaces/${enc(ws)}/files/${encPath(path)}`, { method: "PUT", body: area.value, headers: { ...headers, "Content-Type": "text/plain; charset=utf-8" } });
        etag = r.headers.get("ETag") || etag;
        toast("saved " + path);
        if (isNew || inherited) location.hash = `#/files/${enc(ws)}/${encPath(path)}`; else loadSide();
      } catch (e) {
        clear(err, problemBox(e), e.status === 412 && h("p", {}, "The file changed since you opened it; your text is kept here and nothing was written. ",
          h("button", { type: "button", onclick: loadPane }, "Reload the stored version")));
      }
    };
    const del = async () => {
      if (!confirm("Delete " + path + "?")) return;
      try { await call(`api/workspaces/${enc(ws)}/files/${encPath(path)}`, { method: "DELETE", headers: { "If-Match": etag } }); location.hash = "#/files/" + enc(ws); }
      catch (e) { clear(err, problemBox(e)); }
    };
    clear(pane, h("h2", {}, path, " ", h("span", { class: "scope scope-" + scope }, scope)),
      inherited && h("p", { class: "banner" }, "Inherited from the global surface: saving creates this workspace's own copy."),
      meta && h("p", { class: "muted" }, "modified " + when(meta)),
      h("label", { for: "file-content", class: "sr" }, "Content"), area, err,
      me.level === "full" && h("div", { class: "row" }, h("button", { type: "button", id: "save-file", onclick: save }, isNew ? "Create" : inherited ? "Override" : "Save"),
        !isNew && !inherited && h("button", { type: "button", class: "danger", onclick: del }, "Delete")));
  };
  loadSide(); loadPane();
  return () => {};
}
