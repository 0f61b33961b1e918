import { escapeLiteral } from 'pg';
// pg's own conversion of a JS value to its text form (arrays to array literals, dates, JSON), as used for
// parameters; exported by the package (`pg/lib/*`), though not declared in its types.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { prepareValue } = require('pg/lib/utils') as { prepareValue(value: unknown): string | null };
import type { SqlStatement } from './sql';

/**
 * A statement with its `$n` parameters replaced by literals, for sending several statements in one round trip
 * (PostgreSQL's simple protocol takes no parameters). Values go through pg's own text conversion and
 * `escapeLiteral`, so a string can never end its literal; finite numbers and booleans are written as they are;
 * NUL characters, which PostgreSQL text cannot hold, become U+FFFD. The statements of `store/sql` never
 * hold a `$` of their own outside parameters.
 */
export function inlineStatement({ text, values }: SqlStatement): string {
  return text.replace(/\$(\d+)/g, (_, n: string) => {
    const index = Number(n) - 1;
    if (index < 0 || index >= values.length) throw new Error(`statement has no value for $${n}: ${text}`);
    return literal(values[index]);
  });
}

/**
 * `prepare` of a statement with a prepared form, as a `do` block that first drops an older statement of the
 * same name on this connection, if any: so it never fails whatever the connection holds.
 */
export function preparePrepared({ text, prepared }: Pick<SqlStatement, 'text' | 'prepared'>): string {
  const { name, types } = checkedForm(prepared);
  const prepare = `prepare ${name}(${types.join(', ')}) as ${text}`;
  return `do $outbox_prepare$ begin
  if exists (select from pg_catalog.pg_prepared_statements where name = ${escapeLiteral(name)}) then
    execute ${escapeLiteral(`deallocate ${name}`)};
  end if;
  execute ${escapeLiteral(prepare)};
end $outbox_prepare$`;
}

/** `execute` of a statement with a prepared form, its values written in as literals (see `inlineStatement`). */
export function executePrepared({ values, prepared }: SqlStatement): string {
  const { name, types } = checkedForm(prepared);
  if (values.length !== types.length)
    throw new Error(`prepared statement ${name} takes ${types.length} values, got ${values.length}`);
  return values.length === 0 ? `execute ${name}` : `execute ${name}(${values.map(literal).join(', ')})`;
}

function checkedForm(prepared: SqlStatement['prepared']): NonNullable<SqlStatement['prepared']> {
  if (!prepared || !/^[a-z_][a-z0-9_]*$/.test(prepared.name))
    throw new Error(`not a prepared statement name: ${prepared?.name}`);
  return prepared;
}

function literal(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error(`cannot send the number ${value} to PostgreSQL`);
    // in parentheses: after a `-` of the statement, a negative number would otherwise start a `--` comment
    return value < 0 ? `(${value})` : String(value);
  }
  if (typeof value === 'boolean') return String(value);
  if (typeof value === 'string') return quote(value);
  const text = (Array.isArray(value) ? arrayText(value) : null) ?? prepareValue(value);
  return text === null ? 'null' : quote(text);
}

/**
 * A string literal, as pg's `escapeLiteral` writes it (quotes and backslashes doubled, an `E''` string with a
 * leading space when there is a backslash), but without building it a character at a time: the relay's
 * statements carry arrays of hundreds of values per batch, and that copy was half of what the relay allocated.
 * NUL characters, which PostgreSQL text cannot hold, become U+FFFD.
 */
function quote(raw: string): string {
  const text = raw.includes('\u0000') ? raw.replace(/\u0000/g, '\uFFFD') : raw;
  const backslash = text.includes('\\');
  if (!backslash && !text.includes("'")) return `'${text}'`;
  const escaped = `'${text.replace(/'/g, "''").replace(/\\/g, '\\\\')}'`;
  return backslash ? ` E${escaped}` : escaped;
}

/** An array element PostgreSQL reads as written, unquoted: no quote, brace, comma, backslash or space. */
const BARE_ELEMENT = /^[\w.:@+-]+$/;
/** …and not the word NULL, which an unquoted element means. */
const NULL_WORD = /^null$/i;

/**
 * The text of an array literal for a flat array of strings, finite numbers, booleans and nulls — read by
 * PostgreSQL as pg's `prepareValue` text would be, elements that need no quotes (UUIDs, numbers, names) left
 * bare; null for any other array (nested, dates, objects: left to pg).
 */
export function arrayText(values: readonly unknown[]): string | null {
  const parts: string[] = [];
  for (const v of values) {
    if (v === null || v === undefined) parts.push('NULL');
    else if (typeof v === 'string') {
      parts.push(
        BARE_ELEMENT.test(v) && !NULL_WORD.test(v) ? v : `"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`,
      );
    } else if ((typeof v === 'number' && Number.isFinite(v)) || typeof v === 'boolean') parts.push(String(v));
    else return null;
  }
  return `{${parts.join(',')}}`;
}

/**
 * A handler's parameterised query as one simple-protocol statement, or null when it cannot be written so with
 * certainty (then it goes as it came, with its parameters). Every value becomes a quoted literal, exactly the
 * text pg would send as an untyped parameter, so the server infers the same types. Refused: text with a
 * single quote, a `;`, a comment, a `$` that is not a parameter or one inside a quoted identifier (a literal
 * there could change what the text means), and values pg sends in binary (Buffers) or PostgreSQL refuses (NUL
 * characters: left to the server to reject with its own error).
 */
export function inlineParameters(text: string, values: readonly unknown[] | undefined): string | null {
  let out = '';
  let quotedIdentifier = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === '"') quotedIdentifier = !quotedIdentifier;
    else if (c === '$') {
      if (quotedIdentifier) return null;
      const digits = /^\d+/.exec(text.slice(i + 1))?.[0];
      if (!digits || /[\w$]/.test(text[i - 1] ?? '')) return null;
      const index = Number(digits) - 1;
      if (!values || index < 0 || index >= values.length) return null;
      const value = parameterLiteral(values[index]);
      if (value === null) return null;
      out += value;
      i += digits.length;
      continue;
    } else if (
      !quotedIdentifier &&
      (c === "'" || c === ';' || text.startsWith('--', i) || text.startsWith('/*', i))
    ) {
      return null;
    }
    out += c;
  }
  return quotedIdentifier ? null : out;
}

/** The literal pg's text parameter would be, or null for a value that cannot be inlined faithfully. */
function parameterLiteral(value: unknown): string | null {
  if (value === null || value === undefined) return 'null';
  if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) return null;
  const text = prepareValue(value);
  if (text === null) return 'null';
  if (typeof text !== 'string' || text.includes('\u0000')) return null;
  return escapeLiteral(text);
}
