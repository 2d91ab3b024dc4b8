// Against a real `tidemark serve` whose NATS URL is TIDEMARK_NATS_URL (the
// Go test cmd/tidemark TestNodeClient starts one and runs these). Skipped
// without it.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { Client, TidemarkError } from "../index.js";

const url = process.env.TIDEMARK_NATS_URL;
const skip = url ? false : "TIDEMARK_NATS_URL is not set (cmd/tidemark TestNodeClient sets it)";
const HOUR = 3600e3;
const start = new Date(Math.floor(Date.now() / HOUR) * HOUR - 4 * HOUR);
let c;

before(async () => {
  if (url) c = await Client.connect({ servers: url, actor: "node-test" });
});
after(async () => {
  await c?.close();
});

/** The events from seq `from` to the stream's end. */
async function read(from) {
  const out = [];
  for await (const r of c.events(from, { follow: false })) out.push(r);
  return out;
}

/** hours yields every hour in a "START/END" range. */
function* hours(text) {
  const [s, e] = text.split("/").map(Date.parse);
  for (let t = s; t < e; t += HOUR) yield [new Date(t), new Date(t + HOUR)];
}

test("refusals are TidemarkErrors naming the code and field; nothing is appended", { skip, timeout: 60_000 }, async () => {
  const before = (await c.status()).seq ?? 0;
  await assert.rejects(c.registerSnapshot({ model: "orders", version: "v+1", cron: "@hourly", start }), (e) => e instanceof TidemarkError && e.code === "invalid" && e.field === "version");
  await assert.rejects(c.registerSnapshot({ model: "orders", version: "v1", cron: "@hourly", start }, { id: "$tick:x" }), (e) => e instanceof TidemarkError && e.code === "invalid" && e.field === "id");
  await assert.rejects(c.command("register_snapshot", { model: "orders", version: "v1", cron: "@hourly", start, colour: "red" }), (e) => e instanceof TidemarkError && e.code === "malformed" && e.field === "colour");
  await assert.rejects(c.promote({ plan: "nope" }), (e) => e instanceof TidemarkError && e.code === "not_found" && e.field === "plan");
  assert.equal((await c.status()).seq ?? 0, before);
});

test("register, plan, complete, promote: accepted; the same id is applied once", { skip, timeout: 60_000 }, async () => {
  const reg = { model: "orders", version: "v1", cron: "@hourly", start };
  const first = await c.registerSnapshot(reg, { id: "node-register-orders-v1" });
  assert.equal(first.events, 1);
  const again = await c.registerSnapshot(reg, { id: "node-register-orders-v1" });
  assert.equal(again.duplicate, true);
  assert.equal(again.seq, first.seq);
  await assert.rejects(c.registerSnapshot({ ...reg, lookback: 2 }, { id: "node-register-orders-v1" }), (e) => e.code === "idempotency_conflict" && e.field === "id");

  const built = await c.buildPlan({ plan: "node-p1", env: "prod", versions: { orders: "v1" } });
  assert.equal(built.plan.plan, "node-p1");
  const [cand] = built.plan.candidates;
  assert.equal(cand.snapshot, "orders@v1");
  const rejected = await c.promote({ plan: "node-p1" });
  assert.equal(rejected.decision.outcome, "rejected");
  assert.deepEqual(rejected.decision.codes, ["missing_intervals"]);
  for (const r of cand.backfill) {
    for (const h of hours(r)) await c.completeIntervals({ model: "orders", version: "v1", ranges: [h], run_kind: "backfill", run_id: "backfill:node-p1" });
  }
  const promoted = await c.promote({ plan: "node-p1" });
  assert.equal(promoted.decision.outcome, "accepted", JSON.stringify(promoted.decision.findings));
  const st = await c.status({ env: "prod" });
  const [env] = st.envs;
  assert.equal(env.generation, 1);
  assert.equal(env.models[0].snapshot, "orders@v1");
  assert.equal(env.models[0].frontier, built.plan.end);

  const evs = await read(first.seq);
  assert.deepEqual(evs.filter((e) => e.subject === "tidemark.evt.plan.node-p1").map((e) => e.type), ["PlanBuilt", "PromotionDecided", "PromotionDecided"]);
  assert.equal(evs[0].type, "SnapshotRegistered");
  assert.equal(evs[0].causation, "node-register-orders-v1");
  assert.equal(evs[0].actor, "node-test");
  assert.deepEqual(evs[0].data.start, start);
});

test("events expand group messages: every event at its own address, in order", { skip, timeout: 60_000 }, async () => {
  // Concurrent completions of many models are stored as group messages:
  // rounds of them until one holds more than one event.
  const models = 32;
  for (let i = 0; i < models; i++) await c.registerSnapshot({ model: `g${i}`, version: "v1", cron: "@hourly", start });
  const from = c.seen + 1;
  let grouped = false;
  for (let round = 0; round < 4 && !grouped; round++) {
    const h = [new Date(start.getTime() + round * HOUR), new Date(start.getTime() + (round + 1) * HOUR)];
    const replies = await Promise.all(Array.from({ length: models }, (_, i) => c.completeIntervals({ model: `g${i}`, version: "v1", ranges: [h] })));
    assert.ok(replies.every((r) => r.accepted && r.events === 1));
    grouped = (await read(from)).some((r) => r.count > 1);
  }
  assert.ok(grouped, "no group message of more than one event formed");

  const all = await read(1);
  let prev = [0, -1];
  for (const r of all) {
    assert.equal(r.error, undefined, `(${r.seq}, ${r.index}): ${r.error?.message}`);
    assert.ok(r.seq > prev[0] || (r.seq === prev[0] && r.index === prev[1] + 1), `address (${r.seq}, ${r.index}) after (${prev[0]}, ${prev[1]})`);
    if (r.count > 0) assert.ok(r.index < r.count);
    else assert.equal(r.index, 0);
    assert.notEqual(r.subject, "tidemark.evt.group");
    prev = [r.seq, r.index];
  }
  const done = all.filter((r) => r.seq >= from && r.type === "IntervalsCompleted");
  assert.equal(new Set(done.map((r) => r.causation)).size, done.length);
  // Subject filters match each event by its own subject.
  const g0 = [];
  for await (const r of c.events(from, { follow: false, subjects: ["tidemark.evt.snap.g0.>"] })) g0.push(r);
  assert.ok(g0.length >= 1 && g0.every((r) => r.data.snapshot === "g0@v1"));
  // The Go test compares these addresses with eventlog's reading.
  if (process.env.TIDEMARK_NODE_EVENTS_OUT) {
    writeFileSync(process.env.TIDEMARK_NODE_EVENTS_OUT, all.map((r) => JSON.stringify({ seq: r.seq, index: r.index, count: r.count, subject: r.subject, id: r.id, type: r.type })).join("\n") + "\n");
  }
});

/** drain reads it up to the last event of the message at seq. */
async function drain(it, seq) {
  for (;;) {
    const { value } = await it.next();
    assert.ok(value.seq <= seq, `read ${value.seq}, past ${seq}`);
    if (value.seq === seq && (value.count === 0 || value.index === value.count - 1)) return;
  }
}

test("events follows the stream until the loop breaks", { skip, timeout: 60_000 }, async () => {
  // Read up to the last event first: the iteration then waits for new ones.
  const it = c.events(c.seen);
  await drain(it, c.seen);
  const next = it.next();
  const reg = await c.registerSnapshot({ model: "late", version: "v1", cron: "@hourly", start });
  const { value } = await next;
  assert.equal(value.seq, reg.seq);
  assert.equal(value.type, "SnapshotRegistered");
  await it.return();
});

// Under docs/auth.conf (TIDEMARK_AUTH_CONF=1): a service sends commands as
// the service role, a projection reads the stream as the auditor role, by
// direct gets (the auditor may create no consumer).
const roles = url && process.env.TIDEMARK_AUTH_CONF ? false : "serve does not run with docs/auth.conf";
const as = (role) => Client.connect({ servers: url.replace(/^nats:\/\/[^@]*@/, `nats://${role}:${role}-change-me@`) });

test("the service role sends commands; the auditor role reads every event by direct gets", { skip: skip || roles, timeout: 60_000 }, async () => {
  const svc = await as("service");
  const aud = await as("auditor");
  try {
    const reg = await svc.registerSnapshot({ model: "svc", version: "v1", cron: "@hourly", start });
    assert.equal(reg.events, 1);
    assert.equal((await svc.status()).accepted, true);

    const viaConsumer = await read(1);
    const viaDirect = [];
    for await (const r of aud.events(1, { follow: false, direct: true })) viaDirect.push(r);
    const addr = (r) => `${r.seq}:${r.index}/${r.count} ${r.subject} ${r.id} ${r.type}`;
    assert.deepEqual(viaDirect.map(addr), viaConsumer.map(addr));
    assert.ok(viaDirect.some((r) => r.count > 1));

    // Following by direct gets: the next event is found by polling.
    const ac = new AbortController();
    const it = aud.events(reg.seq, { direct: true, pollMs: 20, signal: ac.signal });
    await drain(it, reg.seq);
    const next = it.next();
    const later = await svc.registerSnapshot({ model: "svc", version: "v2", cron: "@hourly", start });
    const { value } = await next;
    assert.equal(value.seq, later.seq);
    assert.equal(value.data.snapshot, "svc@v2");
    const stopped = it.next();
    ac.abort();
    assert.deepEqual(await stopped, { value: undefined, done: true });
  } finally {
    await svc.close();
    await aud.close();
  }
});
