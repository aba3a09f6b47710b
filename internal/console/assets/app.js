// app.js: the console's entry: sign-in, the tabs and the hash router.
//
// Routes (location.hash; the token is never part of it):
//   #/chat[/<ws>[/<session>]]   #/evolution[?filters]  #/evolution/<run>
//   #/evolution/apply/<apply>   #/files[/<ws>[/<path…>]]   #/settings   #/tokens
import { h, clear, problemBox, untoast } from "./dom.js";
import { get, token, setToken, forget } from "./api.js";
import * as feed from "./feed.js";
import { chatView } from "./chat.js";
import { evolutionView } from "./evo.js";
import { filesView } from "./files.js";
import { settingsView } from "./settings.js";
import { tokensView } from "./tokens.js";

// FULL_ONLY are the tabs a workspace or readonly token is not shown.
const FULL_ONLY = ["evolution", "settings", "tokens"];

const main = document.getElementById("main");
let me = null;
let teardown = () => {};

function signInView(err) {
  feed.stop();
  document.getElementById("tabs").hidden = true;
  document.getElementById("who").hidden = true;
  const input = h("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true, spellcheck: false });
  clear(main, h("form", { class: "signin", id: "signin", onsubmit: async (ev) => {
    ev.preventDefault();
    setToken(input.value.trim());
    await boot();
  } }, h("h2", {}, "Sign in"),
  h("label", { for: "token" }, "Bearer token"), input,
  h("p", { class: "muted" }, "Kept in this tab's session storage only, and sent as an Authorization header."),
  h("button", { type: "submit", id: "signin-submit" }, "Sign in"), problemBox(err)));
  input.focus();
}

async function boot() {
  if (!token()) { signInView(); return; }
  try { me = await get("api/me", { onUnauthorized: false }); }
  catch (e) { forget(); signInView(e); return; }
  document.getElementById("whoami").textContent = me.level + (me.workspace ? " · " + me.workspace : "") + (me.name ? " · " + me.name : "");
  document.getElementById("tabs").hidden = false;
  document.getElementById("who").hidden = false;
  for (const a of document.querySelectorAll("#tabs a")) a.hidden = FULL_ONLY.includes(a.dataset.tab) && me.level !== "full";
  feed.start();
  route();
}

function route() {
  if (!me) return;
  teardown();
  untoast();
  const [path] = location.hash.replace(/^#\/?/, "").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const tab = parts[0] || "chat";
  for (const a of document.querySelectorAll("#tabs a")) a.setAttribute("aria-current", a.dataset.tab === tab ? "page" : "false");
  let ws = parts[1];
  if (!ws && me.workspace && (tab === "chat" || tab === "files")) ws = me.workspace;
  switch (tab) {
    case "evolution": teardown = parts[1] === "apply" ? evolutionView(main, me, null, parts[2]) : evolutionView(main, me, parts[1]); break;
    case "files": teardown = filesView(main, me, ws, parts.slice(2).join("/")); break;
    case "settings": teardown = settingsView(main, me); break;
    case "tokens": teardown = tokensView(main, me); break;
    default: teardown = chatView(main, me, ws, parts[2]);
  }
  teardown = teardown || (() => {});
}

document.getElementById("signout").addEventListener("click", () => {
  forget(); me = null; teardown(); teardown = () => {}; location.hash = ""; signInView();
});
window.addEventListener("hashchange", route);
window.addEventListener("molt:unauthorized", () => { forget(); me = null; signInView({ problem: { status: 401, code: "unauthorized", detail: "the token was refused; sign in again" } }); });
boot();
