import { Logger } from '@nestjs/common';
import type { OutboxTransportOutcome } from '../model/outbox-transport.interface';
import { errorText } from '../errors/error-text';
import { BROKER_ERROR_CODES } from './broker-error-codes';
import { BrokerLink, BrokerUnavailableError } from './broker-link';
import type { BrokerMessage, BrokerPublisher } from './broker-forwarder';
import { acknowledged, withTimeout } from './broker-wait';

/** What the forwarder uses of `@nats-io/transport-node` (typed here: the declarations never name the peer). */
export interface NatsTransportLike {
  connect(options: Record<string, unknown>): Promise<NatsConnectionLike>;
  headers(): { set(name: string, value: string): void };
}
/** What the forwarder uses of `@nats-io/jetstream`. */
export interface NatsJetStreamLike {
  jetstream(connection: NatsConnectionLike, options: { timeout: number }): JetStreamLike;
  jetstreamManager(connection: NatsConnectionLike): Promise<{
    streams: { info(name: string): Promise<{ config: { duplicate_window?: number; subjects?: string[] } }> };
  }>;
}
interface NatsConnectionLike {
  closed(): Promise<void | Error>;
  close(): Promise<void>;
  status(): AsyncIterable<{ type: string }>;
}
interface JetStreamLike {
  publish(
    subject: string,
    data: Uint8Array,
    options: Record<string, unknown>,
  ): Promise<{ stream: string; seq: number; duplicate: boolean }>;
}

/** Settings of one NATS forwarder, checked. */
export interface NatsPublisherSettings {
  consumer: string;
  servers: readonly string[];
  stream: string | null;
  timeoutMs: number;
  reconnect: { baseMs: number; capMs: number };
  /** The forwarder's longest retry gap: the stream's duplicate window should be longer. */
  backoffCapMs: number;
  connectionOptions: Readonly<Record<string, unknown>>;
}

/** The `err_code` of JetStream's "expected stream does not match". */
const WRONG_STREAM = 10060;

interface Connection {
  nc: NatsConnectionLike;
  js: JetStreamLike;
  disconnected: boolean;
}

/**
 * Publishes to JetStream through one connection: every message of a batch at once, their acknowledgements
 * awaited together (with the expected stream when configured); `Nats-Msg-Id` = the event id, so the stream's
 * duplicate window drops a message published again after an unknown outcome (the ack then says `duplicate`,
 * kept in the delivery's `external_run_id`). The client reconnects by itself; while it is disconnected, batches
 * are given back (`brokerUnavailable`) rather than buffered.
 */
export class NatsPublisher implements BrokerPublisher {
  private readonly logger = new Logger(NatsPublisher.name);
  private readonly link: BrokerLink<Connection>;

  constructor(
    private readonly transport: NatsTransportLike,
    private readonly jetstream: NatsJetStreamLike,
    private readonly settings: NatsPublisherSettings,
  ) {
    this.link = new BrokerLink(
      `NATS of ${settings.consumer}`,
      (lost) => this.open(lost),
      async ({ nc }) => nc.close(),
      settings.reconnect,
    );
  }

  async publish(messages: readonly BrokerMessage[], signal: AbortSignal): Promise<OutboxTransportOutcome[]> {
    const connection = await this.link.get();
    const { consumer, timeoutMs, stream, reconnect } = this.settings;
    if (connection.disconnected)
      throw new BrokerUnavailableError(
        `${consumer}: NATS is disconnected, the client is reconnecting; not sent`,
        reconnect.baseMs,
        null,
      );
    const acks = messages.map(async (message): Promise<OutboxTransportOutcome> => {
      const headers = this.transport.headers();
      for (const [name, value] of Object.entries(message.headers)) headers.set(name, value);
      try {
        const ack = await connection.js.publish(message.destination, message.body, {
          msgID: message.eventId,
          headers,
          timeout: timeoutMs,
          ...(stream ? { expect: { streamName: stream } } : {}),
        });
        return {
          status: 'delivered',
          externalRunId: `${ack.stream}:${ack.seq}${ack.duplicate ? ' duplicate' : ''}`,
        };
      } catch (error) {
        return this.failure(message, error);
      }
    });
    // the client's own timeout settles each ack; the deadline only covers one that never does
    return acknowledged(acks, Date.now() + timeoutMs + 100, signal, (i) =>
      this.failure(messages[i]!, { name: 'TimeoutError' }),
    );
  }

  close(): Promise<void> {
    return this.link.close();
  }

  private failure(message: BrokerMessage, error: unknown): OutboxTransportOutcome {
    const { consumer, stream } = this.settings;
    const { name, code } = (error ?? {}) as { name?: unknown; code?: unknown };
    const failed = (errorCode: string, text: string): OutboxTransportOutcome => ({
      status: 'failed',
      errorCode,
      error: `${consumer}: ${text}`,
    });
    if (name === 'TimeoutError')
      return failed(
        BROKER_ERROR_CODES.publishTimeout,
        `JetStream did not acknowledge event ${message.eventId} within ${this.settings.timeoutMs} ms; it may hold it`,
      );
    if (name === 'JetStreamNotEnabled' || name === 'NoResponders')
      return failed(
        BROKER_ERROR_CODES.unroutable,
        `no stream captures subject "${message.destination}" (no responders; or JetStream is not ready after a restart)`,
      );
    if (name === 'JetStreamApiError' && code === WRONG_STREAM)
      return failed(
        BROKER_ERROR_CODES.unroutable,
        `subject "${message.destination}" is not captured by stream "${stream}" (${errorText(error)})`,
      );
    if (name === 'JetStreamApiError' || name === 'JetStreamError')
      return failed(
        BROKER_ERROR_CODES.publishNacked,
        `JetStream refused event ${message.eventId}: ${errorText(error)}`,
      );
    return failed(
      BROKER_ERROR_CODES.connectionLost,
      `the connection failed before JetStream acknowledged event ${message.eventId} (${errorText(error)}); it may hold it`,
    );
  }

  private async open(lost: () => void): Promise<Connection> {
    const { servers, consumer, timeoutMs, reconnect, connectionOptions } = this.settings;
    const nc = await withTimeout(
      this.transport.connect({
        reconnectTimeWait: Math.min(2000, reconnect.capMs),
        ...connectionOptions,
        servers: [...servers],
        name: `nestjs-pg-outbox ${consumer}`,
        timeout: timeoutMs,
        reconnect: true,
        maxReconnectAttempts: -1,
        waitOnFirstConnect: false,
      }),
      timeoutMs,
      `connecting to ${servers.join(', ')}`,
      (late) => late.close().catch(() => undefined),
    );
    const connection: Connection = {
      nc,
      js: this.jetstream.jetstream(nc, { timeout: timeoutMs }),
      disconnected: false,
    };
    void nc.closed().then(() => lost());
    void (async () => {
      for await (const status of nc.status()) {
        if (status.type === 'disconnect') {
          connection.disconnected = true;
          this.logger.warn(`${consumer}: disconnected from NATS; reconnecting`);
        } else if (status.type === 'reconnect') {
          connection.disconnected = false;
          this.logger.log(`${consumer}: reconnected to NATS`);
        }
      }
    })().catch(() => undefined);
    await this.checkStream(nc);
    this.logger.log(
      `${consumer}: connected to ${servers.join(', ')}${this.settings.stream ? `, stream "${this.settings.stream}"` : ''}`,
    );
    return connection;
  }

  /** Warns when the expected stream is missing, or its duplicate window is shorter than the longest retry gap. */
  private async checkStream(nc: NatsConnectionLike): Promise<void> {
    const { stream, consumer, backoffCapMs } = this.settings;
    if (!stream) return;
    try {
      const manager = await this.jetstream.jetstreamManager(nc);
      const info = await manager.streams.info(stream);
      const windowMs = (info.config.duplicate_window ?? 0) / 1e6;
      if (windowMs < backoffCapMs)
        this.logger.warn(
          `${consumer}: stream "${stream}" drops duplicates for ${windowMs} ms, less than the longest retry gap (backoff.capMs = ${backoffCapMs} ms): a message published again after an unknown outcome may be stored twice`,
        );
    } catch (error) {
      this.logger.warn(`${consumer}: could not read stream "${stream}": ${errorText(error)}`);
    }
  }
}
