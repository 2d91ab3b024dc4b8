// Unit tests: no server. The wire parts (group bodies, event decoding,
// ids, ranges) and the retry rule (a timed-out command is asked again with
// the same id) over a stand-in connection.
import { test } from "node:test";
import assert from "node:assert/strict";
import { encode } from "@msgpack/msgpack";
import { ErrorCode } from "nats";
import { Client, TidemarkError, expandMessage, splitGroup, newId, rangeText, rangeOf, subjectMatches, GROUP_SUBJECT } from "../index.js";

function uvarint(n) {
  const out = [];
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}

function group(parts) {
  const bytes = [...uvarint(parts.length)];
  for (const p of parts) bytes.push(...uvarint(p.length), ...p);
  return Uint8Array.from(bytes);
}

const at = new Date("2026-12-01T11:00:05Z");
const completed = (i) =>
  encode({
    id: `01KBC5Y3ZP8V3M1Q2R4S5T6V${String(i).padStart(2, "0")}`,
    type: "IntervalsCompleted",
    schema: 1,
    at,
    data: { snapshot: `m${i}@v1`, table: `m${i}@v1`, ranges: [[1796119200, 1796122800]], run_kind: "scheduled" },
  });

test("a group message expands into its events, each at its address and on its own subject", () => {
  const recs = expandMessage(7, GROUP_SUBJECT, group([completed(0), completed(1), completed(2)]));
  assert.equal(recs.length, 3);
  recs.forEach((r, i) => {
    assert.equal(r.error, undefined);
    assert.equal(r.seq, 7);
    assert.equal(r.index, i);
    assert.equal(r.count, 3);
    assert.equal(r.subject, `tidemark.evt.snap.m${i}.v1`);
    assert.equal(r.type, "IntervalsCompleted");
    assert.deepEqual(r.at, at);
    assert.deepEqual(rangeOf(r.data.ranges[0]), { start: new Date("2026-12-01T10:00:00Z"), end: new Date("2026-12-01T11:00:00Z") });
  });
});

test("an event stored on its own is one record at index 0", () => {
  const recs = expandMessage(3, "tidemark.evt.snap.m1.v1", completed(1));
  assert.equal(recs.length, 1);
  assert.equal(recs[0].index, 0);
  assert.equal(recs[0].count, 0);
  assert.equal(recs[0].error, undefined);
  const foreign = expandMessage(3, "tidemark.evt.snap.other.v1", completed(1));
  assert.equal(foreign[0].error?.kind, "foreign");
});

test("malformed group bodies are one undecodable record; a bad event inside is one at its address", () => {
  for (const body of [
    Uint8Array.of(0),
    Uint8Array.of(2, 1, 0x80),
    Uint8Array.from([...group([completed(0)]), 0]),
    Uint8Array.from(uvarint(1025)),
  ]) {
    assert.throws(() => splitGroup(body));
    const recs = expandMessage(9, GROUP_SUBJECT, body);
    assert.equal(recs.length, 1);
    assert.equal(recs[0].error?.kind, "malformed");
  }
  const recs = expandMessage(9, GROUP_SUBJECT, group([completed(0), Uint8Array.of(0x92, 1, 2), encode({ id: "x", type: "T", schema: 2, at, data: {} })]));
  assert.deepEqual(recs.map((r) => [r.index, r.count, r.error?.kind]), [[0, 3, undefined], [1, 3, "malformed"], [2, 3, "schema"]]);
});

test("ids are ULIDs; ranges and subjects", () => {
  const id = newId(Date.parse("2026-12-01T00:00:00Z"));
  assert.match(id, /^[0-9A-HJKMNP-TV-Z]{26}$/);
  assert.notEqual(newId(), newId());
  assert.equal(rangeText([new Date("2026-12-01T10:00:00Z"), new Date("2026-12-01T11:00:00Z")]), "2026-12-01T10:00:00Z/2026-12-01T11:00:00Z");
  assert.equal(rangeText({ start: 1796119200, end: 1796122800 }), "2026-12-01T10:00:00Z/2026-12-01T11:00:00Z");
  assert.ok(subjectMatches("tidemark.evt.snap.>", "tidemark.evt.snap.m.v1"));
  assert.ok(subjectMatches("tidemark.evt.*.m.v1", "tidemark.evt.snap.m.v1"));
  assert.ok(!subjectMatches("tidemark.evt.plan.>", "tidemark.evt.snap.m.v1"));
  assert.ok(!subjectMatches("tidemark.evt.snap", "tidemark.evt.snap.m.v1"));
});

// A stand-in connection: answers request() from a script.
function fakeConn(script) {
  const sent = [];
  return {
    sent,
    async request(subject, data, opts) {
      sent.push({ subject, body: JSON.parse(new TextDecoder().decode(data)), contentType: opts.headers.get("Content-Type") });
      const step = script[sent.length - 1];
      if (step instanceof Error) throw step;
      return { headers: undefined, data: new TextEncoder().encode(JSON.stringify(step)) };
    },
  };
}
const natsError = (code) => Object.assign(new Error(code), { code });

test("a timed-out command is asked again with the same id", async () => {
  const nc = fakeConn([natsError(ErrorCode.Timeout), natsError(ErrorCode.Timeout), { accepted: true, seq: 12, events: 1 }]);
  const c = new Client(nc, { user: "service", actor: "test" });
  const r = await c.promote({ plan: "p1" });
  assert.equal(r.seq, 12);
  assert.equal(nc.sent.length, 3);
  assert.equal(nc.sent[0].subject, "tidemark.cmd.service.promote");
  assert.equal(nc.sent[0].contentType, "application/json");
  assert.match(nc.sent[0].body.id, /^[0-9A-Z]{26}$/);
  assert.ok(nc.sent.every((s) => s.body.id === nc.sent[0].body.id && s.body.plan === "p1" && s.body.actor === "test"));
  // The next command reads its own writes: after_seq is the seq seen.
  await assert.rejects(c.promote({ plan: "p2" }, { id: "mine" }));
  assert.equal(nc.sent[3].body.after_seq, 12);
  assert.equal(nc.sent[3].body.id, "mine");
});

test("retries run out: unavailable; a refusal is a TidemarkError with its code and field", async () => {
  const nc = fakeConn([natsError(ErrorCode.Timeout), natsError(ErrorCode.Timeout), { accepted: false, code: "invalid", field: "plan", message: "bad" }]);
  const c = new Client(nc, { retries: 1 });
  await assert.rejects(c.promote({ plan: "p1" }), (e) => e instanceof TidemarkError && e.code === "unavailable");
  await assert.rejects(c.promote({ plan: "p1" }), (e) => e instanceof TidemarkError && e.code === "invalid" && e.field === "plan" && e.reply.message === "bad");
  assert.equal(nc.sent[0].subject, "tidemark.cmd.promote");
});

test("while no service answers, a command is asked again with the same id; a query is not", async () => {
  const nc = fakeConn([natsError(ErrorCode.NoResponders), natsError(ErrorCode.NoResponders), { accepted: true, events: 1 }, natsError(ErrorCode.NoResponders)]);
  const c = new Client(nc, { noServiceWaitMs: 1000 });
  await c.buildPlan({ id: "from-body", plan: "p1", env: "prod", versions: { m: "v1" } });
  assert.equal(nc.sent.length, 3);
  assert.ok(nc.sent.every((s) => s.body.id === "from-body" && s.subject === "tidemark.cmd.build_plan"));
  await assert.rejects(c.status(), (e) => e instanceof TidemarkError && e.code === "unavailable");
  assert.equal(nc.sent.length, 4);
  assert.equal(nc.sent[3].body.id, undefined);
});
