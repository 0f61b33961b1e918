/** Base class of every error the outbox throws. */
export class OutboxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** Input to `enqueue` (or an admin call) that was rejected before anything was written. */
export class OutboxValidationError extends OutboxError {
  constructor(
    /** Where the problem is, e.g. `events[2].payload.items[0]`. */
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

/** The module is wired wrongly; lists every problem found at boot. */
export class OutboxConfigurationError extends OutboxError {
  constructor(readonly problems: readonly string[]) {
    super(
      `Outbox found ${problems.length} problem${problems.length === 1 ? '' : 's'}:\n${problems.map((p) => ` - ${p}`).join('\n')}`,
    );
  }
}

/** A handler ran past its timeout. */
export class OutboxHandlerTimeoutError extends OutboxError {
  readonly code = 'timeout';
}

/**
 * A round trip of the relay got no reply from the database within `relay.roundTripTimeoutMs` (a hung server, a
 * network partition, a failover): its connection was closed and what it was part of given up.
 */
export class OutboxStallError extends OutboxError {}

/** A handler ended the batch transaction it was given (see `messages.transactionEnded`). */
export class OutboxTransactionEndedError extends OutboxError {}

/**
 * A consumer that asked for `validatePayload` received a payload its schema rejects: the delivery is dead at once
 * (error code `invalidPayload`), since no retry changes a stored payload. A handler may throw it too.
 */
export class OutboxInvalidPayloadError extends OutboxValidationError {
  readonly code = 'invalidPayload';
}
