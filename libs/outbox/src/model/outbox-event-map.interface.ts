import type { OutboxEvent, OutboxEventInput, OutboxHandlerContext } from './outbox-event.interface';

/**
 * The app's events, declared once by declaration merging:
 * `declare module 'nestjs-pg-outbox' { interface OutboxEventMap { 'crm.contact.created.v1': ContactCreated } }`.
 * A name in it gets its payload checked by `enqueue` and its handlers' parameter by `@OnOutboxEvent`; names not in
 * it stay allowed (untyped) unless {@link OutboxStrictEventNames} says `strict: true`.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- filled in by the app's declaration merging
export interface OutboxEventMap {}

/**
 * Merge `{ strict: true }` into it to make a name that is not in {@link OutboxEventMap} a compile error in
 * `enqueue`, `enqueueMany` and `@OnOutboxEvent`.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- filled in by the app's declaration merging
export interface OutboxStrictEventNames {}

declare const versionsKey: unique symbol;

/**
 * A map entry whose payload depends on `schemaVersion`: `OutboxVersioned<{ 1: ContactV1; 2: ContactV2 }>`. Enqueue
 * then pairs each payload with its version (a missing `schemaVersion` is 1), and handlers receive a union they
 * can narrow with `event.schemaVersion`.
 */
export interface OutboxVersioned<TVersions extends { [version: number]: unknown }> {
  /** Type-level only: no value carries it. */
  readonly [versionsKey]: TVersions;
}

/** The names declared in {@link OutboxEventMap}. */
export type OutboxKnownEventName = Extract<keyof OutboxEventMap, string>;

/** True when the app merged `{ strict: true }` into {@link OutboxStrictEventNames}. */
export type OutboxStrictMode = OutboxStrictEventNames extends { strict: true } ? true : false;

/**
 * What `enqueue` accepts as `eventName`: the declared names, plus (unless strict) any other string; `string & {}`
 * keeps the declared names offered by the editor's completion.
 */
export type OutboxEventName = OutboxStrictMode extends true
  ? OutboxKnownEventName
  : OutboxKnownEventName | (string & {});

/** What `@OnOutboxEvent` accepts: an event name, a prefix like `crm.contact.*`, or `*`. */
export type OutboxEventPattern = OutboxStrictMode extends true
  ? OutboxKnownEventName | `${string}.*` | '*'
  : OutboxEventName;

/** `{ [schemaVersion]: payload }` of a declared name; a plain entry is the same payload for every version. */
type VersionsOf<TName extends OutboxKnownEventName> =
  OutboxEventMap[TName] extends OutboxVersioned<infer TVersions> ? TVersions : never;

/** The payload type of a declared name (all versions' payloads for a versioned one), else `unknown`. */
export type OutboxPayloadOf<TName extends string> = TName extends OutboxKnownEventName
  ? OutboxEventMap[TName] extends OutboxVersioned<infer TVersions>
    ? TVersions[keyof TVersions]
    : OutboxEventMap[TName]
  : unknown;

/** Envelope fields of an enqueued event besides name, payload and version. */
type EnqueueFields = Omit<
  OutboxEventInput<unknown>,
  'eventName' | 'payload' | 'schemaVersion' | 'tenantId'
> & {
  /** Tenant the event belongs to (UUID); may be left out when `tenancy` is `single`. */
  tenantId?: string;
};

/** One event for `enqueue`, typed by its name: the declared payload (per version), or any payload for other names. */
export type OutboxEnqueueInput<TName extends string = OutboxEventName> = TName extends OutboxKnownEventName
  ? [VersionsOf<TName>] extends [never]
    ? EnqueueFields & { eventName: TName; payload: OutboxEventMap[TName]; schemaVersion?: number }
    : VersionedInput<TName, VersionsOf<TName>>
  : EnqueueFields & { eventName: TName; payload: unknown; schemaVersion?: number };

type VersionedInput<TName extends string, TVersions> = {
  [V in keyof TVersions & number]: EnqueueFields & {
    eventName: TName;
    payload: TVersions[V];
  } & (V extends 1 ? { schemaVersion?: 1 } : { schemaVersion: V });
}[keyof TVersions & number];

/** The declared names a pattern matches: itself, those under a `prefix.*`, or all for `*`. */
export type OutboxNamesMatching<TPattern extends string> = TPattern extends '*'
  ? OutboxKnownEventName
  : TPattern extends `${infer TPrefix}.*`
    ? Extract<OutboxKnownEventName, `${TPrefix}.${string}`>
    : Extract<OutboxKnownEventName, TPattern>;

/** The envelope of one declared name, one member per schema version for a versioned entry. */
type EnvelopeOf<TName extends OutboxKnownEventName> = [VersionsOf<TName>] extends [never]
  ? OutboxEvent<OutboxEventMap[TName], TName>
  : {
      [V in keyof VersionsOf<TName> & number]: OutboxEvent<VersionsOf<TName>[V], TName> & {
        schemaVersion: V;
      };
    }[keyof VersionsOf<TName> & number];

/**
 * What a handler of `TPattern` receives: for a declared name its envelope, for a pattern the union of the matching
 * declared names' envelopes (narrow it with `event.eventName`), else `OutboxEvent<unknown>`. In gradual mode an
 * event whose name is not declared can still match a pattern: declare every name, or go strict.
 */
export type OutboxEventOf<TPattern extends string> = [OutboxNamesMatching<TPattern>] extends [never]
  ? OutboxEvent<unknown>
  : { [N in OutboxNamesMatching<TPattern>]: EnvelopeOf<N> }[OutboxNamesMatching<TPattern>];

/**
 * The methods `@OnOutboxEvent(pattern)` may decorate: for a declared name (or a pattern matching some), the first
 * parameter must accept {@link OutboxEventOf}; otherwise any method, as before the map.
 */
export type OutboxHandlerFor<TPattern extends string> = [OutboxNamesMatching<TPattern>] extends [never]
  ? // eslint-disable-next-line @typescript-eslint/no-explicit-any -- undeclared names stay untyped
    (...args: any[]) => unknown
  : (event: OutboxEventOf<TPattern>, context: OutboxHandlerContext) => unknown;
