// @tidemark/client: a Node client for tidemark's wire contract
// (docs/events.md in the tidemark repository). Commands go as JSON NATS
// requests to the micro service `tidemark` (tidemark.cmd.[<user>.]<kind>);
// events are read from the JetStream stream TIDEMARK (msgpack), group
// messages expanded into their events, each with its address (seq, index).
//
// The types are in index.d.ts.

import { connect as natsConnect, headers as natsHeaders, DeliverPolicy, ErrorCode } from "nats";
import { decode } from "@msgpack/msgpack";
import { randomBytes } from "node:crypto";

/** The JetStream stream that holds every event. */
export const STREAM = "TIDEMARK";
/** The subject group messages are stored on. */
export const GROUP_SUBJECT = "tidemark.evt.group";
/** The most events one group message holds. */
export const MAX_GROUP_EVENTS = 1024;
/** The event schema version this client reads; a newer one is not decoded. */
export const SCHEMA = 1;

/** Command kinds that are queries: they append nothing and need no id. */
const QUERIES = new Set(["status", "open_repairs"]);

/** Reply codes a retry with the same id may clear. */
const TRANSIENT = new Set(["unavailable", "rate_limited"]);

/**
 * A command that tidemark refused (a Reply with accepted false), or a
 * transport failure (code "unavailable": no service answered in time; the
 * same id is safe to send again). `field` names the offending field.
 */
export class TidemarkError extends Error {
  /**
   * @param {string} code
   * @param {string} field
   * @param {string} message
   * @param {object} [reply]
   * @param {unknown} [cause]
   */
  constructor(code, field, message, reply, cause) {
    super(field ? `${code} on ${field}: ${message}` : `${code}: ${message}`, cause === undefined ? undefined : { cause });
    this.name = "TidemarkError";
    this.code = code;
    this.field = field || "";
    this.reply = reply;
  }
}

/**
 * An event that could not be decoded: a record's `error`. `kind` is
 * "malformed" (not msgpack, not a map, a bad group body), "schema" (a
 * newer schema than this client knows) or "foreign" (a well-formed event
 * stored on another subject).
 */
export class DecodeError extends Error {
  /** @param {string} kind @param {string} message */
  constructor(kind, message) {
    super(message);
    this.name = "DecodeError";
    this.kind = kind;
  }
}

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/**
 * newId returns a fresh ULID (26 characters of Crockford base32: a valid
 * command id). Ids starting with `$` are the engine's, never a client's.
 * @param {number} [now] milliseconds since the epoch
 * @returns {string}
 */
export function newId(now = Date.now()) {
  let out = "";
  let t = now;
  for (let i = 0; i < 10; i++) {
    out = CROCKFORD[t % 32] + out;
    t = Math.floor(t / 32);
  }
  const r = randomBytes(16);
  for (let i = 0; i < 16; i++) out += CROCKFORD[r[i] % 32];
  return out;
}

/**
 * rfc3339 formats a time for the JSON wire: RFC 3339 in UTC, without
 * fractional seconds when there are none.
 * @param {Date|string|number} t a Date, an RFC 3339 string (sent as is) or unix seconds
 * @returns {string}
 */
export function rfc3339(t) {
  if (typeof t === "string") return t;
  const d = typeof t === "number" ? new Date(t * 1000) : t;
  if (!(d instanceof Date) || Number.isNaN(d.getTime())) throw new TypeError(`not a time: ${String(t)}`);
  return d.toISOString().replace(".000Z", "Z");
}

/**
 * rangeText formats a range for the JSON wire: "START/END" (half-open).
 * @param {string | [Date|string|number, Date|string|number] | {start: Date|string|number, end: Date|string|number}} r
 * @returns {string}
 */
export function rangeText(r) {
  if (typeof r === "string") return r;
  if (Array.isArray(r) && r.length === 2) return `${rfc3339(r[0])}/${rfc3339(r[1])}`;
  if (r && typeof r === "object" && "start" in r && "end" in r) return `${rfc3339(r.start)}/${rfc3339(r.end)}`;
  throw new TypeError(`not a range: ${JSON.stringify(r)}`);
}

/**
 * rangeOf turns a range as events carry it (msgpack: [start, end] unix
 * seconds) or as JSON replies do ("START/END") into two Dates.
 * @param {[number|bigint, number|bigint] | string} r
 * @returns {{start: Date, end: Date}}
 */
export function rangeOf(r) {
  if (typeof r === "string") {
    const [s, e, extra] = r.split("/");
    if (e === undefined || extra !== undefined) throw new TypeError(`not a range: ${r}`);
    return { start: new Date(s), end: new Date(e) };
  }
  if (!Array.isArray(r) || r.length !== 2) throw new TypeError(`not a range: ${JSON.stringify(r)}`);
  return { start: new Date(Number(r[0]) * 1000), end: new Date(Number(r[1]) * 1000) };
}

// Keys whose values are ranges (or arrays of them) in command bodies.
const RANGE_KEYS = new Set(["ranges"]);
// Keys whose values are times in command bodies.
const TIME_KEYS = new Set(["at", "start"]);

/** wireBody converts a command's Dates and ranges to their JSON forms. */
function wireBody(body) {
  const out = {};
  for (const [k, v] of Object.entries(body)) {
    if (v === undefined) continue;
    if (RANGE_KEYS.has(k) && Array.isArray(v)) out[k] = v.map(rangeText);
    else if (TIME_KEYS.has(k) && (v instanceof Date || typeof v === "number")) out[k] = rfc3339(v);
    else out[k] = v;
  }
  return out;
}

/**
 * commandSubject is the subject a command of kind goes to:
 * tidemark.cmd.<user>.<kind>, or tidemark.cmd.<kind> without a user.
 * @param {string} kind @param {string} [user] @returns {string}
 */
export function commandSubject(kind, user) {
  return user ? `tidemark.cmd.${user}.${kind}` : `tidemark.cmd.${kind}`;
}

function readUvarint(buf, pos) {
  let x = 0n;
  let shift = 0n;
  for (let i = 0; i < 10; i++) {
    if (pos + i >= buf.length) return null;
    const b = buf[pos + i];
    x |= BigInt(b & 0x7f) << shift;
    if (b < 0x80) {
      if (i === 9 && b > 1) return null; // overflows 64 bits
      return { value: x, next: pos + i + 1 };
    }
    shift += 7n;
  }
  return null;
}

/**
 * splitGroup returns the event encodings a group message body carries:
 * uvarint count (1..1024), then per event a uvarint length and its bytes;
 * nothing after the last. A malformed body throws a DecodeError.
 * @param {Uint8Array} body @returns {Uint8Array[]}
 */
export function splitGroup(body) {
  const c = readUvarint(body, 0);
  if (c === null || c.value === 0n || c.value > BigInt(MAX_GROUP_EVENTS) || c.value > BigInt(body.length - c.next)) {
    throw new DecodeError("malformed", "malformed group message: bad event count");
  }
  const n = Number(c.value);
  let pos = c.next;
  const parts = [];
  for (let i = 0; i < n; i++) {
    const l = readUvarint(body, pos);
    if (l === null || l.value > BigInt(body.length - l.next)) {
      throw new DecodeError("malformed", `malformed group message: event ${i}: bad length`);
    }
    const end = l.next + Number(l.value);
    parts.push(body.subarray(l.next, end));
    pos = end;
  }
  if (pos !== body.length) throw new DecodeError("malformed", `malformed group message: ${body.length - pos} bytes after the last event`);
  return parts;
}

const ENVELOPE_KEYS = ["id", "type", "schema", "at", "causation", "correlation", "actor", "digest", "data"];

/**
 * decodeEvent decodes one event's msgpack encoding into its envelope and
 * `data` (timestamps as Dates, ranges as [start, end] unix seconds: see
 * rangeOf). Throws a DecodeError when it is not a tidemark event this
 * client can read.
 * @param {Uint8Array} bytes
 */
export function decodeEvent(bytes) {
  let v;
  try {
    v = decode(bytes);
  } catch (e) {
    throw new DecodeError("malformed", `not msgpack: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (v === null || typeof v !== "object" || Array.isArray(v) || v instanceof Date || v instanceof Uint8Array) {
    throw new DecodeError("malformed", "an event is a map");
  }
  for (const k of Object.keys(v)) {
    if (!ENVELOPE_KEYS.includes(k)) throw new DecodeError("malformed", `unknown envelope key ${JSON.stringify(k)}`);
  }
  if (typeof v.id !== "string" || v.id === "") throw new DecodeError("malformed", "envelope without id");
  if (typeof v.type !== "string" || v.type === "") throw new DecodeError("malformed", "envelope without type");
  if (typeof v.schema !== "number" || !Number.isInteger(v.schema)) throw new DecodeError("malformed", "envelope without schema");
  if (v.schema > SCHEMA) throw new DecodeError("schema", `schema ${v.schema} is newer than this client reads (${SCHEMA})`);
  if (!(v.at instanceof Date)) throw new DecodeError("malformed", "envelope without a timestamp at");
  if (v.data === null || typeof v.data !== "object" || Array.isArray(v.data) || v.data instanceof Date) {
    throw new DecodeError("malformed", "event data is a map");
  }
  return {
    id: v.id,
    type: v.type,
    schema: v.schema,
    at: v.at,
    causation: v.causation ?? "",
    correlation: v.correlation ?? "",
    actor: v.actor ?? "",
    digest: v.digest ?? "",
    data: v.data,
  };
}

/**
 * expandMessage turns the message stored at seq on subject into records,
 * as eventlog.Expand does: one for a message of its own (index 0, count
 * 0), one per event of a group message (index, count set; subject the
 * event's own), or one record with `error` for a malformed group body. An
 * undecodable event is a record with `error` at its address.
 * @param {number} seq @param {string} subject @param {Uint8Array} data
 */
export function expandMessage(seq, subject, data) {
  if (subject !== GROUP_SUBJECT) {
    return [record(seq, subject, 0, 0, data, true)];
  }
  let parts;
  try {
    parts = splitGroup(data);
  } catch (error) {
    return [{ seq, index: 0, count: 0, subject, error }];
  }
  return parts.map((b, i) => record(seq, GROUP_SUBJECT, i, parts.length, b, false));
}

function record(seq, subject, index, count, bytes, own) {
  let ev;
  try {
    ev = decodeEvent(bytes);
  } catch (error) {
    return { seq, index, count, subject, error };
  }
  const rec = { seq, index, count, subject, ...ev };
  const its = eventSubject(ev);
  if (own) {
    if (its !== "" && its !== subject) rec.error = new DecodeError("foreign", `a ${ev.type} event on subject ${subject}`);
  } else if (its !== "") {
    rec.subject = its;
  }
  return rec;
}

/**
 * eventSubject is the subject an event belongs on (docs/events.md, "The
 * stream"), or "" for a type this client does not know.
 */
export function eventSubject(ev) {
  const d = ev.data || {};
  const snap = (s) => {
    const at = typeof s === "string" ? s.lastIndexOf("@") : -1;
    if (at < 0) return "";
    return `tidemark.evt.snap.${s.slice(0, at).replaceAll(".", ":")}.${s.slice(at + 1)}`;
  };
  switch (ev.type) {
    case "SnapshotRegistered":
    case "IntervalsCompleted":
    case "AuditRecorded":
    case "IntervalsInvalidated":
    case "RunFailed":
      return snap(d.snapshot);
    case "TableRetired":
      return snap(d.table);
    case "PlanBuilt":
    case "CatchUpRequested":
    case "PromotionDecided":
    case "PlanCancelled":
      return `tidemark.evt.plan.${d.plan}`;
    case "SchedulerAdvanced":
    case "EnvironmentFinalized":
    case "RepairCompleted":
    case "EnvironmentRolledBack":
    case "RestatementRequested":
      return `tidemark.evt.env.${d.env}`;
    default:
      return "";
  }
}

/**
 * subjectMatches reports whether a subject matches a NATS filter (`*` one
 * token, `>` the rest).
 * @param {string} filter @param {string} subject @returns {boolean}
 */
export function subjectMatches(filter, subject) {
  const f = filter.split(".");
  const s = subject.split(".");
  for (let i = 0; i < f.length; i++) {
    if (f[i] === ">") return s.length > i;
    if (i >= s.length || (f[i] !== "*" && f[i] !== s[i])) return false;
  }
  return f.length === s.length;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** abortableSleep waits ms, or less when signal aborts. */
function abortableSleep(ms, signal) {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve(undefined);
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}

/**
 * A tidemark client over one NATS connection.
 */
export class Client {
  /**
   * connect opens a NATS connection and returns a client over it. With
   * `user`, commands go to tidemark.cmd.<user>.<kind> and replies come to
   * the user's own inbox space _INBOX.<user> (docs/auth.conf).
   * @param {import("./index.js").ConnectOptions} [opts]
   */
  static async connect(opts = {}) {
    const { name = "tidemark-node", ...rest } = opts;
    let { servers = "nats://127.0.0.1:4222", user, pass, token } = opts;
    // Credentials in a URL (nats://user:password@host:port), as tidemark's
    // CLI takes them: the connection's user, and the user commands are sent as.
    servers = (Array.isArray(servers) ? servers : [servers]).map((u) => {
      const m = /^([a-z]+:\/\/)([^@/]*)@(.*)$/i.exec(u);
      if (!m) return u;
      const [who, secret] = m[2].split(":");
      user ??= decodeURIComponent(who);
      if (secret !== undefined) pass ??= decodeURIComponent(secret);
      return m[1] + m[3];
    });
    delete rest.servers;
    delete rest.user;
    delete rest.pass;
    delete rest.token;
    const nc = await natsConnect({
      servers,
      user,
      pass,
      token,
      name,
      ...(user ? { inboxPrefix: `_INBOX.${user}` } : {}),
    });
    return new Client(nc, { user, ...rest });
  }

  /**
   * @param {import("nats").NatsConnection} nc
   * @param {import("./index.js").ClientOptions} [opts]
   */
  constructor(nc, opts = {}) {
    this.nc = nc;
    this.user = opts.user || "";
    this.actor = opts.actor || "";
    this.timeoutMs = opts.timeoutMs ?? 30000;
    this.retries = opts.retries ?? 3;
    this.noServiceWaitMs = opts.noServiceWaitMs ?? 5000;
    /** The highest stream sequence a reply gave this client (sent as after_seq). */
    this.seen = 0;
  }

  /**
   * command sends a command of kind and returns its reply. The id (given,
   * or a fresh ULID) is kept across retries: a timeout, a service that is
   * not there or stopping, and `unavailable`/`rate_limited` replies are
   * asked again with the same id, which tidemark applies once. A refusal
   * throws a TidemarkError with the reply's code and field.
   * @param {string} kind @param {object} [body] @param {import("./index.js").SendOptions} [opts]
   */
  async command(kind, body = {}, opts = {}) {
    const query = QUERIES.has(kind);
    const msg = wireBody(body);
    if (opts.id) msg.id = opts.id;
    else if (!query && !msg.id) msg.id = newId();
    if (this.actor && msg.actor === undefined) msg.actor = this.actor;
    if (!query && this.seen > (msg.after_seq ?? 0)) msg.after_seq = this.seen;
    const data = new TextEncoder().encode(JSON.stringify(msg));
    const h = natsHeaders();
    h.set("Content-Type", "application/json");
    const subject = commandSubject(kind, this.user);
    const timeout = opts.timeoutMs ?? this.timeoutMs;
    const retries = opts.retries ?? this.retries;
    const noServiceWait = query ? 0 : (opts.noServiceWaitMs ?? this.noServiceWaitMs);
    let attempt = 0;
    let waited = 0;
    for (;;) {
      let resp;
      try {
        resp = await this.nc.request(subject, data, { timeout, headers: h });
      } catch (err) {
        const code = err && typeof err === "object" ? err.code : undefined;
        if (code === ErrorCode.NoResponders && waited < noServiceWait) {
          // No member serves the kind now (a writer being elected): ask again.
          await sleep(50);
          waited += 50;
          continue;
        }
        if (code === ErrorCode.Timeout && attempt < retries) {
          attempt++;
          continue;
        }
        const why = code === ErrorCode.NoResponders ? "no tidemark service is listening" : `${kind}: ${err instanceof Error ? err.message : String(err)}`;
        throw new TidemarkError("unavailable", "", why, undefined, err);
      }
      const svcCode = resp.headers?.get("Nats-Service-Error-Code") ?? "";
      if (svcCode === "503" && waited < noServiceWait) {
        // The member was stopping and did not handle it: ask again.
        await sleep(50);
        waited += 50;
        continue;
      }
      if (svcCode !== "") {
        throw new TidemarkError(svcCode === "503" ? "unavailable" : "internal", "", `${kind}: service error ${svcCode}: ${resp.headers?.get("Nats-Service-Error") ?? ""}`);
      }
      let reply;
      try {
        reply = JSON.parse(new TextDecoder().decode(resp.data));
      } catch (err) {
        throw new TidemarkError("internal", "", `${kind}: a reply that is not JSON`, undefined, err);
      }
      if (typeof reply.seq === "number" && reply.seq > this.seen) this.seen = reply.seq;
      if (reply.accepted) return reply;
      if (TRANSIENT.has(reply.code) && attempt < retries) {
        attempt++;
        await sleep(Math.min(100 * 2 ** attempt, 2000));
        continue;
      }
      throw new TidemarkError(reply.code || "internal", reply.field || "", reply.message || "refused", reply);
    }
  }

  /** register_snapshot: a model version's definition. */
  registerSnapshot(cmd, opts) { return this.command("register_snapshot", cmd, opts); }
  /** build_plan: a plan of versions for an environment; the reply's `plan` is the PlanBuilt. */
  buildPlan(cmd, opts) { return this.command("build_plan", cmd, opts); }
  /** promote: the reply's `decision` (accepted or rejected) or `catch_up`. */
  promote(cmd, opts) { return this.command("promote", cmd, opts); }
  /** finalize a promoted plan. */
  finalize(cmd, opts) { return this.command("finalize", cmd, opts); }
  /** cancel_plan: end a plan's outstanding work. */
  cancelPlan(cmd, opts) { return this.command("cancel_plan", cmd, opts); }
  /** complete_intervals: ranges computed into a version's table. */
  completeIntervals(cmd, opts) { return this.command("complete_intervals", cmd, opts); }
  /** complete_work: a worker's completion of a batch of a work item. */
  completeWork(cmd, opts) { return this.command("complete_work", cmd, opts); }
  /** fail_work: a worker's failed batch of a work item. */
  failWork(cmd, opts) { return this.command("fail_work", cmd, opts); }
  /** status: the environments, plans in flight, repairs (a query). */
  status(cmd = {}, opts) { return this.command("status", cmd, opts); }
  /** open_repairs: the open repair debt (a query). */
  openRepairs(cmd = {}, opts) { return this.command("open_repairs", cmd, opts); }

  /**
   * events iterates over the event stream from sequence fromSeq, group
   * messages expanded: each record carries its address (seq, index), the
   * event's own subject, its envelope and data, or `error` when it could
   * not be decoded (skip it, and report it). With `follow` false it stops
   * at the stream's last sequence when it started; otherwise it waits for
   * new events until the loop breaks or `signal` aborts. It reads with an
   * ordered consumer, or, with `direct`, by direct gets (message by
   * message; new ones found by polling the stream's state every `pollMs`),
   * which is what docs/auth.conf grants the auditor role.
   * @param {number} [fromSeq] @param {import("./index.js").EventsOptions} [opts]
   */
  async *events(fromSeq = 1, opts = {}) {
    const { follow = true, subjects, signal, direct = false, pollMs = 250 } = opts;
    const keep = (rec) => !subjects || subjects.some((f) => subjectMatches(f, rec.subject));
    if (direct) {
      yield* this.#direct(Math.max(1, fromSeq), follow, keep, signal, pollMs);
      return;
    }
    const js = this.nc.jetstream();
    let last = Infinity;
    if (!follow) {
      const jsm = await this.nc.jetstreamManager();
      const info = await jsm.streams.info(STREAM);
      last = info.state.last_seq;
      if (last < fromSeq) return;
    }
    const consumer = await js.consumers.get(STREAM, {
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: Math.max(1, fromSeq),
    });
    const msgs = await consumer.consume({ max_messages: 256 });
    const onAbort = () => { msgs.stop(); };
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      if (signal?.aborted) return;
      for await (const m of msgs) {
        for (const rec of expandMessage(m.seq, m.subject, m.data)) {
          if (keep(rec)) yield rec;
        }
        if (m.seq >= last) break;
      }
    } finally {
      signal?.removeEventListener("abort", onAbort);
      msgs.stop();
      await consumer.delete().catch(() => {});
    }
  }

  /** #direct reads the stream from seq by direct gets. */
  async *#direct(seq, follow, keep, signal, pollMs) {
    const jsm = await this.nc.jetstreamManager();
    const lastSeq = async () => (await jsm.streams.info(STREAM)).state.last_seq;
    let last = await lastSeq();
    const end = follow ? Infinity : last;
    while (!signal?.aborted) {
      if (seq > last) {
        if (!follow) return;
        await abortableSleep(pollMs, signal);
        if (signal?.aborted) return;
        last = await lastSeq();
        continue;
      }
      let m;
      try {
        // The first message at or after seq: deleted sequences are skipped.
        m = await jsm.direct.getMessage(STREAM, { seq, next_by_subj: "tidemark.evt.>" });
      } catch (err) {
        if (err && typeof err === "object" && String(err.code) === "404") {
          seq = last + 1; // none left up to the last sequence seen
          continue;
        }
        throw err;
      }
      for (const rec of expandMessage(m.seq, m.subject, m.data)) {
        if (keep(rec)) yield rec;
      }
      seq = m.seq + 1;
      if (m.seq >= end) return;
    }
  }

  /** close drains and closes the connection. */
  async close() {
    await this.nc.drain();
  }
}

/** connect is Client.connect. */
export const connect = (opts) => Client.connect(opts);
