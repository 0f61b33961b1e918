import { OutboxValidationError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import type { OutboxEventInput } from './outbox-event.interface';
import { CONTROL_CHARS, UUID_PATTERN } from './outbox.constants';

/** Event names: lowercase dotted words, at least two parts, e.g. `crm.contact.created.v1`. */
export const EVENT_NAME_PATTERN = /^[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)+$/;
const EVENT_NAME_MAX = 200;
const TEXT_MAX = 200;
/** Default `dedupe.windowMs`: a day, as the idempotency keys of payment APIs. */
export const DEDUPE_WINDOW_DEFAULT_MS = 86_400_000;
/** Longest `dedupe.windowMs`: 366 days (expired keys are purged by retention; a longer one is almost surely a unit slip). */
const DEDUPE_WINDOW_MAX_MS = 366 * DEDUPE_WINDOW_DEFAULT_MS;
const DEDUPE_MODES: readonly string[] = ['ignore', 'replace', 'debounce'];
/** Deeper payloads are refused: they are almost always a bug, and deep recursion is a denial-of-service vector. */
export const MAX_PAYLOAD_DEPTH = 64;

/** An event checked and ready to insert: the payload already serialised. */
export interface ValidatedEvent {
  tenantId: string;
  eventName: string;
  payloadJson: string;
  aggregateType: string | null;
  aggregateId: string | null;
  correlationId: string | null;
  schemaVersion: number;
  occurredAt: Date | null;
  /** Not delivered before this instant (`deliverAt`); null or absent: not delayed. */
  deliverAt?: Date | null;
  /** Not delivered before this many ms after the insert, by the database's clock (`delayMs`). */
  delayMs?: number | null;
  /** Its idempotency key; null (or, from code that builds rows itself, left out) when it has none. */
  dedupe?: ValidatedDedupe | null;
}

/** A checked `dedupe`, its defaults filled in. */
export interface ValidatedDedupe {
  key: string;
  mode: 'ignore' | 'replace' | 'debounce';
  windowMs: number;
}

/** True when `name` is a valid event name. */
export function isEventName(name: unknown): name is string {
  return typeof name === 'string' && name.length <= EVENT_NAME_MAX && EVENT_NAME_PATTERN.test(name);
}

/** Checks one event and serialises its payload; throws `OutboxValidationError` naming the field. */
export function validateEvent(
  input: OutboxEventInput<unknown>,
  where: string,
  maxPayloadBytes: number,
): ValidatedEvent {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    throw new OutboxValidationError(where, messages.notAnObject(where, input));
  }
  const tenantId = input.tenantId;
  if (typeof tenantId !== 'string' || !UUID_PATTERN.test(tenantId)) {
    throw new OutboxValidationError(`${where}.tenantId`, messages.notUuid(`${where}.tenantId`, tenantId));
  }
  if (!isEventName(input.eventName)) {
    throw new OutboxValidationError(
      `${where}.eventName`,
      messages.badEventName(`${where}.eventName`, input.eventName),
    );
  }
  const payloadJson = serialisePayload(input.payload, `${where}.payload`, maxPayloadBytes);
  const schemaVersion = checkSchemaVersion(input.schemaVersion, `${where}.schemaVersion`);
  const occurredAt = input.occurredAt ?? null;
  if (occurredAt !== null && !(occurredAt instanceof Date && Number.isFinite(occurredAt.getTime()))) {
    throw new OutboxValidationError(
      `${where}.occurredAt`,
      messages.badDate(`${where}.occurredAt`, occurredAt),
    );
  }
  // checked in the fields' order: the first bad field is the one named
  const aggregateType = optionalText(input.aggregateType, `${where}.aggregateType`);
  const aggregateId = optionalText(input.aggregateId, `${where}.aggregateId`);
  const correlationId = optionalText(input.correlationId, `${where}.correlationId`);
  const { deliverAt = null, delayMs = null } = input;
  checkDelay(deliverAt, delayMs, where);
  return {
    tenantId: tenantId.toLowerCase(),
    eventName: input.eventName,
    payloadJson,
    aggregateType,
    aggregateId,
    correlationId,
    schemaVersion,
    occurredAt,
    deliverAt,
    delayMs,
    dedupe: checkDedupe((input as { dedupe?: unknown }).dedupe, `${where}.dedupe`, input),
  };
}

/** Checks `dedupe` of an event: null when left out, else its key, mode and window with the defaults filled in. */
export function checkDedupe(
  value: unknown,
  field: string,
  event: Pick<OutboxEventInput<unknown>, 'deliverAt' | 'delayMs'>,
): ValidatedDedupe | null {
  if (value === undefined) return null;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new OutboxValidationError(field, messages.badDedupe(field, value));
  }
  const { key, mode = 'ignore', windowMs = DEDUPE_WINDOW_DEFAULT_MS } = value as Record<string, unknown>;
  const checkedKey = optionalText(key, `${field}.key`);
  if (checkedKey === null) {
    throw new OutboxValidationError(`${field}.key`, messages.badText(`${field}.key`, TEXT_MAX, key));
  }
  if (typeof mode !== 'string' || !DEDUPE_MODES.includes(mode)) {
    throw new OutboxValidationError(
      `${field}.mode`,
      messages.badDedupeMode(`${field}.mode`, DEDUPE_MODES, mode),
    );
  }
  if (
    typeof windowMs !== 'number' ||
    !Number.isSafeInteger(windowMs) ||
    windowMs < 1 ||
    windowMs > DEDUPE_WINDOW_MAX_MS
  ) {
    throw new OutboxValidationError(
      `${field}.windowMs`,
      messages.badDedupeWindow(`${field}.windowMs`, DEDUPE_WINDOW_MAX_MS, windowMs),
    );
  }
  if (mode === 'debounce' && (event.deliverAt ?? null) === null && (event.delayMs ?? null) === null) {
    throw new OutboxValidationError(`${field}.mode`, messages.debounceWithoutDelay(`${field}.mode`));
  }
  return { key: checkedKey, mode: mode as ValidatedDedupe['mode'], windowMs };
}

/**
 * The longest `delayMs`: the span of a JS Date (100,000,000 days). Added to the insert's `now()` it stays within
 * PostgreSQL's timestamptz (294276 AD); a longer one would fail in the insert with "interval/timestamp out of range".
 */
const MAX_DELAY_MS = 8.64e15;
/** The earliest instant PostgreSQL's timestamptz holds (4713-11-24 BC); a JS Date goes further back. */
const EARLIEST_DELIVER_AT_MS = -210_866_803_200_000;

/**
 * When a delayed event may be delivered: `deliverAt` (a valid Date PostgreSQL can store) or `delayMs` (a finite
 * number from 0 to `MAX_DELAY_MS`), not both; neither given, not delayed.
 */
function checkDelay(deliverAt: Date | null, delayMs: number | null, where: string): void {
  if (deliverAt !== null && delayMs !== null) {
    throw new OutboxValidationError(`${where}.delayMs`, messages.bothDelays(where, deliverAt, delayMs));
  }
  if (deliverAt !== null && !(deliverAt instanceof Date && Number.isFinite(deliverAt.getTime()))) {
    throw new OutboxValidationError(`${where}.deliverAt`, messages.badDate(`${where}.deliverAt`, deliverAt));
  }
  if (deliverAt !== null && deliverAt.getTime() < EARLIEST_DELIVER_AT_MS) {
    throw new OutboxValidationError(
      `${where}.deliverAt`,
      messages.ancientDate(`${where}.deliverAt`, deliverAt),
    );
  }
  if (delayMs !== null && !(typeof delayMs === 'number' && Number.isFinite(delayMs) && delayMs >= 0)) {
    throw new OutboxValidationError(`${where}.delayMs`, messages.badDelay(`${where}.delayMs`, delayMs));
  }
  if (delayMs !== null && delayMs > MAX_DELAY_MS) {
    throw new OutboxValidationError(
      `${where}.delayMs`,
      messages.delayTooLong(`${where}.delayMs`, delayMs, MAX_DELAY_MS),
    );
  }
}

/**
 * The version an event is enqueued as, the one its payload schema is chosen by: 1 when the field is left out, else
 * the positive integer given. Anything else — `null` included, which is not "left out" — is refused, so no value
 * can pick no schema and be stored as a version whose schema it was never checked against.
 */
export function checkSchemaVersion(value: unknown, field: string): number {
  if (value === undefined) return 1;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new OutboxValidationError(field, messages.badSchemaVersion(field, value));
  }
  return value;
}

function optionalText(value: unknown, field: string): string | null {
  if (value === undefined || value === null) return null;
  if (
    typeof value !== 'string' ||
    value.length === 0 ||
    value.length > TEXT_MAX ||
    CONTROL_CHARS.test(value) ||
    // a lone surrogate reaches PostgreSQL as U+FFFD: two different texts would be stored as one
    !value.isWellFormed()
  ) {
    throw new OutboxValidationError(field, messages.badText(field, TEXT_MAX, value));
  }
  return value;
}

/**
 * Serialises a payload, refusing anything JSON (or PostgreSQL jsonb) would silently change: BigInt, functions,
 * symbols, `undefined`, NaN and infinities, class instances (Date, Map, Buffer…), cycles, `\u0000` and lone
 * surrogates (jsonb rejects both), and nesting deeper than {@link MAX_PAYLOAD_DEPTH}.
 */
export function serialisePayload(payload: unknown, field: string, maxBytes: number): string {
  const problem = jsonProblem(payload, 0, []);
  if (problem !== null) {
    const path = pathOf(field, problem.keys);
    throw new OutboxValidationError(path, messages.badPayload(path, problem.why));
  }
  const json = JSON.stringify(payload);
  const bytes = Buffer.byteLength(json, 'utf8');
  if (bytes > maxBytes)
    throw new OutboxValidationError(field, messages.payloadTooLarge(field, bytes, maxBytes));
  return json;
}

/** What is wrong with a payload, and where: the keys from the payload down (the innermost first). */
interface JsonProblem {
  why: string;
  keys: (string | number)[];
}

/** `field` and the keys down to the value: `.key` for an object's, `[i]` for an array's. */
function pathOf(field: string, keys: readonly (string | number)[]): string {
  let path = field;
  for (let i = keys.length - 1; i >= 0; i--) {
    const key = keys[i]!;
    path += typeof key === 'number' ? `[${key}]` : `.${key}`;
  }
  return path;
}

/**
 * The first problem found in `value`, or null. Nothing is allocated for a faithful payload — no path text and no
 * closure per value (`enqueue` checks every payload; ADR 1004's addendum): the path is built only for the error.
 */
function jsonProblem(value: unknown, depth: number, ancestors: object[]): JsonProblem | null {
  switch (typeof value) {
    case 'string':
      if (value.includes('\u0000'))
        return problem('it contains the character \\u0000, which PostgreSQL jsonb cannot store');
      if (!value.isWellFormed())
        return problem('it contains a lone UTF-16 surrogate, which PostgreSQL jsonb rejects');
      return null;
    case 'number':
      if (!Number.isFinite(value)) return problem(`${value} is not a finite number (JSON would store null)`);
      return null;
    case 'boolean':
      return null;
    case 'bigint':
      return problem('BigInt is not JSON; send it as a string');
    case 'undefined':
      return problem('undefined is not JSON (JSON would drop it); omit the key or use null');
    case 'function':
    case 'symbol':
      return problem(`a ${typeof value} is not JSON`);
  }
  if (value === null) return null;
  const object = value as object;
  if (depth >= MAX_PAYLOAD_DEPTH) return problem(`it is nested deeper than ${MAX_PAYLOAD_DEPTH} levels`);
  if (ancestors.includes(object)) return problem('it contains a cycle');
  ancestors.push(object);
  if (Array.isArray(object)) {
    for (let i = 0; i < object.length; i++) {
      if (!(i in object)) return problem(`index ${i} is a hole in a sparse array (JSON would store null)`);
      const inner = jsonProblem(object[i], depth + 1, ancestors);
      if (inner !== null) return within(inner, i);
    }
  } else {
    const proto = Object.getPrototypeOf(object) as { constructor?: { name?: string } } | null;
    if (proto !== Object.prototype && proto !== null) {
      return problem(
        `it is a ${proto.constructor?.name ?? 'non-plain'} instance, not a plain object` +
          (object instanceof Date
            ? '; send the date as an ISO string'
            : '; convert it to a plain object first'),
      );
    }
    if (Object.getOwnPropertySymbols(object).length > 0)
      return problem('it has symbol keys, which JSON drops');
    for (const key of Object.keys(object)) {
      if (key.includes('\u0000') || !key.isWellFormed()) {
        return problem(
          `the key ${JSON.stringify(key)} contains \\u0000 or a lone surrogate, which PostgreSQL jsonb rejects`,
        );
      }
      const inner = jsonProblem((object as Record<string, unknown>)[key], depth + 1, ancestors);
      if (inner !== null) return within(inner, key);
    }
  }
  ancestors.pop();
  return null;
}

function problem(why: string): JsonProblem {
  return { why, keys: [] };
}

/** A child's problem, seen from its parent: one key further from the value. */
function within(inner: JsonProblem, key: string | number): JsonProblem {
  inner.keys.push(key);
  return inner;
}
