/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/fairness-delay.ts`
 *
 * The small tenant's delay behind a backlog, counted rather than timed (ADR 1106, addendum "the delay in
 * batches"): the bench's fairness run (`bench/scenarios/fairness.scenario.ts`: the relay in the producer's app,
 * the library's defaults, a small tenant committing RATE events a second while another tenant drains BACKLOG
 * events, default 50,000) with an observer on the relay's hooks. For each of the small tenant's events, from its
 * commit (done, where the bench's clock starts): the backlogged tenant's events handled before the small one's
 * handler ran, its claims that came back before the small one's claim, and the rounds that ended meanwhile (the
 * event waited for a round's end: a lane free for tenants woken during a round did not take it). Issue 36's bound
 * is "about one batch": `relay.batchSize` events. Commit → handler in ms beside them, secondary (the machine's
 * load moves it). Variants in turns (TURNS, default 2): the fair shares on, and off.
 */
import { OUTBOX_DEFAULTS } from 'nestjs-pg-outbox';
import { OutboxInstrumentation } from '../../libs/outbox/src/extension/outbox-instrumentation';
import type { RelayPolicy } from '../../libs/outbox/src/options/relay-policy';
import { createBenchApp } from '../harness/bench-app';
import { FairnessConsumer } from '../harness/bench-consumers';
import { BENCH_EVENT } from '../harness/bench-database';
import { percentile, sleep, waitUntil } from '../harness/stats';
import { heading, inTurns, openDecisionDatabase, print, type DecisionDatabase } from './decision-server';

const BIG = '5eb0a1c4-0000-4000-8000-0000000000b1';
const SMALL = '5eb0a1c4-0000-4000-8000-0000000000c1';
const BACKLOG = Number(process.env.BACKLOG ?? 50_000);
const RATE = Number(process.env.RATE ?? 200);
const SECONDS = Number(process.env.SECONDS ?? 3);
/** Untimed: the drain under way, the backlogged tenant's claims grown while it had the relay to itself. */
const WARM_UP_EVENTS = 20;
/** `relay.batchSize` by default: issue 36's "about one batch". */
const BATCH = OUTBOX_DEFAULTS.relay.batchSize;

/** What one small-tenant event waited for, from its commit (done) to its claim and its handler. */
interface Waited {
  /** The backlogged tenant's events handled between the commit and the small event's handler. */
  events: number;
  /** The backlogged tenant's claims that came back between the commit and the small event's claim. */
  claims: number;
  /** Rounds that ended between the commit and the small event's claim: it waited for a round's end. */
  rounds: number;
  /** Commit to handler, ms (as the bench times it; secondary: the machine's load moves it). */
  ms: number;
}

/** The relay's counters at a moment: the backlogged tenant's claims and handled events, rounds ended. */
interface Counters {
  claims: number;
  events: number;
  rounds: number;
  at: number;
}

/** The small tenant's events and what each waited for, with `backlog` events of the big tenant due at the start. */
async function run(decision: DecisionDatabase, policy: Partial<RelayPolicy>): Promise<Waited[]> {
  const { db } = decision;
  await db.truncate();
  await db.loadPendingEvents(BACKLOG, BIG);
  await db.vacuumAnalyze();
  const app = await createBenchApp({
    url: db.url,
    consumers: [FairnessConsumer],
    relay: { enabled: true },
    applicationName: 'decision-fairness-delay',
    probe: false,
    policy,
  });
  const consumer = app.context.get(FairnessConsumer);
  consumer.watched.add(SMALL);
  let bigClaims = 0;
  let rounds = 0;
  const counters = (): Counters => ({
    claims: bigClaims,
    events: consumer.count(BIG),
    rounds,
    at: performance.now(),
  });
  const atCommit = new Map<string, Counters>();
  const atClaim = new Map<string, Counters>();
  const atHandler = new Map<string, Counters>();
  app.context.get(OutboxInstrumentation).add({
    roundEnded: () => void rounds++,
    batchClaimed: ({ tenantId, deliveries }) => {
      if (tenantId === BIG) bigClaims++;
      else for (const delivery of deliveries) atClaim.set(delivery.eventId, counters());
    },
  });
  const handle = consumer.handle.bind(consumer);
  consumer.handle = (event) => {
    if (event.tenantId === SMALL) atHandler.set(event.eventId, counters());
    handle(event);
  };
  try {
    // the counters once the commit is done, where the bench's clock starts (its wake-up has been sent then)
    const produce = async (timed: boolean): Promise<void> => {
      const id = await app.dataSource.transaction((manager) =>
        app.outbox.enqueue(manager, { tenantId: SMALL, eventName: BENCH_EVENT, payload: {} }),
      );
      if (timed) atCommit.set(id, counters());
    };
    for (let i = 0; i < WARM_UP_EVENTS; i++) await Promise.all([produce(false), sleep(1000 / RATE)]);
    const produced: Promise<void>[] = [];
    for (let i = 0; i < RATE * SECONDS && consumer.count(BIG) < BACKLOG * 0.9; i++) {
      produced.push(produce(true));
      await sleep(1000 / RATE);
    }
    await Promise.all(produced);
    await waitUntil(() => [...atCommit.keys()].every((id) => atHandler.has(id)), 30_000);
    // a claim or a handler before the producer's `await` came back counts as none waited for (never below 0)
    return [...atCommit].map(([id, commit]) => {
      const claim = atClaim.get(id)!;
      const handler = atHandler.get(id)!;
      return {
        events: Math.max(0, handler.events - commit.events),
        claims: Math.max(0, claim.claims - commit.claims),
        rounds: Math.max(0, claim.rounds - commit.rounds),
        ms: Math.max(0, handler.at - commit.at),
      };
    });
  } finally {
    await app.close();
  }
}

/** What an event waited for: the backlogged tenant's events handled before it, and a round's end or none. */
function kind(w: Waited): string {
  return `${w.events} events${w.rounds > 0 ? ", a round's end" : ''}`;
}

/** Each count of `values`, in order: "0 ×412, 100 ×180, …". */
function histogram(values: readonly number[]): string {
  const counts = new Map<number, number>();
  for (const value of values) counts.set(value, (counts.get(value) ?? 0) + 1);
  return [...counts]
    .sort(([a], [b]) => a - b)
    .map(([value, n]) => `${value} ×${n}`)
    .join(', ');
}

async function main(): Promise<void> {
  const decision = await openDecisionDatabase();
  heading(
    `The small tenant's wait behind a ${BACKLOG.toLocaleString('en-US')}-event backlog, counted in the backlogged tenant's events, claims and rounds (ADR 1106)`,
    decision.serverVersion,
  );
  print(
    `  the library's defaults (relay.batchSize ${BATCH}); small tenant ${RATE}/s for up to ${SECONDS} s after ${WARM_UP_EVENTS} untimed`,
  );
  const variants = { 'shares on': {}, 'shares off': { fairShares: false } } as const;
  type Variant = keyof typeof variants;
  try {
    const figures = await inTurns<Variant, string>(
      Object.keys(variants) as Variant[],
      Number(process.env.TURNS ?? 2),
      async (variant) => {
        const waited = await run(decision, variants[variant]);
        const share = (test: (w: Waited) => boolean): number =>
          (waited.filter(test).length / waited.length) * 100;
        const events = waited.map((w) => w.events);
        const ms = waited.map((w) => w.ms);
        print(`  ${variant}, ${waited.length} events:`);
        print(`    backlogged tenant's events handled, commit → handler: ${histogram(events)}`);
        print(`    its claims, commit → small claim: ${histogram(waited.map((w) => w.claims))}`);
        print(`    rounds ended, commit → small claim: ${histogram(waited.map((w) => w.rounds))}`);
        print(
          `    commit → handler: p50 ${percentile(ms, 50)!.toFixed(1)} ms, p99 ${percentile(ms, 99)!.toFixed(1)} ms`,
        );
        // which waits the slowest 1 % had, and what each kind of wait takes
        const slowest = [...waited].sort((a, b) => b.ms - a.ms).slice(0, Math.ceil(waited.length / 100));
        print(`    the slowest 1 %: ${slowest.map((w) => `${w.ms.toFixed(1)} ms (${kind(w)})`).join(', ')}`);
        const kinds = new Map<string, number[]>();
        for (const w of waited) kinds.set(kind(w), [...(kinds.get(kind(w)) ?? []), w.ms]);
        for (const [name, values] of [...kinds].sort())
          print(
            `      ${name}: ${values.length} events, p50 ${percentile(values, 50)!.toFixed(1)} ms, p99 ${percentile(values, 99)!.toFixed(1)} ms`,
          );
        return {
          "backlogged tenant's events before the handler, p99": percentile(events, 99)!,
          'events behind more than one batch, %': share((w) => w.events > BATCH),
          "events that waited for a round's end, %": share((w) => w.rounds > 0),
          'commit → handler p99, ms': percentile(ms, 99)!,
        };
      },
    );
    print('  each run, in turns:');
    for (const [figure, runs] of figures)
      print(
        `    ${figure.padEnd(56)} ${[...runs].map(([v, values]) => `${v} ${values.map((x) => x.toFixed(1)).join(' / ')}`).join('; ')}`,
      );
  } finally {
    await decision.close();
  }
}

void main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
