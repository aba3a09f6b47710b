// chat.js: workspaces, their sessions and a session's messages.
import { h, clear, when, problemBox, fold, badge, paged } from "./dom.js";
import { get, post, call, enc } from "./api.js";
import { onChange } from "./feed.js";

export function chatView(root, me, ws, sid) {
  const side = h("aside", { class: "side", "aria-label": "Workspaces and sessions" });
  const pane = h("section", { class: "pane", "aria-label": "Conversation" });
  clear(root, h("div", { class: "split" }, side, pane));
  let stopped = false;
  const unsub = [];

  async function loadSide() {
    let wss;
    try { wss = (await get("api/workspaces")).items; } catch (e) { clear(side, problemBox(e)); return; }
    const items = [];
    if (me.level === "full") {
      const name = h("input", { id: "new-ws", name: "ws", placeholder: "new workspace", autocomplete: "off", required: true, pattern: "[a-z0-9][a-z0-9-]*" });
      const err = h("div");
      items.push(h("form", { class: "row", onsubmit: async (ev) => {
        ev.preventDefault();
        try { await call("api/workspaces/" + enc(name.value), { method: "PUT" }); location.hash = "#/chat/" + enc(name.value); }
        catch (e) { clear(err, problemBox(e)); }
      } }, h("label", { for: "new-ws", class: "sr" }, "New workspace name"), name, h("button", { type: "submit", id: "create-ws" }, "Create"), err));
    }
    const wsList = h("ul", { class: "list", "aria-label": "Workspaces" });
    const wsMore = h("div");
    // By name, so a reader finds one; the open workspace always on the first page.
    wss.sort((a, b) => (b.name === ws) - (a.name === ws) || a.name.localeCompare(b.name));
    paged(wsList, wss, (w) => h("li", {}, h("a", { href: "#/chat/" + enc(w.name), "aria-current": w.name === ws ? "page" : null, class: "ws-link" }, w.name)), 20, wsMore, "workspaces");
    items.push(wsList, wsMore);
    if (!wss.length) items.push(h("p", { class: "muted" }, "No workspace yet."));
    if (ws) items.push(await sessionsBlock());
    clear(side, items);
  }

  async function sessionsBlock() {
    const box = h("div", { class: "sessions" }, h("h2", {}, "Sessions in " + ws));
    if (me.level !== "readonly") {
      const err = h("div");
      box.append(h("button", { type: "button", id: "new-session", onclick: async () => {
        try { const s = await post("api/workspaces/" + enc(ws) + "/sessions", {}); location.hash = "#/chat/" + enc(ws) + "/" + enc(s.id); }
        catch (e) { clear(err, problemBox(e)); }
      } }, "New session"), err);
    }
    try {
      const list = h("ul", { class: "list", "aria-label": "Sessions" });
      box.append(list);
      let cursor = "";
      const more = async () => {
        const p = await get("api/workspaces/" + enc(ws) + "/sessions?limit=50" + (cursor ? "&cursor=" + enc(cursor) : ""));
        for (const s of p.items) list.append(h("li", {}, h("a", { href: "#/chat/" + enc(ws) + "/" + enc(s.id), "aria-current": s.id === sid ? "page" : null },
          s.title || "untitled " + s.id.slice(-6), h("span", { class: "muted" }, ` · ${s.message_count} msgs`))));
        cursor = p.next_cursor;
        if (cursor) list.append(h("li", {}, h("button", { type: "button", onclick: (ev) => { ev.target.parentNode.remove(); more(); } }, "More sessions")));
      };
      await more();
    } catch (e) { box.append(problemBox(e)); }
    return box;
  }

  async function loadPane() {
    if (!sid) { clear(pane, h("p", { class: "muted" }, ws ? "Open or start a session." : "Choose a workspace.")); return; }
    let sess;
    try { sess = await get("api/sessions/" + enc(sid)); } catch (e) { clear(pane, problemBox(e)); return; }
    const log = h("ol", { class: "messages", "aria-label": "Messages", "aria-live": "polite" });
    const state = h("div", { class: "turn-state", id: "turn-state", "aria-live": "polite" });
    const err = h("div", { id: "chat-error" });
    let after = 0;
    let pending = null; // {kind, id}
    const title = h("input", { id: "session-title", value: sess.title || "", "aria-label": "Session title", placeholder: "untitled session", readOnly: me.level === "readonly" });
    const head = h("div", { class: "row" }, title,
      me.level !== "readonly" && h("button", { type: "button", onclick: async () => {
        try { await call("api/sessions/" + enc(sid), { method: "PATCH", json: { title: title.value } }); loadSide(); }
        catch (e) { clear(err, problemBox(e)); }
      } }, "Rename"),
      h("span", { class: "muted" }, `agent ${sess.agent} · ${sess.access}` + (sess.title_source ? ` · title ${sess.title_source}` : "")));

    // A long session shows its last PAGE messages; "Show earlier" adds a page.
    const earlier = h("div", { class: "row" });
    let shown = PAGE, loaded = false;
    const trim = () => {
      const kids = [...log.children];
      const hide = Math.max(0, kids.length - shown);
      kids.forEach((k, i) => { k.hidden = i < hide; });
      clear(earlier, hide > 0 && h("button", { type: "button", id: "earlier", onclick: () => { shown += PAGE; trim(); } },
        `Show ${Math.min(hide, PAGE)} earlier messages (${hide} hidden)`));
    };
    const fetchMessages = async () => {
      for (;;) {
        const p = await get(`api/sessions/${enc(sid)}/messages?after=${after}&limit=100`);
        for (const m of p.items) log.append(message(m));
        if (loaded) shown += p.items.length; // new messages do not hide older shown ones
        after = p.next_after;
        if (p.items.length < 100) break;
      }
      loaded = true;
      trim();
      log.lastElementChild?.scrollIntoView({ block: "nearest" });
    };
    const showTurn = async () => {
      if (!pending) return; // the last state stays shown
      try {
        if (pending.kind === "turn") {
          const t = await get("api/turns/" + enc(pending.id));
          clear(state, "turn ", badge(t.status), t.reason ? " " + t.reason : "", t.compacted ? " (compacted)" : "");
          if (!["pending", "running"].includes(t.status)) pending = null;
        } else {
          clear(state, "evolution run ", h("a", { href: "#/evolution/" + enc(pending.id) }, pending.id), " queued");
          pending = null;
        }
      } catch (e) { clear(state, problemBox(e)); pending = null; }
    };
    const text = h("textarea", { id: "chat-input", name: "text", rows: 3, required: true, placeholder: "Message, or /evo [hint], /compact" });
    const form = me.level === "readonly" ? h("p", { class: "muted" }, "Read-only token: posting is not allowed.") :
      h("form", { class: "compose", onsubmit: async (ev) => {
        ev.preventDefault();
        clear(err);
        try {
          const r = await post(`api/sessions/${enc(sid)}/messages`, { text: text.value });
          text.value = "";
          pending = r.turn ? { kind: "turn", id: r.turn.id } : { kind: "run", id: r.run.id };
          await fetchMessages(); await showTurn();
        } catch (e) { clear(err, problemBox(e)); }
      } }, h("label", { for: "chat-input", class: "sr" }, "Message"), text,
      h("div", { class: "row" }, h("button", { type: "submit", id: "send" }, "Send"),
        h("button", { type: "button", onclick: () => { text.value = "/compact"; form.requestSubmit(); } }, "Compact"),
        h("button", { type: "button", onclick: () => { text.value = "/evo " + text.value; text.focus(); } }, "/evo…")));
    text.addEventListener("keydown", (ev) => { if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) form.requestSubmit(); });
    clear(pane, head, earlier, log, state, err, form);
    try { await fetchMessages(); } catch (e) { clear(err, problemBox(e)); }
    unsub.push(onChange(async (evs) => {
      if (stopped) return;
      if (evs.some((e) => e.session_id === sid || (e.kind === "run" && e.workspace === ws))) {
        try { await fetchMessages(); await showTurn(); } catch (e) { clear(err, problemBox(e)); }
      }
    }));
  }

  // A turn that starts or ends changes a session's message count (and maybe its title).
  unsub.push(onChange((evs) => { if (!stopped && ws && evs.some((e) => e.workspace === ws && e.kind === "turn")) loadSide(); }));
  loadSide();
  loadPane();
  return () => { stopped = true; unsub.forEach((u) => u()); };
}

const PAGE = 100;

function message(m) {
  return h("li", { class: "msg role-" + m.role, "data-seq": m.seq },
    h("div", { class: "meta" }, h("span", { class: "role" }, m.role), " · #" + m.seq + " · " + when(m.created_at)),
    fold(m.text, 20),
    m.tool_calls && h("details", {}, h("summary", {}, "tool calls"), h("pre", {}, JSON.stringify(m.tool_calls, null, 2))),
    m.tool_results && h("details", {}, h("summary", {}, "tool results"), h("pre", {}, JSON.stringify(m.tool_results, null, 2))));
}
