import { createHash } from 'node:crypto';
import type { PoolClient } from 'pg';
import {
  claimDueText,
  claimNewText,
  fanOutText,
  handlerContext,
  pairOutcomeText,
  type OutboxNames,
  type SqlStatement,
} from './sql';

/**
 * A hash of the texts of every statement with a prepared form, in the schema of `n`: the texts name the
 * schema's tables, so each schema's statements get names of their own.
 */
function preparedTextsHash(n: OutboxNames): string {
  return createHash('sha1')
    .update(fanOutText(n))
    .update(claimNewText(n))
    .update(claimDueText(n))
    .update(pairOutcomeText(n))
    .update(handlerContext('', '', 0).text)
    .digest('hex');
}

/**
 * The name a statement with a prepared form has on a connection: its start (`FAN_OUT_NAME`,
 * `PAIR_OUTCOME_NAME`) and a hash of every such statement's text (`textsHash`, see `preparedTextsHash`) and of
 * the connection's `generation` of them. A change to any text renames them all, so two versions of the library
 * on one server, or two schemas' outboxes on one connection pool, never mistake each other's statements; a new
 * generation (see `PreparedStatements`) is parsed — and planned — anew.
 */
function preparedName(start: string, textsHash: string, generation: number): string {
  const hash = createHash('sha1').update(textsHash).update(String(generation)).digest('hex').slice(0, 12);
  return `${start}_${hash}`;
}

/**
 * How long a connection uses a generation of its named statements before making the next one: 1 s after the
 * first use, then twice as long each time, ten generations in all (the last made about 17 minutes in). A generic
 * plan is made with the table sizes of its first execution: a new database's first claims see nearly empty
 * tables, whose plan should not last while they fill up. Later growth is followed by PostgreSQL itself: an
 * ANALYZE (autovacuum's included) invalidates the plans over the tables it analyzed, and the next execution plans
 * anew. Bounded, because pg keeps every name it parsed for as long as the connection lives. See
 * docs/adr/0502-named-statements-and-their-refresh.md.
 */
const REFRESH_AFTER_MS: readonly number[] = Array.from({ length: 10 }, (_, i) => 1000 * 2 ** i);

/** Per connection: which generation of names it uses, and when the next one is due. */
interface Generation {
  number: number;
  /** Epoch ms after which the next generation is made (Infinity: never). */
  until: number;
  /** The generation's names by their start, made once (a name is a hash: not made again per round trip). */
  names: Map<string, string>;
}

/**
 * The names of the relay's named statements on each pooled connection (`preparedStatements`). pg parses
 * a named statement once per connection and keeps it (its own cache); a new generation gets new names, so pg
 * parses them anew — after the refresh periods above, or when the server lost them (`discard all`, a pooler
 * that moved the session to another server: SQLSTATE 26000).
 */
export class PreparedStatements {
  private readonly generations = new WeakMap<PoolClient, Generation>();
  /** The hash of the module's statement texts (see `preparedTextsHash`): part of every name. */
  private readonly textsHash: string;

  /**
   * @param enabled the policy's `namedStatements`: without it every statement runs unnamed.
   * @param names the module's table names, which the statements' texts hold.
   */
  constructor(
    private readonly enabled: boolean,
    names: OutboxNames,
  ) {
    this.textsHash = preparedTextsHash(names);
  }

  /** The name `statement` runs under on `connection`, or undefined when it runs unnamed. */
  nameOn(connection: PoolClient, statement: SqlStatement): string | undefined {
    if (!this.enabled || statement.prepared === undefined) return undefined;
    let generation = this.generations.get(connection);
    if (!generation) {
      generation = { number: 0, until: Date.now() + REFRESH_AFTER_MS[0]!, names: new Map() };
      this.generations.set(connection, generation);
    }
    let name = generation.names.get(statement.prepared);
    if (name === undefined) {
      name = preparedName(statement.prepared, this.textsHash, generation.number);
      generation.names.set(statement.prepared, name);
    }
    return name;
  }

  /** True when the connection's named statements are due for their next generation. */
  due(connection: PoolClient): boolean {
    const generation = this.generations.get(connection);
    return generation !== undefined && Date.now() >= generation.until;
  }

  /**
   * Moves the connection to its next generation and returns the names of the one it leaves (to deallocate on
   * the server), or [] when it had none.
   */
  next(connection: PoolClient, starts: readonly string[]): string[] {
    const generation = this.generations.get(connection);
    if (!generation) return [];
    const left = starts.map((start) => preparedName(start, this.textsHash, generation.number));
    generation.number++;
    generation.names = new Map();
    const after = REFRESH_AFTER_MS[generation.number];
    generation.until = after === undefined ? Infinity : Date.now() + after;
    return left;
  }
}
