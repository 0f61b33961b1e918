/**
 * App B of the cross-app spec, in a process of its own (so that it can be SIGKILLed): `node
 * --conditions=@nestjs-pg-outbox/source -r @swc-node/register test/support/inbox-consumer-child.ts`. Consumes a
 * RabbitMQ queue or a JetStream durable consumer with the inbox's plain form (`OutboxInbox.handle`), the handler
 * writing a row of `inbox_effects` (see inbox-effects.ts) in the inbox transaction, ten messages in flight at most.
 * Env: DATABASE_URL; BROKER `rabbitmq` (AMQP_URL, QUEUE) or `jetstream` (NATS_SERVERS, STREAM, DURABLE);
 * LOSE_ACKS_AFTER, optional: once that many messages were acknowledged, acknowledgements are swallowed (a crash
 * between the commit and the ack, as the broker sees it), each printed `ACK_LOST <id>`. Prints READY once it
 * consumes, then `OUTCOME <outcome> <message id> <delivery count>` for each message handled.
 */
import 'reflect-metadata';
import { connect as amqpConnect } from 'amqplib';
import { connect as natsConnect } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import {
  OutboxInbox,
  OutboxInboxModule,
  amqpInboxMessage,
  jetStreamInboxMessage,
  type OutboxInboxMessage,
} from 'nestjs-pg-outbox/inbox';
import { buildApp } from './build-app';
import { runChildMain } from './child-main';
import { recordInboxEffect } from './inbox-effects';

const CONSUMER = 'cross-app';
const IN_FLIGHT = 10;

async function main(): Promise<void> {
  const t = await buildApp({
    url: process.env.DATABASE_URL!,
    imports: [OutboxInboxModule.forRoot({ maxDeliveries: 20 })],
  });
  const inbox = t.app.get(OutboxInbox);
  const loseAcksAfter = process.env.LOSE_ACKS_AFTER ? Number(process.env.LOSE_ACKS_AFTER) : Infinity;
  let acked = 0;
  const handle = async (message: OutboxInboxMessage): Promise<void> => {
    const settled: OutboxInboxMessage = {
      ...message,
      ack: () => {
        if (acked >= loseAcksAfter) return void process.stdout.write(`ACK_LOST ${message.id}\n`);
        acked++;
        return message.ack();
      },
    };
    const outcome = await inbox.handle(CONSUMER, settled, (_payload, context) => recordInboxEffect(context));
    process.stdout.write(`OUTCOME ${outcome} ${message.id} ${message.deliveryCount}\n`);
  };

  if (process.env.BROKER === 'rabbitmq') {
    const connection = await amqpConnect(process.env.AMQP_URL!);
    const channel = await connection.createChannel();
    await channel.prefetch(IN_FLIGHT);
    await channel.consume(process.env.QUEUE!, (msg) => {
      if (msg) void handle(amqpInboxMessage(channel, msg));
    });
  } else {
    const nc = await natsConnect({ servers: process.env.NATS_SERVERS! });
    const consumer = await jetstream(nc).consumers.get(process.env.STREAM!, process.env.DURABLE!);
    const messages = await consumer.consume({ max_messages: IN_FLIGHT });
    void (async () => {
      for await (const msg of messages) void handle(jetStreamInboxMessage(msg));
    })();
  }
  process.stdout.write('READY\n');
}

runChildMain(main);
