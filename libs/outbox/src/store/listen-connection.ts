import { Client, type ClientConfig, type Pool } from 'pg';
import type { DataSource } from 'typeorm';
import { listenWakeup, type OutboxNames } from './sql';

/** What a `ListenConnection` reports until it is closed. */
export interface ListenHandlers {
  /** A wake-up arrived, with its payload. */
  notification(payload: string | undefined): void;
  /** The connection failed or ended; it is of no further use (close it). */
  lost(error: unknown): void;
}

/**
 * The connection that LISTENs for wake-ups: a pg client of its own, outside the app's pool (a pooled
 * connection would go back to the pool with the LISTEN on it), made with the pool's settings.
 */
export class ListenConnection {
  private readonly client: Client;

  constructor(dataSource: DataSource, handlers: ListenHandlers) {
    const pool = (dataSource.driver as unknown as { master: Pool }).master;
    this.client = new Client(pool.options as ClientConfig);
    this.client.on('notification', (message) => handlers.notification(message.payload));
    this.client.on('error', (error) => handlers.lost(error));
    this.client.on('end', () => handlers.lost(new Error('connection ended')));
  }

  /** Connects and subscribes to the wake-ups of the outbox in `names`' schema. */
  async listen(names: OutboxNames): Promise<void> {
    await this.client.connect();
    await this.client.query(listenWakeup(names).text);
  }

  /** Stops reporting and closes the connection. Never rejects. */
  async close(): Promise<void> {
    this.client.removeAllListeners();
    this.client.on('error', () => undefined);
    await this.client.end().catch(() => undefined);
  }
}
