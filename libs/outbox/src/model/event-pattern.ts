import { isEventName } from './event-validation';

/** True when `pattern` is `*`, an exact event name, or a prefix like `crm.contact.*`. */
export function isEventPattern(pattern: unknown): pattern is string {
  if (pattern === '*') return true;
  if (typeof pattern !== 'string') return false;
  if (pattern.endsWith('.*')) {
    const prefix = pattern.slice(0, -2);
    return /^[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)*$/.test(prefix);
  }
  return isEventName(pattern);
}

/** True when an event named `eventName` is for a consumer listening to `pattern` (in SQL: `eventPatternMatch`). */
export function matchesEventPattern(pattern: string, eventName: string): boolean {
  if (pattern === '*') return true;
  if (pattern.endsWith('.*')) return eventName.startsWith(pattern.slice(0, -1));
  return pattern === eventName;
}

/** True when every event `inner` matches is also matched by `outer` (both patterns). */
export function patternCovers(outer: string, inner: string): boolean {
  if (outer === '*') return true;
  if (inner === '*') return false;
  if (!outer.endsWith('.*')) return false;
  return inner.startsWith(outer.slice(0, -1));
}
