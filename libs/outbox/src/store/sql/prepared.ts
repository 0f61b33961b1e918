import { createHash } from 'node:crypto';
import { claimNewText } from './claim-new';
import { fanOutText } from './fan-out';
import { pairOutcomeText } from './record-outcomes';
import { handlerContext } from './transaction-context';
import type { OutboxNames } from '../../model/table-names';

/**
 * A hash of the texts of every statement with a prepared form, in the schema of `n`: the texts name the
 * schema's tables, so each schema's statements get names of their own.
 */
export function preparedTextsHash(n: OutboxNames): string {
  return createHash('sha1')
    .update(fanOutText(n))
    .update(claimNewText(n))
    .update(pairOutcomeText(n))
    .update(handlerContext('', '', 0).text)
    .digest('hex');
}

/**
 * The name a statement with a prepared form has on a connection: its start (`FAN_OUT_NAME`,
 * `PAIR_OUTCOME_NAME`) and a hash of every such statement's text (`textsHash`, see `preparedTextsHash`) and of
 * the connection's `generation` of them. A change to any text renames them all, so two versions of the library
 * on one server, or two schemas' outboxes on one connection pool, never mistake each other's statements; a new
 * generation (see `PreparedStatements` in the store) is parsed — and planned — anew.
 */
export function preparedName(start: string, textsHash: string, generation: number): string {
  const hash = createHash('sha1').update(textsHash).update(String(generation)).digest('hex').slice(0, 12);
  return `${start}_${hash}`;
}
