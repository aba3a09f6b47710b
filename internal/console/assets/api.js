// api.js: the bearer token and calls to the UI API.
//
// The token lives in sessionStorage only: never a cookie (so no request carries it
// unless this code adds it) and never in a URL (so it is in no history, log or
// Referer). It goes away with the tab, or at sign-out.

const KEY = "molt.token";

export function token() { return sessionStorage.getItem(KEY) || ""; }
export function setToken(t) { sessionStorage.setItem(KEY, t); }
export function forget() { sessionStorage.removeItem(KEY); }

// ApiError is a failed call: status, and the problem document when there is one.
export class ApiError extends Error {
  constructor(status, problem) {
    super((problem && problem.detail) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || { status, code: "http_" + status };
  }
  get code() { return this.problem.code; }
  get field() { return this.problem.field; }
}

// base is the API's root relative to the page, so a stage prefix (/prod/) works.
const base = new URL(".", document.baseURI).pathname;

// call sends a request. opts: method, json (a body to send as JSON), body (raw
// text), headers. It resolves to {status, headers, data} (data is the parsed JSON
// or the text) and rejects with ApiError on any status >= 400.
export async function call(path, opts = {}) {
  const headers = new Headers(opts.headers || {});
  const t = token();
  if (t) headers.set("Authorization", "Bearer " + t);
  let body = opts.body;
  if (opts.json !== undefined) {
    headers.set("Content-Type", "application/json");
    body = JSON.stringify(opts.json);
  }
  const resp = await fetch(base + path.replace(/^\//, ""), {
    method: opts.method || "GET", headers, body, cache: "no-store", credentials: "omit",
    referrerPolicy: "no-referrer",
  });
  const ct = resp.headers.get("Content-Type") || "";
  let data = null;
  if (resp.status !== 204 && resp.status !== 304) {
    data = ct.includes("json") ? await resp.json().catch(() => null) : await resp.text();
  }
  if (resp.status >= 400) {
    const err = new ApiError(resp.status, ct.includes("problem+json") ? data : null);
    if (resp.status === 401 && opts.onUnauthorized !== false) window.dispatchEvent(new CustomEvent("molt:unauthorized"));
    throw err;
  }
  return { status: resp.status, headers: resp.headers, data };
}

export const get = (p, o) => call(p, o).then((r) => r.data);
export const post = (p, json, o = {}) => call(p, { ...o, method: "POST", json }).then((r) => r.data);
export const enc = encodeURIComponent;
// encPath encodes a file path segment by segment (slashes kept).
export const encPath = (p) => p.split("/").map(enc).join("/");
