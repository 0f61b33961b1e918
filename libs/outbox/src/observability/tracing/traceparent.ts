/** A W3C trace context, as in a `traceparent` header. */
export interface TraceParent {
  traceId: string;
  spanId: string;
  /** The trace flags byte (1: sampled). */
  traceFlags: number;
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** `00-<trace id>-<span id>-<flags>`, version 00 (W3C Trace Context). */
export function formatTraceParent(context: TraceParent): string {
  return `00-${context.traceId}-${context.spanId}-${(context.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

/** The trace context of a `traceparent` value, or null when it is absent, malformed or all zeros. */
export function parseTraceParent(value: string | null | undefined): TraceParent | null {
  const match = value ? TRACEPARENT.exec(value) : null;
  if (!match || /^0+$/.test(match[1]!) || /^0+$/.test(match[2]!)) return null;
  return { traceId: match[1]!, spanId: match[2]!, traceFlags: parseInt(match[3]!, 16) };
}
