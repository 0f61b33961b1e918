import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { checkHistory, timeToQuiet } from './support/history';
import { faultRandom, type FaultRandom } from './support/fault-random';

const EVENTS = 1000;
const TIMEOUT_MS = 300;
const TENANT = 'e0000000-0000-4000-8000-00000000000e';

/**
 * A receiver with network faults: it processes every request it reads in full (the effect), then answers in
 * one of four ways — properly, by resetting the connection in the middle of the response body, by never
 * answering, or with a 200 that comes after the sender's timeout fired. Its dedup by `webhook-id` is what
 * turns at-least-once delivery into exactly-once processing. The answer is chosen by the seed, the event's
 * number (`data.n`) and how many times the receiver has seen it, whatever order requests arrive in.
 */
function startFaultyReceiver(random: FaultRandom): Promise<{
  url: string;
  seen: Map<string, number>;
  faults: () => number;
  close(): Promise<void>;
}> {
  const seen = new Map<string, number>();
  let faults = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const id = String(req.headers['webhook-id']);
      const times = (seen.get(id) ?? 0) + 1;
      seen.set(id, times);
      const roll = random.intFor(`${eventNumber(Buffer.concat(chunks)) ?? id}:${times}`, 100);
      if (roll < 15) {
        faults++;
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
        res.write('{"ok":');
        setTimeout(() => res.socket?.destroy(), 5); // reset mid-body
      } else if (roll < 25) {
        faults++; // accepts and never answers; the sender's timeout cuts it
      } else if (roll < 35) {
        faults++;
        setTimeout(
          () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'),
          TIMEOUT_MS + 200,
        );
      } else {
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      }
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}/hook`,
        seen,
        faults: () => faults,
        close: () => {
          server.closeAllConnections();
          return new Promise((done) => server.close(() => done()));
        },
      });
    }),
  );
}

/** The `data.n` of a webhook body, or undefined when the body is not one of this spec's events. */
function eventNumber(body: Buffer): number | undefined {
  try {
    const n = (JSON.parse(body.toString('utf8')) as { data?: { n?: unknown } }).data?.n;
    return typeof n === 'number' ? n : undefined;
  } catch {
    return undefined;
  }
}

describe('fault: network faults toward a webhook receiver', () => {
  const random = faultRandom(__filename);
  let db: TestDatabase;
  const relays: TestApp[] = [];
  let receiver: Awaited<ReturnType<typeof startFaultyReceiver>>;
  beforeAll(async () => {
    db = await createTestDatabase();
    receiver = await startFaultyReceiver(random);
  });
  afterAll(async () => {
    for (const relay of relays) await relay.close();
    await receiver?.close();
    await db?.drop();
  });

  it('delivers every event at least once, and the receiver’s dedup by event id yields each exactly once', async () => {
    const webhook = {
      name: 'faulty',
      url: receiver.url,
      events: ['fault.hook.*'],
      timeoutMs: TIMEOUT_MS,
      maxAttempts: 30,
      backoff: { baseMs: 10, capMs: 200, jitter: 0.5 },
      circuitBreaker: { failureThreshold: 5, cooldownMs: 100 },
    };
    for (let i = 0; i < 2; i++) {
      relays.push(
        await buildApp({
          url: db.url,
          webhooks: { webhooks: [webhook] },
          outbox: {
            handlerTimeoutMs: 1000,
            relay: { enabled: true, pollIntervalMs: 50, leaseMs: 5000 },
          },
        }),
      );
    }
    const [producer] = relays;
    const ids: string[] = [];
    for (let i = 0; i < EVENTS; i += 250) {
      const chunk = Array.from({ length: 250 }, (_, j) => ({
        tenantId: TENANT,
        eventName: 'fault.hook.sent.v1',
        payload: { n: i + j },
      }));
      ids.push(...(await producer!.dataSource.transaction((m) => producer!.outbox.enqueueMany(m, chunk))));
    }
    const recoveryMs = await timeToQuiet(db, 120_000);
    const missing = ids.filter((id) => !receiver.seen.has(id));
    const redelivered = [...receiver.seen.values()].reduce((sum, n) => sum + (n - 1), 0);
    const report = await checkHistory(db, {
      scenario: 'webhook: reset mid-body, no answer, 200 after timeout',
      consumers: [],
      faults: receiver.faults(),
      recoveryMs,
      expectedEvents: ids,
    });
    console.log(
      `[faults] webhook receiver: distinct events=${receiver.seen.size} redelivered (deduped by webhook-id)=${redelivered} lost=${missing.length}`,
    );
    expect(receiver.faults()).toBeGreaterThan(50);
    expect(missing).toEqual([]);
    expect(receiver.seen.size).toBe(EVENTS);
    expect(report).toMatchObject({ events: EVENTS, lost: 0, leftOpen: 0 });
    const [dead] = await db.sql<{ n: number }>(
      `select count(*)::int n from outbox_deliveries where status <> 'delivered'`,
    );
    expect(dead!.n).toBe(0);
  });
});
