import { createHash } from 'node:crypto';
import type { PreparedForm } from './statement';
import { FAN_OUT_TEXT } from './fan-out';
import { PAIR_OUTCOME_TEXT } from './record-outcomes';

/**
 * The statements the relay runs prepared (`relay.preparedStatements`): the fan-out, on every claim, and the
 * outcome of a batch of in-process pairs. A connection prepares them all at once (see `OutboxStore`), so where
 * a claim's `execute` ran, the outcome's can too — behind a pooler that hands each transaction a server
 * connection of its own, the claim and the batch transaction begun in the same round trip share one. Their
 * names carry a hash of all their texts: a change to any one renames them all, so two versions of the library
 * on one server never mistake each other's statements.
 */
export function preparedForms(): { fanOut: PreparedForm; pairOutcome: PreparedForm } {
  // computed on first use: the texts come from the files that use these forms
  forms ??= build();
  return forms;
}

let forms: { fanOut: PreparedForm; pairOutcome: PreparedForm } | undefined;

function build(): { fanOut: PreparedForm; pairOutcome: PreparedForm } {
  const hash = createHash('sha1').update(FAN_OUT_TEXT).update(PAIR_OUTCOME_TEXT).digest('hex').slice(0, 12);
  return { fanOut: fanOutForm(hash), pairOutcome: pairOutcomeForm(hash) };
}

const fanOutForm = (hash: string): PreparedForm => ({
  name: `outbox_fan_out_${hash}`,
  types: ['uuid', 'text[]', 'int', 'int', 'uuid', 'int', 'text[]', 'text[]', 'boolean[]', 'text[]'],
});

const pairOutcomeForm = (hash: string): PreparedForm => ({
  name: `outbox_outcome_${hash}`,
  // $1 … $15 as in `recordOutcomes` ($14, the delivery ids, goes unused: pairs have none — so the text runs
  // prepared, with these types, or inlined, never as a parameterised query, whose $14 would have no type)
  types: [
    'bigint[]',
    'text[]',
    'text[]',
    'text[]',
    'int[]',
    'uuid',
    'text[]',
    'uuid[]',
    'text[]',
    'int[]',
    'uuid[]',
    'bigint[]',
    'int',
    'bigint[]',
    'uuid',
  ],
});

/** Every statement with a prepared form, with its text (see `OutboxStore`, which prepares them together). */
export function preparedStatements(): readonly { text: string; prepared: PreparedForm }[] {
  const { fanOut, pairOutcome } = preparedForms();
  return [
    { text: FAN_OUT_TEXT, prepared: fanOut },
    { text: PAIR_OUTCOME_TEXT, prepared: pairOutcome },
  ];
}
