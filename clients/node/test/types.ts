// Compiled by `npm run typecheck` (tsc, no output): the README's use of
// the client type-checks against index.d.ts, and misuse does not.
import { Client, TidemarkError, rangeOf, type EventRecord, type Reply } from "../index.js";

export async function example(c: Client): Promise<void> {
  await c.registerSnapshot({ model: "orders", version: "v1", cron: "@hourly", start: new Date("2026-12-01T00:00:00Z") });
  const built: Reply = await c.buildPlan({ plan: "p1", env: "prod", versions: { orders: "v1" } });
  const backfill: string[] = built.plan?.candidates[0].backfill ?? [];
  await c.completeIntervals({ model: "orders", version: "v1", ranges: backfill });
  try {
    const r = await c.promote({ plan: "p1" }, { id: "promote-p1", retries: 5 });
    const outcome: "accepted" | "rejected" | undefined = r.decision?.outcome;
    void outcome;
  } catch (e) {
    if (e instanceof TidemarkError) {
      const code: string = e.code;
      const field: string = e.field;
      void code, field;
    }
  }
  for await (const ev of c.events(1, { follow: false })) {
    const r: EventRecord = ev;
    if (r.error) continue;
    const seq: number = r.seq, index: number = r.index;
    void seq, index;
    if (r.type === "IntervalsCompleted") {
      const ranges = r.data?.ranges as [number, number][];
      const start: Date = rangeOf(ranges[0]).start;
      void start;
    }
  }
  // @ts-expect-error: a plan needs its env
  await c.buildPlan({ plan: "p2" });
  // @ts-expect-error: promote takes a plan
  await c.promote({ plan: 1 });
  await c.close();
}
