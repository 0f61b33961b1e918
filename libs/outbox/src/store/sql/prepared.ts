import { createHash } from 'node:crypto';
import { FAN_OUT_TEXT } from './fan-out';
import { PAIR_OUTCOME_TEXT } from './record-outcomes';

/** A hash of the texts of every statement with a prepared form. */
const TEXTS_HASH = createHash('sha1').update(FAN_OUT_TEXT).update(PAIR_OUTCOME_TEXT).digest('hex');

/**
 * The name a statement with a prepared form has on a connection: its start (`FAN_OUT_NAME`,
 * `PAIR_OUTCOME_NAME`) and a hash of every such statement's text and of the connection's `generation` of them.
 * A change to any text renames them all, so two versions of the library on one server never mistake each
 * other's statements; a new generation (see `PreparedStatements` in the store) is parsed — and planned — anew.
 */
export function preparedName(start: string, generation: number): string {
  const hash = createHash('sha1').update(TEXTS_HASH).update(String(generation)).digest('hex').slice(0, 12);
  return `${start}_${hash}`;
}
