import type { Client } from 'pg';
import type { SqlStatement } from '../../libs/outbox/src/store/sql';

/**
 * The shared buffers (hit + read) of one execution of `statement` on its generic plan, as the relay's named
 * statements run: prepared under `force_generic_plan`, executed five times first (each rolled back), then once
 * under `EXPLAIN (ANALYZE, BUFFERS)`, all in a transaction rolled back. Deterministic, unlike a time.
 */
export async function genericPlanBuffers(client: Client, statement: SqlStatement): Promise<number> {
  await client.query('begin');
  try {
    await client.query('set local plan_cache_mode = force_generic_plan');
    await client.query(`prepare probe as ${statement.text}`);
    const args = literalArguments(client, statement);
    for (let i = 0; i < 5; i++) {
      await client.query('savepoint s');
      await client.query(`execute probe(${args})`);
      await client.query('rollback to savepoint s');
    }
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(
      `explain (analyze, buffers, costs off, timing off, summary off) execute probe(${args})`,
    );
    const top = rows.map((r) => r['QUERY PLAN']).find((line) => /Buffers:/.test(line)) ?? '';
    return [...top.matchAll(/(?:hit|read)=(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
  } finally {
    await client.query('rollback');
    // a prepared statement outlives the transaction
    await client.query('deallocate probe').catch(() => undefined);
  }
}

/** `statement`'s values as the literal arguments of an `execute` of it (`$1…$n` in order, a null as `null`). */
export function literalArguments(client: Client, statement: SqlStatement): string {
  return (statement.values as unknown[])
    .map((v) =>
      v === null
        ? 'null'
        : Array.isArray(v)
          ? client.escapeLiteral(`{${v.map((x) => JSON.stringify(x)).join(',')}}`)
          : typeof v === 'number'
            ? String(v)
            : client.escapeLiteral(String(v as string)),
    )
    .join(', ');
}
