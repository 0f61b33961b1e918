import type { PoolClient, QueryResult } from 'pg';
import { sendAll, type Sent } from './pipeline';
import { sendSteps, type RelayTransport, type Step } from './pipelined-steps';
import type { SqlStatement } from './sql';
import { bytesPer } from '../../../../test/support/allocated-bytes';

/** A pg client whose queries are answered at once, each with one row naming its text (and its name, if any). */
class AnsweringClient {
  static Query = class {
    name?: string;
    constructor(
      readonly text: string,
      readonly values: unknown[],
      readonly callback: (error: unknown, result: Pick<QueryResult, 'rows'>) => void,
    ) {}
  };
  /** What it was sent, when it records (not while allocations are counted). */
  sent: string[] | null = [];
  readonly connection = { stream: { cork: () => undefined, uncork: () => undefined } };
  query(query: InstanceType<typeof AnsweringClient.Query>): void {
    if (this.sent === null) return query.callback(null, ANSWER);
    const sent = query.name === undefined ? query.text : `${query.text} as ${query.name}`;
    this.sent.push(sent);
    query.callback(null, { rows: [sent] });
  }
}

const ANSWER = { rows: [] };
const statement = (text: string, more: Partial<SqlStatement> = {}): SqlStatement => ({
  text,
  values: [],
  ...more,
});
const CONTEXT = statement('context', { values: ['t'], withGenericPlans: statement('context, generic') });
const CLAIM = statement('claim', { values: ['t'] });

/** Names the claim only, as prepared statements do for the statements with a prepared form. */
function transport(oneWrite = true): RelayTransport {
  return {
    prepared: { nameOn: (_connection: unknown, s: SqlStatement) => (s === CLAIM ? 'claim_1' : undefined) },
    policy: { oneWrite },
  } as unknown as RelayTransport;
}

describe('sendSteps', () => {
  it("sends each step, a named one after its context's generic plans, and returns each step's rows", async () => {
    const client = new AnsweringClient();
    const steps: Step[] = [statement('begin'), CONTEXT, CLAIM, null, statement('commit')];
    const rows = await sendSteps(transport(), client as unknown as PoolClient, steps);
    expect(client.sent).toEqual(['begin', 'context, generic', 'claim as claim_1', 'commit']);
    expect(rows).toEqual([['begin'], ['context, generic'], ['claim as claim_1'], [], ['commit']]);
  });

  it('sends what TypeORM sends itself last, and waits for it', async () => {
    const client = new AnsweringClient();
    let closed = false;
    const last = (): Promise<void> => {
      client.sent!.push('COMMIT');
      return Promise.resolve().then(() => void (closed = true));
    };
    const rows = await sendSteps(transport(false), client as unknown as PoolClient, [CONTEXT], last);
    expect(client.sent).toEqual(['context', 'COMMIT']);
    expect(rows).toEqual([['context']]);
    expect(closed).toBe(true);
  });

  it('makes no closure per round trip beside what sendAll makes', async () => {
    const answering = new AnsweringClient();
    answering.sent = null;
    const client = answering as unknown as PoolClient;
    const relay = transport();
    const steps: Step[] = [statement('begin'), CONTEXT, CLAIM, null, null, statement('commit')];
    const sent: Sent[] = [
      { statement: steps[0]! },
      { statement: CONTEXT.withGenericPlans! },
      { statement: CLAIM, name: 'claim_1' },
      { statement: steps[5]! },
    ];
    const through = async (count: number): Promise<void> => {
      for (let i = 0; i < count; i++) await sendSteps(relay, client, steps);
    };
    // the same statements and promises: sendAll awaited in an async function of its own
    const sendAllIn = async (): Promise<QueryResult[]> => await sendAll(client, sent);
    const alone = async (count: number): Promise<void> => {
      for (let i = 0; i < count; i++) await sendAllIn();
    };
    await through(20_000);
    await alone(20_000);
    const added = (await bytesPer(through, 50_000)) - (await bytesPer(alone, 50_000));
    // 768 bytes (what it sends, the steps' places among them, their rows); 952 with the closures of two `map`s and
    // of the write that every round trip made before
    expect(added).toBeLessThan(860);
  });
});
