/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/claim-transaction.ts`
 *
 * The relay's claim transaction alone, as the relay sends it on a pipelined connection — `begin`, the relay's
 * context, the generic-plan setting, the fan-out as a named statement, `commit` — timed from the first write to
 * the last result, CLAIMS (default 30) claims per variant and turn, each of BATCH (default 100) pending events for
 * two in-process consumers. The fan-out's transaction, and one change at a time against it:
 * - `lean claim`: the lean claim of new events (ADR 0804) in place of the fan-out, as the relay sends it where its
 *   policy has `leanClaim` and every consumer is in-process here (as in this set-up); the fan-out is what the
 *   relay sends with `leanClaim` off;
 * - `durable`: the claim commits with `synchronous_commit = on` (ADR 0605);
 * - `jit on`: JIT left at the server's settings, and `jit on every plan`: every plan compiled whatever its
 *   estimated cost, as a plan whose estimate passes `jit_above_cost` is (ADR 0605; only where the server has
 *   LLVM, e.g. Debian's PostgreSQL 15 — run with DATABASE_URL there);
 * - `unnamed`: the fan-out planned for its values at each claim instead of a named statement's generic plan
 *   (ADR 0502), for claims of BATCH events and of 1;
 * - `registry of 200 more`: 200 more consumers in the persisted registry, listening to other events (ADR 0608).
 */
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { OUTBOX_DEFAULTS } from 'nestjs-pg-outbox';
import { BENCH_TENANT, type BenchDatabase } from '../harness/bench-database';
import { CONSUMER_NAMES } from '../harness/bench-consumers';
import { median, now } from '../harness/stats';
import {
  claimNewEvents,
  fanOutPendingEvents,
  genericPlans,
  heartbeatConsumers,
  outboxNames,
  setTransactionContext,
  type SqlStatement,
} from '../../libs/outbox/src/store/sql';
import { compare, heading, inTurns, openDecisionDatabase, print } from './decision-server';

const NAMES = outboxNames();

const CLAIMS = Number(process.env.CLAIMS ?? 30);
const BATCH = Number(process.env.BATCH ?? 100);
const TURNS = Number(process.env.TURNS ?? 2);
const CONSUMERS = CONSUMER_NAMES['no-db'];
const EXTRA_CONSUMERS = 200;
/** What test/relay/relay-jit.e2e-spec.ts asks of its database: every plan compiled, inlined and optimised. */
const JIT_EVERY_PLAN = `select set_config('jit_above_cost', '0', true), set_config('jit_inline_above_cost', '0', true),
                               set_config('jit_optimize_above_cost', '0', true)`;

type Variant =
  'fan-out' | 'lean claim' | 'durable' | 'jit on' | 'jit on every plan' | 'unnamed' | 'registry of 200 more';

interface ClaimShape {
  size: number;
  durable: boolean;
  /** JIT as the server has it (`on`), or for every plan whatever its cost (`every plan`). */
  jit: false | 'on' | 'every plan';
  named: boolean;
  extraConsumers: boolean;
  /** The lean claim (the policy's `leanClaim`) in place of the fan-out. */
  lean: boolean;
}

const SHAPES: Record<Variant, Omit<ClaimShape, 'size'>> = {
  'fan-out': { durable: false, jit: false, named: true, extraConsumers: false, lean: false },
  'lean claim': { durable: false, jit: false, named: true, extraConsumers: false, lean: true },
  durable: { durable: true, jit: false, named: true, extraConsumers: false, lean: false },
  'jit on': { durable: false, jit: 'on', named: true, extraConsumers: false, lean: false },
  'jit on every plan': { durable: false, jit: 'every plan', named: true, extraConsumers: false, lean: false },
  unnamed: { durable: false, jit: false, named: false, extraConsumers: false, lean: false },
  'registry of 200 more': { durable: false, jit: false, named: true, extraConsumers: true, lean: false },
};

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase();
  try {
    heading(`The claim transaction: ${CLAIMS} claims per variant and turn, ${TURNS} turns`, serverVersion);
    const [jit] = await db.sql<{ available: boolean }>('select pg_jit_available() as available');
    const variants: Variant[] = ['fan-out', 'lean claim', 'durable', 'unnamed', 'registry of 200 more'];
    if (jit!.available) variants.splice(2, 0, 'jit on', 'jit on every plan');
    else print('  (no JIT on this server: the "jit on" variant needs PostgreSQL built with LLVM)');
    for (const size of [BATCH, 1]) {
      const shown = size === BATCH ? variants : (['fan-out', 'lean claim', 'unnamed'] as Variant[]);
      const figures = await inTurns(shown, TURNS, async (variant) => {
        const times = await claims(db, { size, ...SHAPES[variant] });
        return { p50: median(times) };
      });
      compare(
        `claim of ${size} event${size === 1 ? '' : 's'}: median time per claim transaction`,
        'ms',
        figures.get('p50')!,
      );
    }
  } finally {
    await close();
  }
}

/** Loads CLAIMS × size pending events and times CLAIMS claims of `size` on one pipelined connection. */
async function claims(db: BenchDatabase, shape: ClaimShape): Promise<number[]> {
  await db.resetWithPendingEvents(CLAIMS * shape.size);
  const registered = shape.extraConsumers
    ? [...CONSUMERS, ...Array.from({ length: EXTRA_CONSUMERS }, (_, i) => `other.consumer.${i}`)]
    : CONSUMERS;
  const registry = heartbeatConsumers(
    NAMES,
    'decision-claims',
    registered.map((name) => ({
      name,
      eventNames: [CONSUMERS.includes(name) ? 'bench.*' : `other.topic${name.slice(-3)}.*`],
      kind: 'in-process',
    })),
  );
  await db.sql(registry.text, registry.values as unknown[]);
  await db.sql('analyze');
  const client = new Client({ connectionString: db.url, application_name: 'decision-claims' });
  await client.connect();
  (client as { pipeline: boolean }).pipeline = true;
  const name = `decision_fan_out_${randomUUID().slice(0, 8)}`;
  const times: number[] = [];
  try {
    for (let i = 0; i < CLAIMS; i++) {
      const claim = {
        tenantId: BENCH_TENANT,
        inProcess: CONSUMERS,
        liveWithinMs: OUTBOX_DEFAULTS.registry.liveWithinMs,
        limit: shape.size,
        leaseToken: randomUUID(),
        leaseMs: OUTBOX_DEFAULTS.relay.leaseMs,
      };
      const fanOut = shape.lean
        ? claimNewEvents(NAMES, claim)
        : fanOutPendingEvents(NAMES, { ...claim, hosted: CONSUMERS, tenantConsumers: [] });
      const steps: (SqlStatement & { name?: string })[] = [
        { text: 'begin', values: [] },
        setTransactionContext(OUTBOX_DEFAULTS.tenantSetting, BENCH_TENANT, OUTBOX_DEFAULTS.relay.leaseMs, {
          durable: shape.durable,
        }),
        ...(shape.jit ? [{ text: `select set_config('jit', 'on', true)`, values: [] }] : []),
        ...(shape.jit === 'every plan' ? [{ text: JIT_EVERY_PLAN, values: [] }] : []),
        ...(shape.named ? [genericPlans(true), { ...fanOut, name }] : [fanOut]),
        { text: 'commit', values: [] },
      ];
      const began = now();
      const results = await Promise.all(
        steps.map((s) => client.query({ text: s.text, values: s.values as unknown[], name: s.name })),
      );
      times.push(now() - began);
      const leased = (results.at(-2)!.rows[0] as { leases: unknown[] }).leases.length;
      if (leased !== shape.size) throw new Error(`a claim leased ${leased} events, not ${shape.size}`);
    }
  } finally {
    await client.end();
  }
  return times;
}

void main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
