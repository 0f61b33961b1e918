import { Injectable } from '@nestjs/common';
import type { ClaimedDelivery, FanOutReason } from '../model/claimed-delivery';
import type { OutboxConsumer } from '../model/outbox-consumer';
import type { DeliveryOutcome } from '../model/delivery-outcome';

/** An event `enqueue` wrote (in the caller's transaction, not committed yet). */
export interface EnqueuedEventInfo {
  tenantId: string;
  eventName: string;
}

/** One claimed batch of one tenant. */
export interface ClaimedBatchInfo {
  tenantId: string;
  /** New events fanned out by this claim. */
  events: number;
  deliveries: readonly ClaimedDelivery[];
  /** Why the claim took new events by the fan-out, not the lean claim; null when it did not (see `FanOutReason`). */
  fanOut: FanOutReason | null;
}

/** One delivery attempt, from the moment its handler (or transport) is called until its outcome is known. */
export interface OutboxAttemptObserver {
  /** Runs the handler call; a tracer makes its span the active context here. */
  run?<T>(work: () => T): T;
  /** The attempt's outcome, as the relay is about to record it. */
  ended?(outcome: DeliveryOutcome): void;
}

/**
 * What the relay and `enqueue` report to the board's activity recorder, the metrics and the tracer. Every
 * hook is optional and synchronous; a hook must not throw (the instrumentation swallows and drops what does).
 */
export interface OutboxObserver {
  /** The W3C `traceparent` to store with new events, or null (asked once per enqueue call). */
  traceContext?(): string | null;
  eventsEnqueued?(events: readonly EnqueuedEventInfo[]): void;
  /** A relay round ended (every tenant it visited; the batches' commits may still be in flight). */
  roundEnded?(round: { durationMs: number; tenants: number }): void;
  batchClaimed?(batch: ClaimedBatchInfo): void;
  /** An in-process batch transaction failed: its attempts are recorded again as `batchError` failures. */
  batchRolledBack?(batch: { tenantId: string; deliveries: number }): void;
  attemptStarted?(delivery: ClaimedDelivery, consumer: OutboxConsumer): OutboxAttemptObserver | null;
  /** Headers to add to an outgoing webhook request (called inside the attempt's `run`). */
  outgoingHeaders?(headers: Record<string, string>): void;
}

/**
 * The relay's observation points, fanned out to the observers that the board, metrics and tracing modules add.
 * With none (the default) every call is a length check: nothing is allocated on the relay's hot path.
 */
@Injectable()
export class OutboxInstrumentation {
  private observers: readonly OutboxObserver[] = [];

  /** Adds an observer; returns the function that removes it. */
  add(observer: OutboxObserver): () => void {
    this.observers = [...this.observers, observer];
    return () => {
      this.observers = this.observers.filter((o) => o !== observer);
    };
  }

  /** True when some observer is attached. */
  get active(): boolean {
    return this.observers.length > 0;
  }

  traceContext(): string | null {
    for (const observer of this.observers) {
      const value = guarded(() => observer.traceContext?.() ?? null, null);
      if (value) return value;
    }
    return null;
  }

  eventsEnqueued(events: readonly EnqueuedEventInfo[]): void {
    for (const observer of this.observers) guarded(() => observer.eventsEnqueued?.(events), undefined);
  }

  roundEnded(round: { durationMs: number; tenants: number }): void {
    for (const observer of this.observers) guarded(() => observer.roundEnded?.(round), undefined);
  }

  batchClaimed(batch: ClaimedBatchInfo): void {
    for (const observer of this.observers) guarded(() => observer.batchClaimed?.(batch), undefined);
  }

  batchRolledBack(batch: { tenantId: string; deliveries: number }): void {
    for (const observer of this.observers) guarded(() => observer.batchRolledBack?.(batch), undefined);
  }

  /** The observers of one attempt, combined; null when nobody observes attempts. */
  attemptStarted(delivery: ClaimedDelivery, consumer: OutboxConsumer): OutboxAttemptObserver | null {
    if (this.observers.length === 0) return null;
    const attempts: OutboxAttemptObserver[] = [];
    for (const observer of this.observers) {
      const attempt = guarded(() => observer.attemptStarted?.(delivery, consumer) ?? null, null);
      if (attempt) attempts.push(attempt);
    }
    if (attempts.length === 0) return null;
    if (attempts.length === 1) return attempts[0]!;
    return {
      // the first observer's context is outermost: each `run` wraps the next
      run: <T>(work: () => T): T =>
        attempts.reduceRight<() => T>((inner, a) => (a.run ? () => a.run!(inner) : inner), work)(),
      ended: (outcome) => {
        for (const a of attempts) guarded(() => a.ended?.(outcome), undefined);
      },
    };
  }

  /** The headers every observer wants on an outgoing webhook request (empty when none). */
  outgoingHeaders(): Record<string, string> {
    const headers: Record<string, string> = {};
    for (const observer of this.observers) guarded(() => observer.outgoingHeaders?.(headers), undefined);
    return headers;
  }
}

/** Runs `work` inside the attempt's observers (as is when there are none). */
export function runAttempt<T>(attempt: OutboxAttemptObserver | null, work: () => T): T {
  return attempt?.run ? attempt.run(work) : work();
}

/** Runs an observer's hook; an observer's bug never breaks a delivery. */
function guarded<T>(hook: () => T, fallback: T): T {
  try {
    return hook();
  } catch {
    return fallback;
  }
}
