import type { OutboxEnqueueOutcome } from '../model/outbox-event.interface';
import type { OutboxNames } from '../model/table-names';
import {
  insertKeyedEvent,
  insertKeyedEvents,
  replaceKeyedPayloads,
  type KeyedEventRow,
  type ReplacedPayloadRow,
} from '../store/sql/enqueue-keyed';
import type { EventRow, SqlStatement } from '../store/sql';

/** What a keyed enqueue did: an outcome per event given, in order, and the rows it wrote. */
export interface KeyedEnqueue {
  outcomes: OutboxEnqueueOutcome[];
  written: EventRow[];
}

/**
 * Enqueues events of which some carry an idempotency key, in one statement (two when a payload is to be
 * replaced), through `run` — the caller's transaction. Events of one call with the same key (tenant, event name,
 * key) count as enqueued one after the other: the first is the one written, a later one with mode `'replace'`
 * puts its payload in its place, a later one with `'ignore'` writes nothing. See docs/flow-control.md.
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
    if (row.dedupe?.mode === 'replace') {
      first.payloadJson = row.payloadJson;
      first.schemaVersion = row.schemaVersion;
      first.dedupe = { ...first.dedupe!, mode: 'replace' };
    }
  }

  const held = new Map<string, string>();
  const [only] = sent;
  const insert =
    sent.length === 1 && only.dedupe
      ? insertKeyedEvent(names, { ...only, dedupe: only.dedupe })
      : insertKeyedEvents(names, sent);
  for (const r of await run<KeyedEventRow>(insert)) held.set(r.id, r.held_by ?? r.id);
  const toReplace = sent.filter((r) => held.get(r.id) !== r.id && r.dedupe?.mode === 'replace');
  const replaced = new Set<string>();
  if (toReplace.length > 0) {
    const statement = replaceKeyedPayloads(
      names,
      toReplace.map((r) => ({ ...r, id: held.get(r.id)! })),
    );
    for (const r of await run<ReplacedPayloadRow>(statement)) if (r.replaced) replaced.add(r.id);
  }

  const seen = new Set<EventRow>();
  const outcomes = rows.map((row, i): OutboxEnqueueOutcome => {
    const first = groupOf[i];
    const eventId = held.get(first.id)!;
    const isFirst = !seen.has(first);
    seen.add(first);
    if (eventId === first.id) {
      if (isFirst) return { eventId, outcome: 'written' };
      return { eventId, outcome: row.dedupe?.mode === 'replace' ? 'replaced' : 'ignored' };
    }
    if (row.dedupe?.mode !== 'replace') return { eventId, outcome: 'ignored' };
    return { eventId, outcome: replaced.has(eventId) ? 'replaced' : 'kept' };
  });
  return { outcomes, written: sent.filter((r) => held.get(r.id) === r.id) };
}
