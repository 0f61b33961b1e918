/** Options of `OutboxTracingModule.forRoot()`. */
export interface OutboxTracingModuleOptions {
  /** Name of the tracer the spans come from (`trace.getTracer(name)`). Default: `'nestjs-pg-outbox'`. */
  tracerName?: string;
  /** Store the active trace context with each enqueued event (`event_outbox.traceparent`). Default: `true`. */
  captureAtEnqueue?: boolean;
  /** Send `traceparent` (and `tracestate`) with webhook requests: the attempt's span. Default: `true`. */
  propagateToWebhooks?: boolean;
}
