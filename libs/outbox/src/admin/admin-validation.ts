import { OutboxValidationError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import { isEventName } from '../model/event-validation';
import { CONTROL_CHARS, UUID_PATTERN } from '../model/outbox.constants';

const NAME_MAX = 200;

/** Largest page `failedEvents` returns. */
export const MAX_PAGE_SIZE = 500;

/** Rows per transaction of `replayMatching` and `purgeMatching` unless the request says otherwise. */
export const BULK_CHUNK_SIZE = 1000;

/** A UUID, lowercased; throws `OutboxValidationError` naming `field` otherwise. */
export function checkUuid(field: string, value: unknown): string {
  if (typeof value !== 'string' || !UUID_PATTERN.test(value))
    throw new OutboxValidationError(field, messages.notUuid(field, value));
  return value.toLowerCase();
}

/** An integer in `[min, max]` (no upper bound when `max` is null), or `fallback` when absent. */
export function checkInteger(
  field: string,
  value: unknown,
  min: number,
  max: number | null,
  fallback: number,
): number {
  if (value === undefined) return fallback;
  if (
    typeof value !== 'number' ||
    !Number.isSafeInteger(value) ||
    value < min ||
    (max !== null && value > max)
  ) {
    throw new OutboxValidationError(field, messages.badInteger(field, min, max, value));
  }
  return value;
}

/** An optional consumer name (any name is accepted: a removed consumer's rows must stay reachable). */
export function checkConsumerName(field: string, value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (
    typeof value !== 'string' ||
    value.length === 0 ||
    value.length > NAME_MAX ||
    CONTROL_CHARS.test(value)
  ) {
    throw new OutboxValidationError(field, messages.badText(field, NAME_MAX, value));
  }
  return value;
}

/** An optional exact event name. */
export function checkEventName(field: string, value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (!isEventName(value)) throw new OutboxValidationError(field, messages.badEventName(field, value));
  return value;
}

/** An optional free text of at most `max` characters, without control characters (a reason, a note). */
export function checkText(field: string, value: unknown, max: number): string | null {
  if (value === undefined || value === null || value === '') return null;
  if (typeof value !== 'string' || value.length > max || CONTROL_CHARS.test(value))
    throw new OutboxValidationError(field, messages.badText(field, max, value));
  return value;
}

/** An optional Date (a valid one); null when absent. */
export function checkDate(field: string, value: unknown): Date | null {
  if (value === undefined || value === null) return null;
  if (!(value instanceof Date) || Number.isNaN(value.getTime()))
    throw new OutboxValidationError(field, messages.badDate(field, value));
  return value;
}
