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
 * Enqueues events of which some carry an idempotency key, in one statement (two or three when a payload is to be
 * replaced), through `run` — the caller's transaction. Events of one call with the same key (tenant, event name,
 * key) count as enqueued one after the other, each seeing what the ones before it did: the first is the one
 * written (or finds the key held), a later one with mode `'replace'` puts its payload in its place, a later one
 * with `'debounce'` its payload and delay while the event is scheduled, a later one with `'ignore'` writes nothing.
 * See docs/flow-control.md.
 */
export async function enqueueKeyed(
  names: OutboxNames,
  rows: readonly EventRow[],
  run: <T>(statement: SqlStatement) => Promise<T[]>,
): Promise<KeyedEnqueue> {
  // the events of each key, in call order (an event without a key is a group of its own)
  const groupOf: EventRow[][] = [];
  const byKey = new Map<string, EventRow[]>();
  for (const row of rows) {
    const key = row.dedupe ? JSON.stringify([row.tenantId, row.eventName, row.dedupe.key]) : undefined;
    let group = key === undefined ? undefined : byKey.get(key);
    if (!group) {
      group = [];
      if (key !== undefined) byKey.set(key, group);
    }
    group.push(row);
    groupOf.push(group);
  }
  const groups = [...new Set(groupOf)];

  // one row per key: its first event, carrying what the later ones change in it when it is written
  const sent = groups.map(foldedFirst);
  const held = new Map<string, string>();
  const [only] = sent;
  const insert =
    sent.length === 1 && only.dedupe
      ? insertKeyedEvent(names, { ...only, dedupe: only.dedupe })
      : insertKeyedEvents(names, sent);
  for (const r of await run<KeyedEventRow>(insert)) held.set(r.id, r.held_by ?? r.id);
  const holderOf = (group: EventRow[]) => held.get(group[0].id)!;

  // keys held by an earlier event: their replaces and debounces, applied to it as one after the other would be
  const changing = groups.filter((g) => holderOf(g) !== g[0].id && g.some(replaces));
  const { asScheduled, asPending } = await replaceHeld(names, changing, holderOf, run);

  const position = new Map<EventRow[], number>();
  const outcomes = rows.map((row, i): OutboxEnqueueOutcome => {
    const group = groupOf[i];
    const eventId = holderOf(group);
    const nth = position.get(group) ?? 0;
    position.set(group, nth + 1);
    if (eventId === group[0].id) {
      if (nth === 0) return { eventId, outcome: 'written' };
      if (!replaces(row)) return { eventId, outcome: 'ignored' };
      // folded into the event written: a 'debounce' only when it is delayed
      return {
        eventId,
        outcome: row.dedupe?.mode === 'replace' || isDelayed(group[0]) ? 'replaced' : 'kept',
      };
    }
    if (!replaces(row)) return { eventId, outcome: 'ignored' };
    const applied = asScheduled.has(eventId) || (row.dedupe?.mode === 'replace' && asPending.has(eventId));
    return { eventId, outcome: applied ? 'replaced' : 'kept' };
  });
  const rescheduled = changing.some((g) => asScheduled.has(holderOf(g)) && g.some(debounces));
  return { outcomes, written: sent.filter((r) => held.get(r.id) === r.id), rescheduled };
}

/**
 * The first event of a key's group as written when the key is free: the payload of its last later `'replace'`,
 * or `'debounce'` with the debounce's time when the first event is delayed (else the debounce keeps it).
 */
function foldedFirst(group: EventRow[]): EventRow {
  const first = { ...group[0] };
  for (const row of group.slice(1)) {
    if (row.dedupe?.mode === 'replace' || (debounces(row) && isDelayed(group[0]))) {
      first.payloadJson = row.payloadJson;
      first.schemaVersion = row.schemaVersion;
      if (debounces(row)) [first.deliverAt, first.delayMs] = [row.deliverAt, row.delayMs];
    }
  }
  return first;
}

/**
 * Applies the replaces and debounces of keys held by earlier events (`groups`), as if enqueued one after the
 * other. The held event is either scheduled — every one of them applies: the last one's payload, the last
 * debounce's time — or pending and not claimed — only the replaces apply: the last replace's payload — or claimed:
 * none applies. One statement asks for the first case (with a debounce, `outbox_dedupe_replace` changes only a
 * scheduled event); for the keys it did not change that have a replace, a second asks for the second case.
 * Returns the held events changed as scheduled (every replace and debounce applied) and as pending (the replaces).
 */
async function replaceHeld(
  names: OutboxNames,
  groups: readonly EventRow[][],
  holderOf: (group: EventRow[]) => string,
  run: <T>(statement: SqlStatement) => Promise<T[]>,
): Promise<{ asScheduled: Set<string>; asPending: Set<string> }> {
  const replacedBy = async (changes: EventRow[]) => {
    const done = new Set<string>();
    if (changes.length === 0) return done;
    for (const r of await run<ReplacedPayloadRow>(replaceKeyedPayloads(names, changes))) {
      if (r.replaced) done.add(r.id);
    }
    return done;
  };
  const lastReplace = (g: EventRow[]) => g.findLast((r) => r.dedupe?.mode === 'replace');
  const asScheduled = await replacedBy(
    groups.map((g) => {
      const last = g.findLast(replaces)!;
      const debounce = g.findLast(debounces);
      return {
        ...last,
        id: holderOf(g),
        deliverAt: debounce?.deliverAt,
        delayMs: debounce?.delayMs,
        dedupe: debounce?.dedupe ?? last.dedupe,
      };
    }),
  );
  const asPending = await replacedBy(
    groups
      .filter((g) => g.some(debounces) && !asScheduled.has(holderOf(g)) && lastReplace(g))
      .map((g) => ({ ...lastReplace(g)!, id: holderOf(g) })),
  );
  return { asScheduled, asPending };
}

/** True when a second enqueue of the row's key changes the first event: mode `'replace'` or `'debounce'`. */
function replaces(row: EventRow): boolean {
  return row.dedupe?.mode === 'replace' || debounces(row);
}

/** True for mode `'debounce'`. */
function debounces(row: EventRow): boolean {
  return row.dedupe?.mode === 'debounce';
}
