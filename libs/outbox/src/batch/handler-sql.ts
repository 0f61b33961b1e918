/**
 * What a handler's SQL does to the batch transaction and the session, read from its text: the first words of
 * each statement, outside string literals, quoted identifiers, dollar-quoted bodies and comments (so the
 * `begin … end` of a `do` block or a function body, or a `'commit'` literal, are not taken for statements).
 */
export interface HandlerSqlEffects {
  /** The first transaction-control statement (`commit`, `rollback`, `begin`, …), as written; null when none. */
  transactionControl: string | null;
  /**
   * A statement may change a setting or the role (`set`, `reset`, `discard`, `set_config(…)`), for the rest of
   * the batch transaction or for the session: the relay restores its own context after the handler.
   */
  changesSettings: boolean;
}

/** Reads `text` (see `HandlerSqlEffects`). */
export function handlerSqlEffects(text: string): HandlerSqlEffects {
  let transactionControl: string | null = null;
  let changesSettings = false;
  for (const words of statementHeads(text)) {
    const [first = '', second = '', third = ''] = words;
    if (transactionControl === null && isTransactionControl(first, second, third, words))
      transactionControl = words.join(' ');
    if (first === 'set' || first === 'reset' || first === 'discard') changesSettings = true;
  }
  // a function call can sit anywhere in a statement (and in functions it calls, which no text shows)
  if (/set_config/i.test(text)) changesSettings = true;
  return { transactionControl, changesSettings };
}

/**
 * `handlerSqlEffects`, remembered per text: a handler sends the same few texts (TypeORM's, or its own with bound
 * parameters) for every event, and reading each one again cost about 1.5 µs per query (ADR 1202). Up to
 * `READ_TEXTS` texts of at most `READ_TEXT_CHARS` characters are kept, the oldest dropped first; a longer text
 * (a statement built with its values in it) is read each time. One per dispatcher: apps never share one.
 */
export class HandlerSqlReader {
  private readonly known = new Map<string, HandlerSqlEffects>();

  /** Reads `text` (see `HandlerSqlEffects`). */
  read(text: string): HandlerSqlEffects {
    const known = this.known.get(text);
    if (known !== undefined) return known;
    const effects = handlerSqlEffects(text);
    if (text.length > READ_TEXT_CHARS) return effects;
    if (this.known.size >= READ_TEXTS) this.known.delete(this.known.keys().next().value!);
    this.known.set(text, effects);
    return effects;
  }
}

/** Texts a `HandlerSqlReader` keeps: more than the distinct statements of a usual app's handlers. */
const READ_TEXTS = 512;

/** The longest text a `HandlerSqlReader` keeps (8 KB a text at most, 4 MB in all). */
const READ_TEXT_CHARS = 4_096;

/** Savepoints a handler may not touch: the relay's own. */
const RELAY_SAVEPOINT = /^outbox_/i;

function isTransactionControl(first: string, second: string, third: string, words: string[]): boolean {
  switch (first) {
    case 'begin':
    case 'commit':
    case 'end':
    case 'abort':
      return true;
    case 'start':
      return second === 'transaction';
    case 'prepare':
      return second === 'transaction';
    case 'rollback': {
      // `rollback [work|transaction] to [savepoint] name`: a nested transaction's, unless it names the relay's
      const rest = words.slice(['work', 'transaction'].includes(second) ? 2 : 1);
      if (rest[0] !== 'to') return true;
      const name = rest[1] === 'savepoint' ? rest[2] : rest[1];
      return name === undefined || RELAY_SAVEPOINT.test(name);
    }
    case 'release': {
      const name = second === 'savepoint' ? third : second;
      return name === undefined || RELAY_SAVEPOINT.test(name);
    }
    case 'savepoint':
      return second === '' || RELAY_SAVEPOINT.test(second);
    default:
      return false;
  }
}

/** The first five words of each statement of `text`, lowercased (identifiers unquoted). */
function statementHeads(text: string): string[][] {
  const heads: string[][] = [];
  let words: string[] = [];
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text[i]!;
    if (c === ';') {
      if (words.length > 0) heads.push(words);
      words = [];
      i++;
    } else if (c === '-' && text[i + 1] === '-') {
      const end = text.indexOf('\n', i);
      i = end < 0 ? n : end + 1;
    } else if (c === '/' && text[i + 1] === '*') {
      // block comments nest in PostgreSQL
      let depth = 1;
      i += 2;
      while (i < n && depth > 0) {
        if (text[i] === '/' && text[i + 1] === '*') {
          depth++;
          i += 2;
        } else if (text[i] === '*' && text[i + 1] === '/') {
          depth--;
          i += 2;
        } else i++;
      }
    } else if (c === "'") {
      i = skipQuoted(text, i, "'");
      words.push('');
    } else if (c === '"') {
      const end = skipQuoted(text, i, '"');
      if (words.length < 5) words.push(text.slice(i + 1, end - 1).replace(/""/g, '"'));
      i = end;
    } else if (c === '$') {
      const tag = /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/.exec(text.slice(i));
      if (tag) {
        const end = text.indexOf(tag[0], i + tag[0].length);
        i = end < 0 ? n : end + tag[0].length;
        words.push('');
      } else i++;
    } else if (/[A-Za-z_]/.test(c)) {
      const word = /^[A-Za-z_][A-Za-z0-9_$]*/.exec(text.slice(i))![0];
      if ((word === 'e' || word === 'E') && text[i + 1] === "'") {
        // an escape string: a backslash escapes the next character, a quote included
        i = skipQuoted(text, i + 1, "'", true);
        words.push('');
        continue;
      }
      if (words.length < 5) words.push(word.toLowerCase());
      i += word.length;
    } else {
      if (!/\s/.test(c) && words.length < 5) words.push(c);
      i++;
    }
  }
  if (words.length > 0) heads.push(words);
  return heads;
}

/** The index after the closing quote of the literal or identifier opened at `start` (a doubled quote stays inside). */
function skipQuoted(text: string, start: number, quote: string, backslashes = false): number {
  let i = start + 1;
  while (i < text.length) {
    if (backslashes && text[i] === '\\') i += 2;
    else if (text[i] === quote) {
      if (text[i + 1] === quote) i += 2;
      else return i + 1;
    } else i++;
  }
  return text.length;
}
