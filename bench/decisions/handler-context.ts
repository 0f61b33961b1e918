/**
 * `node --conditions=@nestjs-pg-outbox/source -r @swc-node/register bench/decisions/handler-context.ts`
 *
 * What a writing handler's context statement costs (ADR 0801): on one pg connection in pipeline mode, inside one
 * transaction, HANDLERS (default 5,000) handler round trips — the context statement, the savepoint (releasing the
 * one before), an insert — with the context unnamed (parsed and planned every time), named (parsed once, as
 * shipped), and left out (the bound: what a handler's round trip costs without it), in turns. Time and Node CPU
 * per handler.
 */
import 'reflect-metadata';
import { Client } from 'pg';
import { handlerContext } from '../../libs/outbox/src/store/sql';
import { now } from '../harness/stats';
import { compare, heading, inTurns, openDecisionDatabase } from './decision-server';

const HANDLERS = Number(process.env.HANDLERS ?? 5_000);
const TURNS = Number(process.env.TURNS ?? 3);
const SETTING = 'app.current_tenant_id';
const TENANT = '5eb0a1c4-0000-4000-8000-000000000001';

type Variant = 'context named (as shipped)' | 'context unnamed' | 'no context (bound)';

async function main(): Promise<void> {
  const { db, serverVersion, close } = await openDecisionDatabase();
  const client = new Client({ connectionString: db.url });
  await client.connect();
  try {
    heading(
      `${HANDLERS.toLocaleString('en-US')} handler round trips per variant, ${TURNS} turns`,
      serverVersion,
    );
    (client as { pipeline: boolean }).pipeline = true;
    const context = handlerContext(SETTING, TENANT, 30_000);
    const figures = await inTurns<Variant, 'µs per handler' | 'Node CPU µs per handler'>(
      ['context named (as shipped)', 'context unnamed', 'no context (bound)'],
      TURNS,
      async (variant) => {
        await client.query('begin');
        await client.query('create temp table effects (n int) on commit drop');
        const began = now();
        const cpu = process.cpuUsage();
        for (let i = 0; i < HANDLERS; i++) {
          const sent: Promise<unknown>[] = [];
          if (variant !== 'no context (bound)')
            sent.push(
              client.query({
                text: context.text,
                values: context.values,
                ...(variant === 'context named (as shipped)' ? { name: 'decision_handler_context' } : {}),
              }),
            );
          sent.push(client.query(`${i > 0 ? `release savepoint h${i - 1}; ` : ''}savepoint h${i}`));
          sent.push(client.query('insert into effects (n) values ($1)', [i]));
          await Promise.all(sent);
        }
        const spent = process.cpuUsage(cpu);
        const ms = now() - began;
        await client.query('rollback');
        return {
          'µs per handler': (ms * 1000) / HANDLERS,
          'Node CPU µs per handler': (spent.user + spent.system) / HANDLERS,
        };
      },
    );
    for (const [figure, runs] of figures) compare(figure, '', runs);
  } finally {
    await client.end();
    await close();
  }
}

void main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
