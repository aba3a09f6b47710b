// client.mjs drives one molt A2A agent with the official @a2a-js/sdk client
// (A2A v1.0 on the wire). internal/a2a's TestJSSDKInterop runs it:
//
//	MOLT_API=http://127.0.0.1:PORT MOLT_AGENT=acme/main MOLT_TOKEN=… node client.mjs
//
// The server holds the first task it runs until the script has canceled it
// (the Go test's hook), so cancel of a running task is deterministic. Each
// check prints one line ("ok NAME" or "FAIL NAME: why"); the exit status is
// non-zero if any failed.
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, DefaultAgentCardResolver, createAuthenticatingFetchWithRetry } from "@a2a-js/sdk/client";
import { TaskNotCancelableError, TaskNotFoundError } from "@a2a-js/sdk/errors";

// Enum values of the SDK's generated types (not exported by name).
const ROLE_USER = 1, ROLE_AGENT = 2;
const SUBMITTED = 1, WORKING = 2, COMPLETED = 3, CANCELED = 5;

const api = process.env.MOLT_API, agent = process.env.MOLT_AGENT, token = process.env.MOLT_TOKEN;
if (!api || !agent || !token) {
  console.error("MOLT_API, MOLT_AGENT and MOLT_TOKEN are required");
  process.exit(2);
}
const base = `${api}/a2a/${agent}`;

let failed = 0;
function check(name, ok, why) {
  if (ok) console.log(`ok ${name}`);
  else { failed++; console.log(`FAIL ${name}: ${why}`); }
  return ok;
}
const j = (v) => JSON.stringify(v, (_, x) => (typeof x === "bigint" ? String(x) : x));

const authFetch = createAuthenticatingFetchWithRetry(fetch, {
  headers: async () => ({ Authorization: `Bearer ${token}` }),
  shouldRetryWithHeaders: async () => undefined,
});
const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
  transports: [new JsonRpcTransportFactory({ fetchImpl: authFetch })],
  cardResolver: new DefaultAgentCardResolver({ fetchImpl: authFetch }),
}));

const msg = (text, extra = {}) => ({
  messageId: crypto.randomUUID(), role: ROLE_USER,
  parts: [{ content: { $case: "text", value: text } }], ...extra,
});
const text = (parts) => (parts ?? []).map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function poll(client, id, until) {
  for (let i = 0; i < 200; i++) {
    const t = await client.getTask({ id });
    if (until(t.status?.state)) return t;
    await sleep(25);
  }
  throw new Error(`task ${id} never reached the state awaited`);
}

async function main() {
  // The card, resolved from the agent's base URL alone (the SDK resolves
  // ".well-known/agent-card.json" against it, so the base's last segment
  // is replaced unless it ends in "/": both forms must work).
  const client = await factory.createFromUrl(base);
  const card = await client.getAgentCard();
  check("card", card.name && card.capabilities?.streaming === true && card.supportedInterfaces?.length > 0 &&
    card.securitySchemes?.bearer, j(card));
  const slashed = await factory.createFromUrl(base + "/");
  check("card from base/", (await slashed.getAgentCard()).name === card.name, "another card");

  // Cancel of a running task: the server holds the first task it runs.
  let held = await client.sendMessage({ message: msg("hold"), configuration: { returnImmediately: true } });
  check("non-blocking send", held.id && (held.status?.state === SUBMITTED || held.status?.state === WORKING), j(held));
  held = await poll(client, held.id, (s) => s === WORKING);
  const sub = client.resubscribeTask({ id: held.id });
  const first = await sub.next();
  check("subscribe: the task first", first.value?.payload?.$case === "task" && first.value.payload.value.id === held.id, j(first.value));
  const canceled = await client.cancelTask({ id: held.id });
  check("cancel running", canceled.status?.state === CANCELED, j(canceled));
  let lastEv;
  for await (const ev of sub) lastEv = ev;
  check("subscribe: ends canceled", lastEv?.payload?.$case === "statusUpdate" && lastEv.payload.value.status?.state === CANCELED, j(lastEv));

  // Blocking send: completed, the reply as status message and artifact.
  const done = await client.sendMessage({ message: msg("hello") });
  check("blocking send", done.status?.state === COMPLETED && done.status.message?.role === ROLE_AGENT &&
    done.artifacts?.length === 1 && text(done.artifacts[0].parts) !== "", j(done));

  // Get with history: the caller's message and the reply; 1 → the reply.
  const got = await client.getTask({ id: done.id });
  check("get with history", got.history?.length === 2 && text(got.history[0].parts) === "hello" && got.history[1].role === ROLE_AGENT, j(got));
  const one = await client.getTask({ id: done.id, historyLength: 1 });
  check("get historyLength 1", one.history?.length === 1 && one.history[0].role === ROLE_AGENT, j(one));
  try {
    await client.getTask({ id: "no-such-task" });
    check("get unknown", false, "no error");
  } catch (e) {
    check("get unknown", e instanceof TaskNotFoundError, `${e?.constructor?.name}: ${e?.message}`);
  }

  // A second, non-blocking task in the same context, polled to the end.
  const next = await client.sendMessage({ message: msg("again", { contextId: done.contextId }), configuration: { returnImmediately: true } });
  check("non-blocking send in context", next.contextId === done.contextId && next.id !== done.id, j(next));
  const polled = await poll(client, next.id, (s) => s === COMPLETED);
  check("poll to completed", text(polled.status?.message?.parts) !== "", j(polled));

  // List: the context's tasks newest first; the agent's, paged.
  const list = await client.listTasks({ contextId: done.contextId });
  check("list context", list.tasks?.length === 2 && list.tasks[0].id === next.id && list.tasks[1].id === done.id, j(list));
  const page = await client.listTasks({ pageSize: 1 });
  check("list paged", page.tasks?.length === 1 && page.nextPageToken !== "", j(page));
  const page2 = await client.listTasks({ pageSize: 1, pageToken: page.nextPageToken });
  check("list page 2", page2.tasks?.length === 1 && page2.tasks[0].id !== page.tasks[0].id, j(page2));

  try {
    await client.cancelTask({ id: done.id });
    check("cancel completed", false, "no error");
  } catch (e) {
    check("cancel completed", e instanceof TaskNotCancelableError, `${e?.constructor?.name}: ${e?.message}`);
  }

  // Streaming: the task, then events up to the final status, with the artifact.
  const cases = [];
  let final;
  for await (const ev of client.sendMessageStream({ message: msg("stream me") })) {
    cases.push(ev.payload?.$case);
    if (ev.payload?.$case === "statusUpdate") final = ev.payload.value.status?.state;
  }
  check("stream", cases[0] === "task" && cases.includes("artifactUpdate") && cases.at(-1) === "statusUpdate" && final === COMPLETED, j(cases));
}

main().then(
  () => process.exit(failed ? 1 : 0),
  (e) => { console.log(`FAIL error: ${e?.stack ?? e}`); process.exit(1); },
);
