import { escapeLiteral } from 'pg';
// pg's own conversion of a JS value to its text form (arrays to array literals, dates, JSON), as used for
// parameters; exported by the package (`pg/lib/*`), though not declared in its types.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { prepareValue } = require('pg/lib/utils') as { prepareValue(value: unknown): string | null };
import type { SqlStatement } from './outbox.queries';

/**
 * A statement with its `$n` parameters replaced by literals, for sending several statements in one round trip
 * (PostgreSQL's simple protocol takes no parameters). Values go through pg's own text conversion and
 * `escapeLiteral`, so a string can never end its literal; finite numbers and booleans are written as they are;
 * NUL characters, which PostgreSQL text cannot hold, become U+FFFD. The statements of `outbox.queries` never
 * hold a `$` of their own outside parameters.
 */
export function inlineStatement({ text, values }: SqlStatement): string {
  return text.replace(/\$(\d+)/g, (_, n: string) => {
    const index = Number(n) - 1;
    if (index < 0 || index >= values.length) throw new Error(`statement has no value for $${n}: ${text}`);
    return literal(values[index]);
  });
}

function literal(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error(`cannot send the number ${value} to PostgreSQL`);
    // in parentheses: after a `-` of the statement, a negative number would otherwise start a `--` comment
    return value < 0 ? `(${value})` : String(value);
  }
  if (typeof value === 'boolean') return String(value);
  const text = prepareValue(value);
  return text === null ? 'null' : escapeLiteral(text.replace(/\u0000/g, '\uFFFD'));
}
