import { withClient } from "@webhooks/testing";
import type { Fault } from "./faults.ts";
import { ANSWER_KINDS, type AnswerKind, Load } from "./load.ts";
import { ENDPOINTS, type Stack } from "./stack.ts";

export interface Timing {
  ratePerSecond: number;
  /** Load before the fault, the fault itself, and load after it ends. */
  beforeMs: number;
  holdMs: number;
  afterMs: number;
}

/** Once the load stops, the deliveries are awaited until all are made, or none has been for this long. */
const STALLED_AFTER_MS = 60_000;

export interface FaultResult {
  fault: Fault;
  accepted: number;
  /** Deliveries expected (accepted × endpoints), made at least once, and never made. */
  expected: number;
  delivered: number;
  lost: number;
  notAccepted: number;
  /** Answers while the fault was on (and while it was being undone), by kind. */
  during: Map<AnswerKind, number>;
  /** Answers with no answer or an unexpected status at any time of the row. */
  failedAnswers: number;
  oddAnswers: Map<string, number>;
  /** From the end of the fault to the first delivery of an event accepted after it; undefined if none. */
  recoveredInMs: number | undefined;
  /** How many deliveries were made more than once. */
  duplicated: number;
  /** The first of them, and of those never made, each with its attempt log. */
  duplicates: string[];
  lostDetails: string[];
  passed: boolean;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs the load, injects `fault`, undoes it, lets the load run on, and counts. */
export async function runFault(stack: Stack, fault: Fault, timing: Timing): Promise<FaultResult> {
  const load = new Load(stack.apiUrl);
  load.start(timing.ratePerSecond);
  await sleep(timing.beforeMs);
  load.phase = "during";
  await fault.inject(stack);
  await sleep(timing.holdMs);
  load.phase = "recovering";
  const faultEnd = Date.now();
  await fault.recover(stack);
  load.phase = "after";
  await sleep(timing.afterMs);
  await load.stop();
  await load.close();

  const ids = [...load.accepted.keys()];
  const deliveredCount = () =>
    ENDPOINTS.reduce((sum, endpoint) => {
      const seen = stack.deliveries.byEndpoint.get(endpoint)!;
      return sum + ids.filter((id) => seen.has(id)).length;
    }, 0);
  const expected = ids.length * ENDPOINTS.length;
  let delivered = deliveredCount();
  let progressAt = Date.now();
  while (delivered < expected && Date.now() - progressAt < STALLED_AFTER_MS) {
    await sleep(500);
    const now = deliveredCount();
    if (now > delivered) progressAt = Date.now();
    delivered = now;
  }

  const healthy = stack.deliveries.byEndpoint.get("healthy")!;
  const recoveredAt = ids
    .filter((id) => load.accepted.get(id)! >= faultEnd)
    .map((id) => healthy.get(id)?.firstAt)
    .filter((at): at is number => at !== undefined);
  const during = new Map<AnswerKind, number>();
  let failedAnswers = 0;
  for (const [phase, counts] of load.answers) {
    for (const [kind, count] of counts) {
      if (phase === "during" || phase === "recovering") during.set(kind, (during.get(kind) ?? 0) + count);
      const failed =
        kind === "other status" || (!fault.dropsExpected && ["dropped", "timed out", "refused"].includes(kind));
      if (failed) failedAnswers += count;
    }
  }
  const duplicated: [string, string][] = [];
  const missing: [string, string][] = [];
  for (const endpoint of ENDPOINTS) {
    const seen = stack.deliveries.byEndpoint.get(endpoint)!;
    for (const id of ids) {
      const entry = seen.get(id);
      if (!entry) missing.push([endpoint, id]);
      else if (entry.count > 1) duplicated.push([endpoint, id]);
    }
  }
  const lost = expected - delivered;
  return {
    fault,
    accepted: ids.length,
    expected,
    delivered,
    lost,
    notAccepted: load.givenUp,
    during: new Map(ANSWER_KINDS.map((kind) => [kind, during.get(kind) ?? 0])),
    failedAnswers,
    oddAnswers: load.oddAnswers,
    recoveredInMs: recoveredAt.length > 0 ? Math.min(...recoveredAt) - faultEnd : undefined,
    duplicated: duplicated.length,
    duplicates: await attemptLogs(stack, duplicated.slice(0, 5)),
    lostDetails: await attemptLogs(stack, missing.slice(0, 10)),
    passed: lost === 0 && load.givenUp === 0 && failedAnswers === 0,
  };
}

/** One line per delivery: its endpoint, event, status, and its attempts as the log has them. */
async function attemptLogs(stack: Stack, deliveries: [string, string][]): Promise<string[]> {
  if (deliveries.length === 0) return [];
  return withClient(stack.databaseUrl, async (db) => {
    const lines: string[] = [];
    for (const [endpoint, eventId] of deliveries) {
      const { rows } = await db.query(
        `SELECT d.id, d.status, d.attempts,
                coalesce(string_agg(a.number || ': ' || coalesce(a.response_code::text, 'no response')
                  || coalesce(' (' || a.error || ')', ''), '; ' ORDER BY a.number), 'no attempt') AS log
           FROM deliveries d JOIN subscriptions s ON s.id = d.subscription_id
           LEFT JOIN delivery_attempts a ON a.delivery_id = d.id
          WHERE d.event_id = $1 AND s.url LIKE $2
          GROUP BY d.id, d.status, d.attempts`,
        [eventId, `%/${endpoint}`],
      );
      const row = rows[0] as { id: string; status: string; attempts: number; log: string } | undefined;
      lines.push(
        row
          ? `${endpoint} ${row.id} (${eventId}): ${row.status}, ${row.attempts} attempt(s): ${row.log}`
          : `${endpoint} ${eventId}: no delivery in the database`,
      );
    }
    return lines;
  });
}
