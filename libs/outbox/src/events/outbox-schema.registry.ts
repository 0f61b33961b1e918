import { Inject, Injectable } from '@nestjs/common';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import { OutboxInvalidPayloadError, OutboxValidationError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import type { OutboxEvent } from '../model/outbox-event.interface';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import { checkSchemaVersion, isEventName } from '../model/event-validation';
import { matchesEventPattern } from '../model/event-pattern';
import type { StandardSchemaV1 } from '../model/standard-schema';

/** The schemas of one event name: one for every version, or one per version. */
type NameSchemas =
  | { kind: 'all'; schema: StandardSchemaV1 }
  | { kind: 'versions'; versions: ReadonlyMap<number, StandardSchemaV1> };

/** Issues listed in an error message at most; the rest are counted. */
const ISSUES_SHOWN = 5;

/**
 * The payload schemas of the `events` option: checks each payload on enqueue (before anything is written) and, for
 * consumers with `validatePayload`, on receipt. Names without a schema are not checked.
 */
@Injectable()
export class OutboxSchemaRegistry {
  private readonly byName = new Map<string, NameSchemas>();
  private readonly found: string[] = [];

  constructor(@Inject(OUTBOX_RESOLVED_OPTIONS) options: Pick<ResolvedOutboxOptions, 'events'>) {
    const events: unknown = options.events;
    if (events === undefined || events === null) return;
    if (typeof events !== 'object' || Array.isArray(events)) {
      this.found.push(messages.notASchema('events', events));
      return;
    }
    for (const [name, entry] of Object.entries(events as Record<string, unknown>)) {
      const field = `events[${JSON.stringify(name)}]`;
      if (!isEventName(name)) this.found.push(`option ${messages.badEventName(`${field}'s name`, name)}`);
      if (isStandardSchema(entry)) {
        this.byName.set(name, { kind: 'all', schema: entry });
        continue;
      }
      const keys = entry !== null && typeof entry === 'object' ? Object.keys(entry) : [];
      if (Array.isArray(entry) || keys.length === 0 || !keys.every((key) => /^[1-9]\d*$/.test(key))) {
        this.found.push(messages.notASchema(field, entry));
        continue;
      }
      const versions = new Map<number, StandardSchemaV1>();
      for (const key of keys) {
        const schema = (entry as Record<string, unknown>)[key];
        if (isStandardSchema(schema)) versions.set(Number(key), schema);
        else this.found.push(messages.notASchema(`${field}[${key}]`, schema));
      }
      this.byName.set(name, { kind: 'versions', versions });
    }
  }

  /** What is wrong with the `events` option (reported at boot with the other wiring problems). */
  problems(): string[] {
    return [...this.found];
  }

  /** True when some schema covers an event that `pattern` matches. */
  covers(pattern: string): boolean {
    for (const name of this.byName.keys()) if (matchesEventPattern(pattern, name)) return true;
    return false;
  }

  /**
   * Checks an event about to be enqueued against its schema; returns the payload to store (the schema's output,
   * as a promise), or the event's own payload, as is, when its name has no schema: an event without one costs
   * `enqueue` no turn of the event loop. Throws `OutboxValidationError` naming the path.
   */
  checkOnEnqueue(event: unknown, where: string): unknown {
    if (event === null || typeof event !== 'object') return undefined;
    const { eventName, payload } = event as Record<string, unknown>;
    // a malformed name is left to validateEvent, which names its field; the version is read by the same rule as
    // validateEvent's, so none it accepts can skip the schema here
    if (typeof eventName !== 'string') return payload;
    const schemaVersion = checkSchemaVersion(
      (event as Record<string, unknown>).schemaVersion,
      `${where}.schemaVersion`,
    );
    const schema = this.schemaFor(eventName, schemaVersion, `${where}.schemaVersion`);
    if (!schema) return payload;
    return this.validateOnEnqueue(schema, payload, eventName, schemaVersion, where);
  }

  private async validateOnEnqueue(
    schema: StandardSchemaV1,
    payload: unknown,
    eventName: string,
    schemaVersion: number,
    where: string,
  ): Promise<unknown> {
    const result = await schema['~standard'].validate(payload);
    if (!result.issues) return result.value;
    const [field, text] = describeIssues(`${where}.payload`, result.issues);
    throw new OutboxValidationError(
      field,
      messages.payloadRejected(field, label(eventName, schemaVersion), text),
    );
  }

  /**
   * Checks a received event against its schema: the envelope with the schema's output as `data` (a copy, the
   * original is shared by the event's other consumers), or `OutboxInvalidPayloadError`. Synchronous when the
   * schema is. An event whose name has no schema passes unchanged.
   */
  checkOnReceipt(event: OutboxEvent): OutboxEvent | Promise<OutboxEvent> {
    let schema: StandardSchemaV1 | undefined;
    try {
      schema = this.schemaFor(event.eventName, event.schemaVersion, 'event.schemaVersion');
    } catch (error) {
      throw new OutboxInvalidPayloadError('event.schemaVersion', (error as Error).message);
    }
    if (!schema) return event;
    const settle = (result: StandardSchemaV1.Result<unknown>): OutboxEvent => {
      if (!result.issues) return { ...event, data: result.value as OutboxEvent['data'] };
      const [field, text] = describeIssues('event.data', result.issues);
      throw new OutboxInvalidPayloadError(
        field,
        messages.payloadRejected(field, label(event.eventName, event.schemaVersion), text),
      );
    };
    const result = schema['~standard'].validate(event.data);
    return result instanceof Promise ? result.then(settle) : settle(result);
  }

  private schemaFor(eventName: string, version: number, field: string): StandardSchemaV1 | undefined {
    const entry = this.byName.get(eventName);
    if (!entry) return undefined;
    if (entry.kind === 'all') return entry.schema;
    const schema = entry.versions.get(version);
    if (schema) return schema;
    throw new OutboxValidationError(
      field,
      messages.noSchemaForVersion(
        field,
        eventName,
        version,
        [...entry.versions.keys()].sort((a, b) => a - b),
      ),
    );
  }
}

function isStandardSchema(value: unknown): value is StandardSchemaV1 {
  const props = (value as { '~standard'?: { version?: unknown; validate?: unknown } } | null)?.['~standard'];
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    props?.version === 1 &&
    typeof props.validate === 'function'
  );
}

function label(eventName: string, version: number): string {
  return `"${eventName}" (schemaVersion ${version})`;
}

/** The first issue's path as the error's field, and every issue (up to a few) as text. */
function describeIssues(base: string, issues: readonly StandardSchemaV1.Issue[]): [string, string] {
  const paths = issues.map((issue) => base + pathText(issue.path));
  const shown = issues
    .slice(0, ISSUES_SHOWN)
    .map((issue, i) => `${paths[i]}: ${issue.message}`)
    .join('; ');
  const more = issues.length > ISSUES_SHOWN ? ` (and ${issues.length - ISSUES_SHOWN} more)` : '';
  return [paths[0] ?? base, shown + more];
}

function pathText(path: StandardSchemaV1.Issue['path']): string {
  let text = '';
  for (const segment of path ?? []) {
    const key = typeof segment === 'object' && segment !== null ? segment.key : segment;
    if (typeof key === 'number') text += `[${key}]`;
    else if (typeof key === 'string' && /^[A-Za-z_$][\w$]*$/.test(key)) text += `.${key}`;
    else text += `[${JSON.stringify(String(key))}]`;
  }
  return text;
}
