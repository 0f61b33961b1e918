// writable-primary-client.ts — a pg Client class that connects to whichever host accepts writes
import { Client, type ClientConfig } from 'pg';

/** One server of the cluster: the primary or a standby, in any order. */
export interface DatabaseHost {
  host: string;
  port: number;
}

type ConnectCallback = ((err: Error) => void) | ((err: null, client: Client) => void);

/**
 * A pg `Client` class, for TypeORM's `extra: { Client }`, whose connections go to the first of `hosts` that
 * accepts writes: what libpq's `target_session_attrs=read-write` does, which pg does not. Before each new
 * connection it asks the hosts in turn, starting with the one that answered last time, `pg_is_in_recovery()`
 * over a probe connection bounded by `probeTimeoutMs` (a dead host refuses at once; a hung one is given up
 * after the bound). After a failover, the next connection the pool opens goes to the promoted standby.
 */
export function writablePrimaryClient(hosts: readonly DatabaseHost[], probeTimeoutMs = 2_000): typeof Client {
  let lastWritable = 0;

  async function findWritableHost(login: ClientConfig): Promise<DatabaseHost> {
    const refusals: string[] = [];
    for (let i = 0; i < hosts.length; i++) {
      const index = (lastWritable + i) % hosts.length;
      const candidate = hosts[index]!;
      const probe = new Client({
        ...login,
        ...candidate,
        connectionTimeoutMillis: probeTimeoutMs,
        query_timeout: probeTimeoutMs,
      });
      probe.on('error', () => undefined);
      try {
        await probe.connect();
        const { rows } = await probe.query<{ standby: boolean }>('select pg_is_in_recovery() as standby');
        if (!rows[0]!.standby) {
          lastWritable = index;
          return candidate;
        }
        refusals.push(`${candidate.host}:${candidate.port} is a standby`);
      } catch (error) {
        refusals.push(`${candidate.host}:${candidate.port}: ${(error as Error).message}`);
      } finally {
        void probe.end().catch(() => undefined);
      }
    }
    throw new Error(`no PostgreSQL host accepts writes (${refusals.join('; ')})`);
  }

  return class WritablePrimaryClient extends Client {
    override connect(): Promise<Client>;
    override connect(callback: ConnectCallback): void;
    override connect(callback?: ConnectCallback): Promise<Client> | void {
      const login = { user: this.user, password: this.password, database: this.database, ssl: this.ssl };
      const connected = findWritableHost(login).then(({ host, port }) => {
        this.host = host;
        this.port = port;
        return super.connect();
      });
      if (!callback) return connected;
      connected.then(
        (client) => (callback as (err: null, client: Client) => void)(null, client),
        (error: Error) => (callback as (err: Error) => void)(error),
      );
    }
  };
}
