import { createServer, connect, type Server, type Socket } from 'node:net';

/** Options of {@link TcpProxy.start}. */
export interface TcpProxyOptions {
  /**
   * Holds what the target sends for this long before passing it on, as a slow link does. When the target's side
   * closes, what is still held is dropped: it was in flight, and never arrives.
   */
  delayMs?: number;
}

/**
 * A TCP proxy on 127.0.0.1 that can be re-pointed, as a DNS name or a virtual IP moved to a promoted standby looks
 * to the app: connections opened after {@link pointAt} go to the new target, and those already open stay with the
 * old one (alive, dead or hung), as they do when a DNS record changes.
 */
export class TcpProxy {
  private readonly pairs = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    private targetPort: number,
    private readonly delayMs: number,
  ) {}

  /** Listens on a free port of 127.0.0.1, forwarding to `targetPort` there. */
  static async start(targetPort: number, options: TcpProxyOptions = {}): Promise<TcpProxy> {
    const server = createServer();
    const proxy = new TcpProxy(server, targetPort, options.delayMs ?? 0);
    server.on('connection', (client) => proxy.forward(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    return proxy;
  }

  get port(): number {
    const address = this.server.address();
    return typeof address === 'object' && address ? address.port : 0;
  }

  /** Sends the connections opened from now on to `targetPort`. */
  pointAt(targetPort: number): void {
    this.targetPort = targetPort;
  }

  /** Stops listening and cuts every connection. */
  async close(): Promise<void> {
    for (const socket of this.pairs) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private forward(client: Socket): void {
    const upstream = connect(this.targetPort, '127.0.0.1');
    for (const socket of [client, upstream]) {
      this.pairs.add(socket);
      socket.on('close', () => this.pairs.delete(socket));
      // A reset on one side ends the pair: the other side sees its connection close.
      socket.on('error', () => undefined);
    }
    client.on('data', (chunk) => upstream.write(chunk));
    upstream.on('data', (chunk) => {
      if (this.delayMs === 0) client.write(chunk);
      else setTimeout(() => client.destroyed || client.write(chunk), this.delayMs);
    });
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  }
}
