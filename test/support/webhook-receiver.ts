import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createTestDatabase, type TestDatabase } from './test-database';

/** One request the receiver got. */
export interface ReceivedWebhook {
  path: string;
  headers: IncomingHttpHeaders;
  /** The raw body, as sent (what a signature covers). */
  body: string;
  /** `webhook-id` (the event id). */
  id: string;
  /** `outbox-attempt`. */
  attempt: number;
  /** `answered` once a reply went out; `aborted` when the sender went away first. */
  outcome: 'pending' | 'answered' | 'aborted';
  /** The status it was answered with, once answered. */
  status?: number;
}

/** How to answer a request. */
export interface WebhookReply {
  status?: number;
  headers?: Record<string, string>;
  /** A string as is, anything else as JSON. Default `{ "ok": true }`. */
  body?: unknown;
  /** Wait this long before answering. */
  delayMs?: number;
  /** Never answer (until the sender gives up or the receiver closes). */
  hang?: boolean;
}

/** A real HTTP server on 127.0.0.1 (port 0) that records requests and answers as told. */
export interface WebhookReceiver {
  /** `http://127.0.0.1:<port>`; append a path per webhook. */
  baseUrl: string;
  requests: ReceivedWebhook[];
  /** Decides each answer; default 200 `{ ok: true }`. */
  reply: (request: ReceivedWebhook, index: number) => WebhookReply | Promise<WebhookReply>;
  /** Highest number of requests of one event id in flight at the same moment, over the receiver's life. */
  maxConcurrentPerId(): number;
  /** Requests in flight now. */
  inFlight(): number;
  /** Requests to one path. */
  to(path: string): ReceivedWebhook[];
  close(): Promise<void>;
}

/** Starts a receiver. */
export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const requests: ReceivedWebhook[] = [];
  const open = new Map<string, number>();
  let maxPerId = 0;
  let inFlight = 0;
  const receiver: WebhookReceiver = {
    baseUrl: '',
    requests,
    reply: () => ({}),
    maxConcurrentPerId: () => maxPerId,
    inFlight: () => inFlight,
    to: (path) => requests.filter((r) => r.path === path),
    close: () => undefined as never,
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const id = String(req.headers['webhook-id'] ?? '');
      const request: ReceivedWebhook = {
        path: req.url ?? '/',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        id,
        attempt: Number(req.headers['outbox-attempt']),
        outcome: 'pending',
      };
      const index = requests.push(request) - 1;
      inFlight++;
      open.set(id, (open.get(id) ?? 0) + 1);
      maxPerId = Math.max(maxPerId, open.get(id)!);
      let done = false;
      const finish = (outcome: 'answered' | 'aborted'): void => {
        if (done) return;
        done = true;
        request.outcome = outcome;
        inFlight--;
        open.set(id, open.get(id)! - 1);
      };
      res.on('close', () => finish(res.writableFinished ? 'answered' : 'aborted'));
      (async () => {
        const reply = await receiver.reply(request, index);
        if (reply.hang) return;
        if (reply.delayMs) await new Promise((resolve) => setTimeout(resolve, reply.delayMs));
        if (res.destroyed) return;
        const body = reply.body === undefined ? { ok: true } : reply.body;
        const text = typeof body === 'string' ? body : JSON.stringify(body);
        request.status = reply.status ?? 200;
        res.writeHead(request.status, {
          'content-type': typeof body === 'string' ? 'text/plain' : 'application/json',
          ...reply.headers,
        });
        res.end(text);
      })().catch((error: unknown) => res.destroy(error instanceof Error ? error : new Error(String(error))));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  receiver.close = async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return receiver;
}

/** A URL on 127.0.0.1 where nothing listens (a port just opened and closed again). */
export async function refusedUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}/nobody`;
}

/**
 * A spec's test database and receiver, made in `beforeAll` and dropped in `afterAll` (read their fields from the
 * tests: they are set once the hooks ran).
 */
export function useDatabaseAndReceiver(): { db: TestDatabase; receiver: WebhookReceiver } {
  const made = {} as { db: TestDatabase; receiver: WebhookReceiver };
  beforeAll(async () => {
    [made.db, made.receiver] = await Promise.all([createTestDatabase(), startWebhookReceiver()]);
  });
  afterAll(() => Promise.all([made.receiver?.close(), made.db?.drop()]));
  return made;
}
