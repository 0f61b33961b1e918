import type { OutboxEnqueueOutcome } from '../model/outbox-event.interface';
import type { OutboxNames } from '../model/table-names';
import {
  insertKeyedEvent,
  insertKeyedEvents,
  replaceKeyedPayloads,
  type KeyedEventRow,
  type ReplacedPayloadRow,
} from '../store/sql/enqueue-keyed';
import { isDelayed, type EventRow, type SqlStatement } from '../store/sql';

/**
 * What a keyed enqueue did: an outcome per event given, in order, the rows it wrote, and whether it moved the
 * delivery time of a scheduled event ('debounce').
 */
export interface KeyedEnqueue {
  outcomes: OutboxEnqueueOutcome[];
  written: EventRow[];
  rescheduled: boolean;
}

/**
 * Enqueues events of which some carry an idempotency key, in one statement (two when a payload is to be
 * replaced), through `run` — the caller's transaction. Events of one call with the same key (tenant, event name,
 * key) count as enqueued one after the other: the first is the one written, a later one with mode `'replace'`
 * puts its payload in its place, a later one with `'debounce'` its payload and delay (when the first is delayed),
 * a later one with `'ignore'` writes nothing. See docs/flow-control.md.
 */
export async function enqueueKeyed(
  names: OutboxNames,
  rows: readonly EventRow[],
  run: <T>(statement: SqlStatement) => Promise<T[]>,
): Promise<KeyedEnqueue> {
  // one row per key: the first event of each key, carrying the payload of its last 'replace'
  const firstOf = new Map<string, EventRow>();
  const sent: EventRow[] = [];
  const groupOf: EventRow[] = [];
  for (const row of rows) {
    const key = row.dedupe && JSON.stringify([row.tenantId, row.eventName, row.dedupe.key]);
    const first = key ? firstOf.get(key) : undefined;
    if (first === undefined) {
      const own = { ...row };
      if (key) firstOf.set(key, own);
      sent.push(own);
      groupOf.push(own);
      continue;
    }
    groupOf.push(first);
    const mode = row.dedupe?.mode;
    if (mode === 'replace' || (mode === 'debounce' && isDelayed(first))) {
      first.payloadJson = row.payloadJson;
      first.schemaVersion = row.schemaVersion;
      first.dedupe = { ...first.dedupe!, mode };
      if (mode === 'debounce') [first.deliverAt, first.delayMs] = [row.deliverAt, row.delayMs];
    }
  }

  const held = new Map<string, string>();
  const [only] = sent;
  const insert =
    sent.length === 1 && only.dedupe
      ? insertKeyedEvent(names, { ...only, dedupe: only.dedupe })
      : insertKeyedEvents(names, sent);
  for (const r of await run<KeyedEventRow>(insert)) held.set(r.id, r.held_by ?? r.id);
  const toReplace = sent.filter((r) => held.get(r.id) !== r.id && replaces(r));
  const replaced = new Set<string>();
  let rescheduled = false;
  if (toReplace.length > 0) {
    const statement = replaceKeyedPayloads(
      names,
      toReplace.map((r) => ({ ...r, id: held.get(r.id)! })),
    );
    for (const r of await run<ReplacedPayloadRow>(statement)) if (r.replaced) replaced.add(r.id);
    rescheduled = toReplace.some((r) => r.dedupe?.mode === 'debounce' && replaced.has(held.get(r.id)!));
  }

  const seen = new Set<EventRow>();
  const outcomes = rows.map((row, i): OutboxEnqueueOutcome => {
    const first = groupOf[i];
    const eventId = held.get(first.id)!;
    const isFirst = !seen.has(first);
    seen.add(first);
    if (!replaces(row)) return { eventId, outcome: isFirst && eventId === first.id ? 'written' : 'ignored' };
    if (eventId === first.id) {
      if (isFirst) return { eventId, outcome: 'written' };
      // folded above: a 'debounce' only into a delayed first event
      return { eventId, outcome: row.dedupe?.mode === 'replace' || isDelayed(first) ? 'replaced' : 'kept' };
    }
    return { eventId, outcome: replaced.has(eventId) ? 'replaced' : 'kept' };
  });
  return { outcomes, written: sent.filter((r) => held.get(r.id) === r.id), rescheduled };
}

/** True when a second enqueue of the row's key changes the first event: mode `'replace'` or `'debounce'`. */
function replaces(row: EventRow): boolean {
  return row.dedupe?.mode === 'replace' || row.dedupe?.mode === 'debounce';
}
