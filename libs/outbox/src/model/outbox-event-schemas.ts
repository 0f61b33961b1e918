import type { OutboxVersioned } from './outbox-event-map.interface';
import type { StandardSchemaV1 } from './standard-schema';

/** Schemas by `schemaVersion`: `{ 1: contactV1, 2: contactV2 }`. */
export interface OutboxSchemaVersions {
  readonly [schemaVersion: number]: StandardSchemaV1;
}

/**
 * A payload schema per event name: one Standard Schema for every `schemaVersion`, or one per version. What the
 * `events` option takes, and what `defineOutboxEvents` returns.
 */
export interface OutboxEventSchemas {
  readonly [eventName: string]: StandardSchemaV1 | OutboxSchemaVersions;
}

/**
 * The event map that `schemas` describe, for `interface OutboxEventMap extends OutboxEventMapOf<typeof events> {}`:
 * each name's payload is its schema's output type (per version for a versions object).
 */
export type OutboxEventMapOf<TSchemas extends OutboxEventSchemas> = {
  -readonly [N in keyof TSchemas & string]: TSchemas[N] extends StandardSchemaV1
    ? StandardSchemaV1.InferOutput<TSchemas[N]>
    : OutboxVersioned<{
        -readonly [V in keyof TSchemas[N] & number]: TSchemas[N][V] extends StandardSchemaV1
          ? StandardSchemaV1.InferOutput<TSchemas[N][V]>
          : never;
      }>;
};

/**
 * Declares the app's events with their payload schemas (any Standard Schema: zod, valibot, arktype…), written
 * once: pass the result to `OutboxModule.forRoot({ events })` and derive the map with `OutboxEventMapOf`. Returns
 * its argument unchanged.
 */
export function defineOutboxEvents<const TSchemas extends OutboxEventSchemas>(schemas: TSchemas): TSchemas {
  return schemas;
}
