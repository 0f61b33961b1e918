/** Server settings unless `options.settings` overrides them. fsync stays on: benchmarks need real commits. */
export const DEFAULT_SETTINGS: Readonly<Record<string, string>> = {
  // Loopback only: the cluster trusts every connection, so it must not be reachable from elsewhere.
  listen_addresses: '127.0.0.1',
  // TCP only: the default socket folder (/var/run/postgresql) may be missing or not writable by this user.
  unix_socket_directories: '',
  // Room for several pools (app, outbox workers, test helpers) at once.
  max_connections: '200',
};

/** The defaults with `extra` over them; refuses a setting name that is not one, and `port`. */
export function mergeSettings(extra: Record<string, string> | undefined): Record<string, string> {
  const settings = { ...DEFAULT_SETTINGS, ...extra };
  for (const name of Object.keys(settings)) {
    if (!/^[A-Za-z_][A-Za-z0-9_.]*$/.test(name)) {
      throw new Error(`embedded PostgreSQL: invalid setting name "${name}"`);
    }
  }
  if ('port' in settings) {
    throw new Error('embedded PostgreSQL: set the port with options.port, not settings.port');
  }
  return settings;
}

/** Refuses a requested port that is not a TCP port number; undefined means "pick a free one". */
export function checkPort(port: number | undefined): void {
  if (port !== undefined && !(Number.isInteger(port) && port > 0 && port < 65536)) {
    throw new Error(`embedded PostgreSQL: invalid port ${port}`);
  }
}

/** The `-o` argument of pg_ctl, which pg_ctl hands to /bin/sh: every word is single-quoted. */
export function serverFlags(settings: Readonly<Record<string, string>>): string {
  return Object.entries(settings)
    .flatMap(([name, value]) => ['-c', `${name}=${value}`])
    .map((word) => `'${word.replace(/'/g, `'\\''`)}'`)
    .join(' ');
}
