import { Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  generateWebhookSecret,
  OutboxWebhookVerificationError,
  verifyWebhook,
} from 'nestjs-pg-outbox/webhooks';

/**
 * A stand-in for the CRM's webhook consumer (an n8n workflow, a partner's endpoint): a plain node:http server
 * on 127.0.0.1 that checks each request's signature with `verifyWebhook()`, skips event ids it has already
 * seen (deliveries are at-least-once), logs the event and answers `{ ok: true, runId }`.
 */
@Injectable()
export class DemoWebhookReceiver implements OnApplicationShutdown {
  private readonly logger = new Logger(DemoWebhookReceiver.name);
  /** The secret shared with the outbox's webhook; a fresh one each run. */
  readonly secret = generateWebhookSecret();
  private readonly seen = new Set<string>();
  private server: Server | null = null;
  private address = '';

  /** Where the outbox posts: `http://127.0.0.1:<port>/webhooks/contacts`. */
  get url(): string {
    return `${this.address}/webhooks/contacts`;
  }

  /** Listens on 127.0.0.1:`port` (0: any free port). */
  async listen(port: number): Promise<void> {
    const server = createServer((req, res) => this.receive(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    this.server = server;
    this.address = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    this.logger.log(`webhook receiver on ${this.url}`);
  }

  // After the relay drained (onModuleDestroy): requests in flight get their answers first.
  async onApplicationShutdown(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    server.closeIdleConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private receive(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const answer = (status: number, body: unknown): void => {
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      };
      if (req.method !== 'POST' || req.url !== '/webhooks/contacts')
        return answer(404, { ok: false, error: 'not found' });
      try {
        const event = verifyWebhook({
          secret: this.secret,
          headers: req.headers,
          body: Buffer.concat(chunks),
        });
        const runId = `demo-${event.eventId.slice(0, 8)}`;
        if (this.seen.has(event.eventId)) {
          this.logger.log(
            `duplicate ${event.eventName} ${event.eventId} ignored (attempt ${String(req.headers['outbox-attempt'])})`,
          );
        } else {
          this.seen.add(event.eventId);
          this.logger.log(
            `${event.eventName} ${event.eventId} for tenant ${event.tenantId}: ${JSON.stringify(event.data)}`,
          );
        }
        answer(200, { ok: true, runId });
      } catch (error) {
        if (!(error instanceof OutboxWebhookVerificationError)) throw error;
        this.logger.warn(`rejected a request: ${error.message}`);
        answer(400, { ok: false, error: error.reason });
      }
    });
  }
}
