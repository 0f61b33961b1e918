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

  // one row per key: its first event, carrying what the later ones change in it when it is written (all of it
  // when its time is known to be to come; the replaces only when it is known to be due now), or nothing when only
  // the database can tell (see `whenWritten`): then the later ones are applied after the insert, as to a held key
  const sent = groups.map(foldedFirst);
  const held = new Map<string, string>();
  const [only] = sent;
  const insert =
    sent.length === 1 && only.dedupe
      ? insertKeyedEvent(names, { ...only, dedupe: only.dedupe })
      : insertKeyedEvents(names, sent);
  for (const r of await run<KeyedEventRow>(insert)) held.set(r.id, r.held_by ?? r.id);
  const holderOf = (group: EventRow[]) => held.get(group[0].id)!;
  const writtenHere = (group: EventRow[]) => holderOf(group) === group[0].id;

  // keys held by an earlier event: their replaces and debounces, applied to it as one after the other would be;
  // and those of keys written here whose first event may or may not be due (their rows after the first)
  const changing = groups.flatMap((g) => {
    if (!writtenHere(g)) return g.some(replaces) ? [{ holder: holderOf(g), rows: g }] : [];
    return foldsLater(g) ? [] : [{ holder: g[0].id, rows: g.slice(1) }];
  });
  const { asScheduled, asPending } = await replaceHeld(names, changing, run);

  const position = new Map<EventRow[], number>();
  const outcomes = rows.map((row, i): OutboxEnqueueOutcome => {
    const group = groupOf[i];
    const eventId = holderOf(group);
    const nth = position.get(group) ?? 0;
    position.set(group, nth + 1);
    if (writtenHere(group) && nth === 0) return { eventId, outcome: 'written' };
    if (!replaces(row)) return { eventId, outcome: 'ignored' };
    if (writtenHere(group) && foldsLater(group)) {
      // folded into the event written: a 'debounce' only when it is to come
      const folded = row.dedupe?.mode === 'replace' || whenWritten(group[0]) === 'toCome';
      return { eventId, outcome: folded ? 'replaced' : 'kept' };
    }
    const applied = asScheduled.has(eventId) || (row.dedupe?.mode === 'replace' && asPending.has(eventId));
    return { eventId, outcome: applied ? 'replaced' : 'kept' };
  });
  const rescheduled = changing.some((c) => asScheduled.has(c.holder) && c.rows.some(debounces));
  return { outcomes, written: sent.filter((r) => held.get(r.id) === r.id), rescheduled };
}

/**
 * Whether an event is written `scheduled` (its time `'toCome'`) or `pending` (`'due'`), when this process can tell:
 * a `delayMs` of at least a microsecond (the interval's precision) puts it after the transaction's `now()`, and
 * none or `0` at it. A `deliverAt` is compared with the database's clock, not this process's: `'unknown'`.
 */
function whenWritten(row: EventRow): 'toCome' | 'due' | 'unknown' {
  if ((row.deliverAt ?? null) !== null) return 'unknown';
  const delayMs = row.delayMs ?? 0;
  if (delayMs === 0) return 'due';
  return delayMs >= 0.001 ? 'toCome' : 'unknown';
}

/**
 * True when the later events of a key's group are folded into its first before the insert: always, unless a
 * later one debounces an event whose time only the database can tell (a debounce changes a scheduled event only).
 */
function foldsLater(group: EventRow[]): boolean {
  return whenWritten(group[0]) !== 'unknown' || !group.slice(1).some(debounces);
}

/**
 * The first event of a key's group as written when the key is free: the payload of its last later `'replace'`,
 * or `'debounce'` with the debounce's time when the first event's time is to come (else the debounce keeps it);
 * as given when the later ones are applied after the insert (`foldsLater`).
 */
function foldedFirst(group: EventRow[]): EventRow {
  const first = { ...group[0] };
  if (!foldsLater(group)) return first;
  const toCome = whenWritten(group[0]) === 'toCome';
  for (const row of group.slice(1)) {
    if (row.dedupe?.mode === 'replace' || (debounces(row) && toCome)) {
      first.payloadJson = row.payloadJson;
      first.schemaVersion = row.schemaVersion;
      if (debounces(row)) [first.deliverAt, first.delayMs] = [row.deliverAt, row.delayMs];
    }
  }
  return first;
}

/**
 * Applies the replaces and debounces of keys held by earlier events (`changes`: each holder, and the rows that
 * change it), as if enqueued one after the other. The held event is either scheduled — every one of them applies: the last one's payload, the last
 * debounce's time — or pending and not claimed — only the replaces apply: the last replace's payload — or claimed:
 * none applies. One statement asks for the first case (with a debounce, `outbox_dedupe_replace` changes only a
 * scheduled event); for the keys it did not change that have a replace, a second asks for the second case.
 * Returns the held events changed as scheduled (every replace and debounce applied) and as pending (the replaces).
 */
async function replaceHeld(
  names: OutboxNames,
  changes: readonly { holder: string; rows: EventRow[] }[],
  run: <T>(statement: SqlStatement) => Promise<T[]>,
): Promise<{ asScheduled: Set<string>; asPending: Set<string> }> {
  const replacedBy = async (rows: EventRow[]) => {
    const done = new Set<string>();
    if (rows.length === 0) return done;
    for (const r of await run<ReplacedPayloadRow>(replaceKeyedPayloads(names, rows))) {
      if (r.replaced) done.add(r.id);
    }
    return done;
  };
  const lastReplace = (g: EventRow[]) => g.findLast((r) => r.dedupe?.mode === 'replace');
  const asScheduled = await replacedBy(
    changes.map(({ holder, rows: g }) => {
      const last = g.findLast(replaces)!;
      const debounce = g.findLast(debounces);
      return {
        ...last,
        id: holder,
        deliverAt: debounce?.deliverAt,
        delayMs: debounce?.delayMs,
        dedupe: debounce?.dedupe ?? last.dedupe,
      };
    }),
  );
  const asPending = await replacedBy(
    changes
      .filter(({ holder, rows: g }) => g.some(debounces) && !asScheduled.has(holder) && lastReplace(g))
      .map(({ holder, rows: g }) => ({ ...lastReplace(g)!, id: holder })),
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
