/** Whether a request may go out now. */
export type CircuitAdmission =
  /** Send it; `probe` when it is the one request that decides whether an open circuit closes. */
  | { admitted: true; probe: boolean }
  /** Do not send; try again after `retryAfterMs`. */
  | { admitted: false; retryAfterMs: number };

/**
 * The circuit of one endpoint, in memory: closed → (`failureThreshold` failures in a row) → open for
 * `cooldownMs` → half-open (one probe in flight; others wait) → closed on success, open again on failure.
 * Requests sent before the circuit opened may still finish: a success among them closes it (the endpoint
 * answers), a failure only adds to the count.
 */
export class WebhookCircuitBreaker {
  private state: 'closed' | 'open' | 'halfOpen' = 'closed';
  private failures = 0;
  private openedAt: number | null = null;
  private probeAt = 0;
  private probeDeadline = 0;

  constructor(
    private readonly failureThreshold: number,
    private readonly cooldownMs: number,
    /** How long a probe may take before another one is allowed (the request timeout plus a margin). */
    private readonly probeTimeoutMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Asks to send one request. */
  admit(): CircuitAdmission {
    const now = this.now();
    if (this.state === 'closed') return { admitted: true, probe: false };
    if (this.state === 'open' && now < this.probeAt)
      return { admitted: false, retryAfterMs: this.probeAt - now };
    if (this.state === 'halfOpen' && now < this.probeDeadline) {
      return {
        admitted: false,
        retryAfterMs: Math.max(1, Math.min(this.cooldownMs, this.probeDeadline - now)),
      };
    }
    // Open and cooled down, or a probe that never reported back: this request is the probe.
    this.state = 'halfOpen';
    this.probeDeadline = now + this.probeTimeoutMs;
    return { admitted: true, probe: true };
  }

  /** Reports how an admitted request went (`failed`: the endpoint failed, see `isEndpointFailure`). */
  record(admission: { probe: boolean }, failed: boolean): void {
    if (!failed) {
      this.state = 'closed';
      this.failures = 0;
      return;
    }
    this.failures++;
    if (admission.probe || (this.state === 'closed' && this.failures >= this.failureThreshold)) this.open();
  }

  /** A snapshot for stats. */
  snapshot(): {
    state: 'closed' | 'open' | 'halfOpen';
    consecutiveFailures: number;
    openedAt: Date | null;
    probeAt: Date | null;
  } {
    return {
      state: this.state,
      consecutiveFailures: this.failures,
      openedAt: this.openedAt === null ? null : new Date(this.openedAt),
      probeAt: this.state === 'open' ? new Date(this.probeAt) : null,
    };
  }

  private open(): void {
    const now = this.now();
    this.state = 'open';
    this.openedAt = now;
    this.probeAt = now + this.cooldownMs;
  }
}
