import { connect, type Socket } from 'node:net';
import type { PoolClient } from 'pg';

/** The fields of pg's client that a cancel request needs (set once it connected). */
interface CancelTarget {
  host?: string;
  port?: number;
  processID?: number | null;
  secretKey?: number | null;
}

/** The CancelRequest code of the PostgreSQL protocol (1234 in the high 16 bits, 5678 in the low). */
const CANCEL_REQUEST_CODE = 80877102;

/**
 * Asks PostgreSQL to cancel the statement the session of `client` is running, as libpq's `PQcancel` does: a
 * CancelRequest (the backend's process id and secret key) on a connection of its own — no pool slot, no
 * authentication, and PgBouncer forwards it. The statement then fails with SQLSTATE 57014 on `client`; a session
 * that is idle by the time the request arrives ignores it. Resolves when the server has closed that connection
 * (it signalled the backend by then), or after `timeoutMs`; false when the client's address or key is unknown
 * (a custom stream) or the request could not be sent. Sent in the clear, as libpq does before version 17: the
 * server reads a cancel request before any encryption or authentication.
 */
export function sendCancelRequest(client: PoolClient, timeoutMs: number): Promise<boolean> {
  const { host, port, processID, secretKey } = client as unknown as CancelTarget;
  if (typeof processID !== 'number' || typeof secretKey !== 'number' || !port) return Promise.resolve(false);
  const packet = Buffer.alloc(16);
  packet.writeInt32BE(16, 0);
  packet.writeInt32BE(CANCEL_REQUEST_CODE, 4);
  packet.writeInt32BE(processID, 8);
  packet.writeInt32BE(secretKey, 12);
  return new Promise((resolve) => {
    const socket: Socket =
      host?.startsWith('/') === true
        ? connect(`${host}/.s.PGSQL.${port}`)
        : connect({ host: host ?? 'localhost', port });
    const timer = setTimeout(() => done(true), timeoutMs);
    const done = (sent: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(sent);
    };
    socket.on('connect', () => socket.end(packet));
    socket.on('close', () => done(true));
    socket.on('error', () => done(false));
  });
}
