// feed.js: the change feed. One poll of GET /api/changes?after=<cursor> a second
// while the tab is visible; every view subscribes and refreshes what an event
// names. The server re-sends a short window before the cursor (an index may lag a
// write), so events are de-duplicated here by kind, id and update time.
import { call } from "./api.js";

const listeners = new Set();
const seen = new Map(); // "kind/id" -> updated_at
let cursor = "";
let timer = null;
let running = false;
let failures = 0;

export function onChange(fn) { listeners.add(fn); return () => listeners.delete(fn); }

function setLive(text, ok) {
  const el = document.getElementById("live");
  if (!el) return;
  el.textContent = text;
  el.classList.toggle("off", !ok);
}

async function poll() {
  timer = null;
  if (!running) return;
  if (document.hidden) { schedule(1000); return; }
  try {
    const r = await call("api/changes" + (cursor ? "?after=" + encodeURIComponent(cursor) : ""));
    const first = cursor === "";
    cursor = r.data.cursor || cursor;
    const fresh = [];
    for (const ev of r.data.events || []) {
      const k = ev.kind + "/" + ev.id;
      if (seen.get(k) === ev.updated_at) continue;
      seen.set(k, ev.updated_at);
      if (!first) fresh.push(ev);
    }
    if (seen.size > 5000) seen.clear();
    failures = 0;
    setLive("live", true);
    if (fresh.length) for (const fn of listeners) { try { fn(fresh); } catch (e) { console.error(e); } }
  } catch (e) {
    failures++;
    setLive("offline", false);
    if (e.status === 401) { stop(); return; }
  }
  schedule(failures ? Math.min(1000 * 2 ** failures, 15000) : 1000);
}

function schedule(ms) { if (running && !timer) timer = setTimeout(poll, ms); }

export function start() { if (running) return; running = true; cursor = ""; seen.clear(); poll(); }
export function stop() { running = false; if (timer) clearTimeout(timer); timer = null; setLive("", true); }
