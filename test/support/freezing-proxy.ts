import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';

/** Where a {@link FreezingProxy} forwards new connections. */
export interface ProxyTarget {
  host: string;
  port: number;
}

/** One connection through the proxy: the client's socket and the server's. */
interface Pair {
  client: Socket;
  server: Socket;
  /** Bytes received while frozen, forwarded on thaw. */
  held: { to: Socket; chunk: Buffer }[];
  /** One side closed while frozen: the other is closed on thaw. */
  closed: boolean;
  /** Never forwards again: it went to a server the proxy no longer points at (a hung old primary). */
  abandoned: boolean;
}

/**
 * A TCP proxy on loopback between an app and PostgreSQL that can freeze: it then stops forwarding bytes both ways
 * without closing anything, as a hung host or a network partition looks from the client (the kernel still
 * accepts connections; no reply ever comes). Unfrozen, the connections carry on where they stopped. Re-pointed,
 * new connections go to the new target (as a promoted standby behind a DNS name or a virtual IP looks), and the
 * connections made before stay frozen for good.
 */
export class FreezingProxy {
  private readonly pairs = new Set<Pair>();
  private frozen = false;
  /** Freezes when the client sends bytes containing one of these (the chunk is held, not forwarded). */
  private triggers: { pattern: Buffer; fired: () => void }[] = [];

  private constructor(
    private readonly server: Server,
    private target: ProxyTarget,
  ) {}

  /** Starts a proxy to `target` on a free loopback port. */
  static async start(target: ProxyTarget): Promise<FreezingProxy> {
    const server = createServer();
    const proxy = new FreezingProxy(server, target);
    server.on('connection', (client) => proxy.accept(client));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  /** The proxy's port on 127.0.0.1. */
  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** `url` (a postgres:// URL of the target) pointed at this proxy instead. */
  urlThrough(url: string): string {
    const parsed = new URL(url);
    parsed.hostname = '127.0.0.1';
    parsed.port = String(this.port);
    return parsed.toString();
  }

  /** True while frozen. */
  get isFrozen(): boolean {
    return this.frozen;
  }

  /** Stops forwarding, both ways, on every connection and on those made from now on; closes nothing. */
  freeze(): void {
    this.frozen = true;
    for (const pair of this.pairs) pause(pair);
  }

  /**
   * Freezes as soon as the client side sends bytes containing `pattern` (e.g. a statement's name or text);
   * resolves then. The chunk that matched is held back with the rest.
   */
  freezeOn(pattern: string): Promise<void> {
    return new Promise((resolve) => this.triggers.push({ pattern: Buffer.from(pattern), fired: resolve }));
  }

  /** Forwards again what was held, on every connection to the current target. */
  thaw(): void {
    this.frozen = false;
    for (const pair of this.pairs) if (!pair.abandoned) this.resume(pair);
  }

  /** New connections go to `target`, forwarded; the connections made before stay frozen for good. */
  repoint(target: ProxyTarget): void {
    for (const pair of this.pairs) {
      pair.abandoned = true;
      pause(pair);
    }
    this.target = target;
    this.frozen = false;
  }

  /** Connections open through the proxy now. */
  get connections(): number {
    return this.pairs.size;
  }

  /** Closes the proxy and every connection through it. */
  async close(): Promise<void> {
    for (const pair of this.pairs) {
      pair.client.destroy();
      pair.server.destroy();
    }
    this.pairs.clear();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    const server = connect(this.target.port, this.target.host);
    const pair: Pair = { client, server, held: [], closed: false, abandoned: false };
    this.pairs.add(pair);
    const forward = (to: Socket, chunk: Buffer, fromClient: boolean): void => {
      if (fromClient && !this.frozen) {
        const trigger = this.triggers.find((t) => chunk.includes(t.pattern));
        if (trigger) {
          this.triggers = this.triggers.filter((t) => t !== trigger);
          this.freeze();
          trigger.fired();
        }
      }
      if (this.frozen || pair.abandoned) pair.held.push({ to, chunk });
      else to.write(chunk);
    };
    client.on('data', (chunk: Buffer) => forward(server, chunk, true));
    server.on('data', (chunk: Buffer) => forward(client, chunk, false));
    // a hung host closes nothing: a connection closed on one side while frozen stays open on the other
    const closed = (): void => {
      if (this.frozen || pair.abandoned) pair.closed = true;
      else this.drop(pair);
    };
    client.on('close', closed);
    server.on('close', closed);
    client.on('error', () => undefined);
    server.on('error', () => undefined);
    if (this.frozen) pause(pair);
  }

  private drop(pair: Pair): void {
    this.pairs.delete(pair);
    pair.client.destroy();
    pair.server.destroy();
  }

  private resume(pair: Pair): void {
    for (const { to, chunk } of pair.held.splice(0)) to.write(chunk);
    if (pair.closed) this.drop(pair);
    else {
      pair.client.resume();
      pair.server.resume();
    }
  }
}

function pause(pair: Pair): void {
  pair.client.pause();
  pair.server.pause();
}
