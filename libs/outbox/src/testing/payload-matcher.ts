import { isDeepStrictEqual } from 'node:util';

/**
 * What `expectEnqueued` compares a payload with: a predicate, or a partial value — every key it names must match
 * (objects recursively, as partial values too; arrays element by element, with the same length; anything else
 * by deep equality).
 */
export type OutboxPayloadMatcher<TPayload = unknown> =
  ((payload: TPayload) => boolean) | (TPayload extends object ? DeepPartial<TPayload> : TPayload);

/** A partial value of `T`, at every depth. */
export type DeepPartial<T> = T extends readonly (infer E)[]
  ? readonly DeepPartial<E>[]
  : T extends object
    ? { [K in keyof T]?: DeepPartial<T[K]> }
    : T;

/** True when `payload` matches `matcher` (see {@link OutboxPayloadMatcher}). */
export function matchesPayload(payload: unknown, matcher: unknown): boolean {
  if (typeof matcher === 'function') return (matcher as (p: unknown) => boolean)(payload) === true;
  return partialMatch(payload, matcher);
}

function partialMatch(actual: unknown, expected: unknown): boolean {
  if (Array.isArray(expected)) {
    return (
      Array.isArray(actual) &&
      actual.length === expected.length &&
      expected.every((item, i) => partialMatch(actual[i], item))
    );
  }
  if (expected !== null && typeof expected === 'object') {
    if (actual === null || typeof actual !== 'object' || Array.isArray(actual)) return false;
    return Object.entries(expected).every(([key, value]) =>
      partialMatch((actual as Record<string, unknown>)[key], value),
    );
  }
  return isDeepStrictEqual(actual, expected);
}
