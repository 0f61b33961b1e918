import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, Socket, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { uniqueName } from './brokers';
import { waitFor } from './wait-for';

const run = promisify(execFile);

/** The machine's RabbitMQ (ECOSYSTEM.md): guest/guest on loopback. */
export const RABBITMQ = { host: '127.0.0.1', port: 5672, user: 'guest', password: 'guest' };

/** A free TCP port on loopback. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * A RabbitMQ vhost of one test (so that closing "all connections" closes only the test's own, not those of other
 * users of the machine's broker), deleted with everything in it by `drop()`.
 */
export interface RabbitVhost {
  name: string;
  /** AMQP URL of the vhost, straight to the broker, or through `port` (a {@link TcpGate}). */
  url(port?: number): string;
  /** `rabbitmqctl close_all_connections` for this vhost: the broker closes them (CONNECTION_FORCED). */
  closeAllConnections(): Promise<void>;
  drop(): Promise<void>;
}

export async function createRabbitVhost(): Promise<RabbitVhost> {
  const name = uniqueName('outbox_test');
  await rabbitmqctl('add_vhost', name);
  await rabbitmqctl('set_permissions', '-p', name, RABBITMQ.user, '.*', '.*', '.*');
  return {
    name,
    url: (port = RABBITMQ.port) =>
      `amqp://${RABBITMQ.user}:${RABBITMQ.password}@${RABBITMQ.host}:${port}/${encodeURIComponent(name)}`,
    closeAllConnections: async () => {
      await rabbitmqctl('close_all_connections', '-p', name, 'outbox test: connection dropped mid-batch');
    },
    drop: () => rabbitmqctl('delete_vhost', name).then(() => undefined),
  };
}

async function rabbitmqctl(...args: string[]): Promise<string> {
  const { stdout } = await run('rabbitmqctl', ['-q', ...args], { timeout: 60_000 });
  return stdout;
}

/**
 * A loopback TCP proxy in front of a broker: closed, connections are refused (the broker is "down"); open, they
 * pass through; `dropAll()` resets every connection through it at once (a network failure mid-batch).
 */
export interface TcpGate {
  port: number;
  open(): Promise<void>;
  close(): Promise<void>;
  dropAll(): void;
  /**
   * Lets the next chunk a client sends reach the broker, then cuts that client off at once while the broker side is
   * closed gracefully: what the chunk published is taken by the broker, but its acknowledgements never come back
   * (the outcome a client cannot know).
   */
  cutAfterNextWrite(): void;
  /**
   * Holds back what the broker sends on every connection open now (new connections pass): a client mid-batch waits
   * for its confirms until `release()`, so whatever happens to the broker meanwhile happens mid-batch.
   */
  hold(): void;
  release(): void;
  /** Connections accepted so far. */
  readonly accepted: number;
}

export async function createTcpGate(target: { host: string; port: number }): Promise<TcpGate> {
  const port = await freePort();
  const sockets = new Set<Socket>();
  let server: Server | null = null;
  let accepted = 0;
  let cutNext = false;
  const pipes = new Map<Socket, Socket>();
  const held: Array<[Socket, Socket]> = [];
  const dropAll = (): void => {
    for (const socket of sockets) socket.destroy();
    sockets.clear();
  };
  return {
    port,
    get accepted() {
      return accepted;
    },
    open: async () => {
      if (server) return;
      server = createServer((client) => {
        accepted++;
        const upstream = new Socket();
        sockets.add(client).add(upstream);
        let cut = false;
        const end = (): void => {
          client.destroy();
          // a cut connection's broker side closes by itself once the last chunk and the FIN went out
          if (!cut) upstream.destroy();
          sockets.delete(client);
          sockets.delete(upstream);
          pipes.delete(upstream);
        };
        client.on('error', end).on('close', end);
        upstream.on('error', end).on('close', end);
        upstream.connect(target.port, target.host, () => {
          client.on('data', (chunk: Buffer) => {
            if (!cutNext) {
              upstream.write(chunk);
              return;
            }
            cutNext = false;
            cut = true;
            upstream.unpipe(client);
            upstream.end(chunk);
            client.destroy();
          });
          upstream.pipe(client);
          pipes.set(upstream, client);
        });
      });
      await new Promise<void>((resolve) => server!.listen(port, '127.0.0.1', resolve));
    },
    close: async () => {
      const closing = server;
      server = null;
      dropAll();
      if (closing) await new Promise((resolve) => closing.close(resolve));
    },
    dropAll,
    cutAfterNextWrite: () => {
      cutNext = true;
    },
    hold: () => {
      for (const [upstream, client] of pipes) {
        upstream.unpipe(client);
        upstream.pause();
        held.push([upstream, client]);
      }
    },
    release: () => {
      for (const [upstream, client] of held.splice(0)) if (!client.destroyed) upstream.pipe(client);
    },
  };
}

/**
 * A nats-server of one test, with JetStream and a store folder of its own, on a free port: kinder to other users of
 * the machine than restarting theirs. `stop()` kills it (SIGKILL by default: a crash), `start()` runs it again on
 * the same port and store, `remove()` stops it and deletes the store.
 */
export interface NatsServer {
  port: number;
  url: string;
  start(): Promise<void>;
  stop(signal?: NodeJS.Signals): Promise<void>;
  remove(): Promise<void>;
}

export async function createNatsServer({ started = true } = {}): Promise<NatsServer> {
  const port = await freePort();
  const store = mkdtempSync(join(tmpdir(), 'outbox-nats-'));
  let child: ChildProcess | null = null;
  let exited: Promise<void> = Promise.resolve();
  const server: NatsServer = {
    port,
    url: `nats://127.0.0.1:${port}`,
    start: async () => {
      if (child) return;
      const spawned = spawn('nats-server', ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', store], {
        stdio: 'ignore',
      });
      child = spawned;
      exited = new Promise((resolve) => spawned.once('exit', () => resolve()));
      await waitFor(() => canConnect(port), { timeoutMs: 15_000, message: `nats-server on port ${port}` });
    },
    stop: async (signal = 'SIGKILL') => {
      const running = child;
      child = null;
      if (!running) return;
      running.kill(signal);
      await exited;
    },
    remove: async () => {
      await server.stop();
      rmSync(store, { recursive: true, force: true });
    },
  };
  if (started) await server.start();
  return server;
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
    socket.connect(port, '127.0.0.1');
  });
}

/** The aggregates whose messages did not arrive in commit order (the test's payload `n` grows with it). */
export function outOfOrder(
  received: readonly { body: { aggregate: { id: string } | null; data: { n: number } } }[],
): string[] {
  const last = new Map<string, number>();
  const wrong = new Set<string>();
  for (const { body } of received) {
    const aggregate = body.aggregate!.id;
    if ((last.get(aggregate) ?? -1) > body.data.n) wrong.add(aggregate);
    last.set(aggregate, body.data.n);
  }
  return [...wrong];
}
