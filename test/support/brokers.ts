import { randomBytes } from 'node:crypto';
import { connect as amqpConnect, type Channel, type ChannelModel } from 'amqplib';
import {
  connect as natsConnect,
  headers as natsHeaders,
  nanos,
  type NatsConnection,
} from '@nats-io/transport-node';
import { AckPolicy, jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { OUTBOX_MESSAGE_HEADERS } from 'nestjs-pg-outbox/inbox';

/** The brokers of this machine; `npm test` starts them when they are down (tools/test-set-up). */
export const RABBITMQ_URL = process.env.OUTBOX_TEST_RABBITMQ_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
export const NATS_SERVERS = process.env.OUTBOX_TEST_NATS_SERVERS ?? '127.0.0.1:4222';

/** A name no other test (or run) uses. */
export function uniqueName(prefix: string): string {
  return `${prefix}_${randomBytes(5).toString('hex')}`;
}

/** What an outbox forwarder sends with a message: the headers of `OUTBOX_MESSAGE_HEADERS`. */
export interface ForwardedMessage {
  id: string;
  tenantId?: string;
  eventName?: string;
  body?: unknown;
}

function outboxHeaders(m: ForwardedMessage): Record<string, string> {
  const headers: Record<string, string> = { [OUTBOX_MESSAGE_HEADERS.attempt]: '1' };
  if (m.tenantId !== undefined) headers[OUTBOX_MESSAGE_HEADERS.tenant] = m.tenantId;
  if (m.eventName !== undefined) headers[OUTBOX_MESSAGE_HEADERS.event] = m.eventName;
  return headers;
}

/** The JSON body the forwarder sends (the webhook envelope), unless the test gives its own. */
function body(m: ForwardedMessage): Buffer {
  const envelope = m.body ?? {
    eventId: m.id,
    eventName: m.eventName ?? 'test.inbox.v1',
    tenantId: m.tenantId,
    occurredAt: new Date().toISOString(),
    correlationId: null,
    aggregate: null,
    schemaVersion: 1,
    data: {},
  };
  return Buffer.from(typeof envelope === 'string' ? envelope : JSON.stringify(envelope));
}

/**
 * A RabbitMQ queue of its own with a dead-letter exchange and queue, on one connection; `close()` deletes them.
 * `type`: quorum queues count deliveries (`x-delivery-count`), classic ones only flag a redelivery.
 */
export class TestRabbitQueue {
  readonly queue = uniqueName('inbox_q');
  readonly deadLetterExchange = `${this.queue}.dlx`;
  readonly deadLetterQueue = `${this.queue}.dead`;
  private constructor(
    readonly connection: ChannelModel,
    readonly channel: Channel,
  ) {}

  static async create(type: 'quorum' | 'classic' = 'quorum'): Promise<TestRabbitQueue> {
    const connection = await amqpConnect(RABBITMQ_URL);
    const channel = await connection.createChannel();
    const q = new TestRabbitQueue(connection, channel);
    await channel.assertExchange(q.deadLetterExchange, 'fanout', { durable: false, autoDelete: false });
    await channel.assertQueue(q.deadLetterQueue, { durable: true });
    await channel.bindQueue(q.deadLetterQueue, q.deadLetterExchange, '');
    await channel.assertQueue(q.queue, q.queueOptions(type));
    return q;
  }

  /** The options the queue was declared with (a Nest RMQ server must declare it the same way). */
  queueOptions(type: 'quorum' | 'classic' = 'quorum'): {
    durable: true;
    arguments: Record<string, string>;
  } {
    return {
      durable: true,
      arguments: { 'x-queue-type': type, 'x-dead-letter-exchange': this.deadLetterExchange },
    };
  }

  /** Publishes as a forwarder does: persistent, `messageId` = event id, the outbox headers. */
  publish(m: ForwardedMessage): void {
    this.channel.sendToQueue(this.queue, body(m), {
      persistent: true,
      messageId: m.id,
      contentType: 'application/json',
      headers: outboxHeaders(m),
    });
  }

  /** The message ids in the dead-letter queue now (taken off it). */
  async deadLettered(): Promise<string[]> {
    const ids: string[] = [];
    for (;;) {
      const message = await this.channel.get(this.deadLetterQueue, { noAck: true });
      if (message === false) return ids;
      ids.push(String(message.properties.messageId));
    }
  }

  /** Messages ready in the queue (not counting those delivered and not yet settled). */
  async ready(): Promise<number> {
    return (await this.channel.checkQueue(this.queue)).messageCount;
  }

  async close(): Promise<void> {
    await this.channel.deleteQueue(this.queue).catch(() => undefined);
    await this.channel.deleteQueue(this.deadLetterQueue).catch(() => undefined);
    await this.channel.deleteExchange(this.deadLetterExchange).catch(() => undefined);
    await this.connection.close().catch(() => undefined);
  }
}

/**
 * A JetStream stream of its own (subjects `<stream>.>`) with a durable consumer (pull, or push to
 * `deliverSubject`), and a subscription to the consumer's "message terminated" advisories; `close()` deletes the
 * stream.
 */
export class TestJetStream {
  readonly stream = uniqueName('inbox_s');
  readonly durable = 'inbox';
  /** Stream sequences the server reported terminated (dead-lettered) for the consumer. */
  readonly terminated: number[] = [];
  private constructor(
    readonly nc: NatsConnection,
    readonly jsm: JetStreamManager,
  ) {}

  static async create(
    options: { ackWaitMs?: number; maxDeliver?: number; deliverSubject?: string } = {},
  ): Promise<TestJetStream> {
    const nc = await natsConnect({ servers: NATS_SERVERS });
    const s = new TestJetStream(nc, await jetstreamManager(nc));
    await s.jsm.streams.add({ name: s.stream, subjects: [`${s.stream}.>`] });
    await s.jsm.consumers.add(s.stream, {
      durable_name: s.durable,
      ack_policy: AckPolicy.Explicit,
      ack_wait: nanos(options.ackWaitMs ?? 30_000),
      max_deliver: options.maxDeliver ?? 20,
      ...(options.deliverSubject ? { deliver_subject: options.deliverSubject } : {}),
    });
    nc.subscribe(`$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.${s.stream}.${s.durable}`, {
      callback: (_error, msg) => {
        s.terminated.push(msg.json<{ stream_seq: number }>().stream_seq);
      },
    });
    await nc.flush();
    return s;
  }

  get subject(): string {
    return `${this.stream}.events`;
  }

  /** Publishes as a forwarder does: `Nats-Msg-Id` = event id, the outbox headers; returns the stream sequence. */
  async publish(m: ForwardedMessage): Promise<number> {
    const h = natsHeaders();
    for (const [name, value] of Object.entries(outboxHeaders(m))) h.set(name, value);
    const ack = await jetstream(this.nc).publish(this.subject, body(m), { msgID: m.id, headers: h });
    return ack.seq;
  }

  /** Messages of the consumer not yet acknowledged or terminated (waiting or in flight). */
  async unsettled(): Promise<number> {
    const info = await this.jsm.consumers.info(this.stream, this.durable);
    return info.num_pending + info.num_ack_pending;
  }

  async close(): Promise<void> {
    await this.jsm.streams.delete(this.stream).catch(() => undefined);
    await this.nc.close().catch(() => undefined);
  }
}
