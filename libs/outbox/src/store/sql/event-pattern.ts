/**
 * SQL that is true when an event named `eventName` is for a consumer listening to `pattern` (both SQL
 * expressions of type text): `*`, the exact name, or a prefix `prefix.*` on a dot boundary — compared with
 * `starts_with`, never `like`, since names may hold `_`. The rule of `matchesEventPattern`
 * (model/event-pattern.ts); test/delivery/event-pattern.e2e-spec.ts runs one table of cases through both.
 */
export function eventPatternMatch(pattern: string, eventName: string): string {
  return `(${pattern} = '*' or ${pattern} = ${eventName}
                       or (right(${pattern}, 2) = '.*' and starts_with(${eventName}, left(${pattern}, -1))))`;
}
