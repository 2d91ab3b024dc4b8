// Types of @tidemark/client. The wire contract is docs/events.md of the
// tidemark repository; keys are its snake_case keys.

import type { NatsConnection } from "nats";

/** The JetStream stream that holds every event. */
export declare const STREAM: "TIDEMARK";
/** The subject group messages are stored on. */
export declare const GROUP_SUBJECT: "tidemark.evt.group";
/** The most events one group message holds. */
export declare const MAX_GROUP_EVENTS: 1024;
/** The event schema version this client reads. */
export declare const SCHEMA: 1;

/** A time as commands take it: a Date, an RFC 3339 string or unix seconds. */
export type Time = Date | string | number;
/** A half-open range [start, end) as commands take it. */
export type RangeInput = string | [Time, Time] | { start: Time; end: Time };
/** A range as JSON replies carry it: "START/END" in RFC 3339. */
export type RangeText = string;
/** A range as events carry it: [start, end) in unix seconds. */
export type EventRange = [number, number];

/** Reply codes (docs/events.md, Reply). */
export type Code =
  | "invalid"
  | "malformed"
  | "too_large"
  | "limit_exceeded"
  | "not_found"
  | "conflict"
  | "idempotency_conflict"
  | "stale_generation"
  | "rate_limited"
  | "unavailable"
  | "internal";

/** A refused command, or a transport failure (code "unavailable"). */
export declare class TidemarkError extends Error {
  readonly code: Code | string;
  /** The offending field ("" when none): `version`, `ranges[0]`, `id`… */
  readonly field: string;
  /** The reply, when tidemark answered. */
  readonly reply?: Reply;
  constructor(code: string, field: string, message: string, reply?: Reply, cause?: unknown);
}

/** An event that could not be decoded. */
export declare class DecodeError extends Error {
  readonly kind: "malformed" | "schema" | "foreign";
  constructor(kind: string, message: string);
}

/** Every command's Meta keys. */
export interface Meta {
  /** Command id: set to keep it across your own retries; default a fresh ULID. */
  id?: string;
  actor?: string;
  correlation?: string;
  after_seq?: number;
}

export interface Audit {
  name: string;
  kind: "not_null" | "unique_values" | "number_of_rows" | "accepted_values" | "accepted_range" | "custom";
  columns?: string[];
  column?: string;
  threshold?: number;
  is_in?: string[];
  min?: string;
  max?: string;
  sql?: string;
  non_blocking?: boolean;
}

export interface AuditOutcome {
  audit: string;
  passed: boolean;
  count: number;
  columns?: string[];
  sample?: string[][];
  error?: string;
}

export interface RegisterSnapshot extends Meta {
  model: string;
  version: string;
  cron: string;
  interval_unit?: "five_minute" | "quarter_hour" | "half_hour" | "hour" | "day" | "month" | "year";
  start: Time;
  lookback?: number;
  kind?: "incremental" | "forward_only" | "full" | "view" | "seed";
  allow_partials?: boolean;
  depends_on?: string[];
  sql?: string;
  time_column?: string;
  batch_size?: number;
  batch_concurrency?: number;
  audits?: Audit[];
  grain?: string[];
  seed?: string;
  macros?: "sqlmesh";
}

export interface BuildPlan extends Meta {
  plan: string;
  env: string;
  versions?: Record<string, string>;
  max_trailing_gap_advances?: number;
  max_catch_up_advances?: number;
  changed?: boolean;
}

export interface Promote extends Meta {
  plan: string;
}

export interface Finalize extends Meta {
  plan: string;
}

export interface CancelPlan extends Meta {
  plan: string;
  reason?: string;
}

export interface CompleteIntervals extends Meta {
  model: string;
  version: string;
  ranges: RangeInput[];
  run_kind?: string;
  run_id?: string;
  work?: string;
  rows?: number;
  audits?: AuditOutcome[];
}

export interface CompleteWork extends CompleteIntervals {
  work: string;
}

export interface FailWork extends Meta {
  model: string;
  version: string;
  ranges: RangeInput[];
  run_kind: string;
  run_id?: string;
  worker?: string;
  exit_status: number;
  error: string;
  stderr_tail?: string;
  attempt: number;
  final?: boolean;
  work: string;
}

export interface StatusQuery {
  env?: string;
  actor?: string;
  correlation?: string;
}

export interface Policy {
  version: number;
  max_trailing_gap_advances: number;
  max_catch_up_advances: number;
}

export interface Candidate {
  model: string;
  snapshot: string;
  table: string;
  derived: boolean;
  upstream: string[];
  incumbent: string;
  incumbent_frontier: string;
  incumbent_cron: string;
  incumbent_unit: string;
  incumbent_allow_partials: boolean;
  backfill: RangeText[];
}

export interface PlanBuilt {
  plan: string;
  env: string;
  built_at: string;
  start: string;
  end: string;
  generation: number;
  policy: Policy;
  candidates: Candidate[];
}

export interface Finding {
  code: string;
  model?: string;
  snapshot?: string;
  related?: string;
  ranges?: RangeText[];
  advances?: number;
  message: string;
  audit?: string;
  count?: number;
}

export interface ModelFinding {
  snapshot: string;
  codes: string[];
  missing: RangeText[];
  advances: number;
}

export interface PromotionDecided {
  plan: string;
  env: string;
  outcome: "accepted" | "rejected";
  codes: string[];
  models: Record<string, ModelFinding>;
  evaluated_at_seq: number;
  evaluated_at: string;
  policy: Policy;
  generation: number;
  findings: Finding[];
  catch_up_seq?: number;
  repairs?: { model: string; snapshot: string; table: string; ranges: RangeText[] }[];
}

export interface RunFailure {
  model: string;
  snapshot: string;
  run_kind: string;
  error: string;
  attempt: number;
  final: boolean;
  seq: number;
}

export interface ModelStatus {
  model: string;
  snapshot: string;
  frontier?: string;
  missing: RangeText[];
  last_tick?: string;
  open_repairs: number;
  failures: number;
  last_failure?: RunFailure;
  audits?: unknown[];
}

export interface EnvStatus {
  env: string;
  generation: number;
  finalized?: string;
  models: ModelStatus[];
}

/** A command's reply (docs/events.md, Reply), as JSON. */
export interface Reply {
  accepted: boolean;
  code?: Code;
  field?: string;
  message?: string;
  seq?: number;
  events: number;
  duplicate?: boolean;
  decision?: PromotionDecided;
  catch_up?: Record<string, unknown>;
  plan?: PlanBuilt;
  advances?: Record<string, unknown>[];
  repairs?: Record<string, unknown>[];
  envs?: EnvStatus[];
  plans?: Record<string, unknown>[];
  retired?: Record<string, unknown>[];
  rollback?: Record<string, unknown>;
  restatement?: Record<string, unknown>;
  restatements?: Record<string, unknown>[];
}

/** One event of the stream, at its address (seq, index). */
export interface EventRecord {
  /** The stream sequence of the message that holds it. */
  seq: number;
  /** Its place in a group message (0-based); 0 for an event stored on its own. */
  index: number;
  /** The events of its group message; 0 for an event stored on its own. */
  count: number;
  /** The event's own subject (tidemark.evt.snap.<model>.<version>, …). */
  subject: string;
  /** Set when the record could not be decoded: skip it and report it. */
  error?: DecodeError;
  id?: string;
  /** The payload type (docs/events.md, Events); skip a type you do not know. */
  type?: string;
  schema?: number;
  at?: Date;
  causation?: string;
  correlation?: string;
  actor?: string;
  digest?: string;
  /** The payload: timestamps as Dates, ranges as [start, end] unix seconds (rangeOf). */
  data?: Record<string, unknown>;
}

export interface ConnectOptions extends ClientOptions {
  /** NATS server URL(s); default nats://127.0.0.1:4222. */
  servers?: string | string[];
  pass?: string;
  token?: string;
  /** The connection's name. */
  name?: string;
}

export interface ClientOptions {
  /** The NATS user commands are sent as (tidemark.cmd.<user>.<kind>, replies on _INBOX.<user>). */
  user?: string;
  /** Set as every command's actor unless the command has one. */
  actor?: string;
  /** How long one request waits for its reply; default 30000. */
  timeoutMs?: number;
  /** Requests asked again with the same id after a timeout or an unavailable/rate_limited reply; default 3. */
  retries?: number;
  /** How long a command that writes waits while no service answers (a writer being elected); default 5000. */
  noServiceWaitMs?: number;
}

export interface SendOptions {
  /** The command id (else the body's `id`, else a fresh ULID). */
  id?: string;
  timeoutMs?: number;
  retries?: number;
  noServiceWaitMs?: number;
}

export interface EventsOptions {
  /** Wait for new events (default true); false stops at the stream's last sequence when the iteration started. */
  follow?: boolean;
  /** Only events whose own subject matches one of these NATS filters. */
  subjects?: string[];
  /** Ends the iteration. */
  signal?: AbortSignal;
  /** Read by direct gets instead of an ordered consumer (what docs/auth.conf grants the auditor role). */
  direct?: boolean;
  /** With direct and follow: how often to look for new events, in milliseconds; default 250. */
  pollMs?: number;
}

export declare class Client {
  static connect(opts?: ConnectOptions): Promise<Client>;
  constructor(nc: NatsConnection, opts?: ClientOptions);
  readonly nc: NatsConnection;
  /** The highest stream sequence a reply gave this client (sent as after_seq). */
  seen: number;
  /** Sends a command of kind; throws a TidemarkError when refused. */
  command(kind: string, body?: Record<string, unknown>, opts?: SendOptions): Promise<Reply>;
  registerSnapshot(cmd: RegisterSnapshot, opts?: SendOptions): Promise<Reply>;
  buildPlan(cmd: BuildPlan, opts?: SendOptions): Promise<Reply & { plan?: PlanBuilt }>;
  promote(cmd: Promote, opts?: SendOptions): Promise<Reply>;
  finalize(cmd: Finalize, opts?: SendOptions): Promise<Reply>;
  cancelPlan(cmd: CancelPlan, opts?: SendOptions): Promise<Reply>;
  completeIntervals(cmd: CompleteIntervals, opts?: SendOptions): Promise<Reply>;
  completeWork(cmd: CompleteWork, opts?: SendOptions): Promise<Reply>;
  failWork(cmd: FailWork, opts?: SendOptions): Promise<Reply>;
  status(cmd?: StatusQuery, opts?: SendOptions): Promise<Reply>;
  openRepairs(cmd?: StatusQuery, opts?: SendOptions): Promise<Reply>;
  /** The events from fromSeq on, group messages expanded. */
  events(fromSeq?: number, opts?: EventsOptions): AsyncGenerator<EventRecord, void, undefined>;
  close(): Promise<void>;
}

export declare function connect(opts?: ConnectOptions): Promise<Client>;
/** A fresh ULID: a valid command id. */
export declare function newId(now?: number): string;
export declare function rfc3339(t: Time): string;
export declare function rangeText(r: RangeInput): string;
export declare function rangeOf(r: EventRange | RangeText): { start: Date; end: Date };
export declare function commandSubject(kind: string, user?: string): string;
export declare function splitGroup(body: Uint8Array): Uint8Array[];
export declare function decodeEvent(bytes: Uint8Array): Required<Pick<EventRecord, "id" | "type" | "schema" | "at" | "causation" | "correlation" | "actor" | "digest" | "data">>;
export declare function expandMessage(seq: number, subject: string, data: Uint8Array): EventRecord[];
export declare function eventSubject(ev: { type?: string; data?: Record<string, unknown> }): string;
export declare function subjectMatches(filter: string, subject: string): boolean;
