/**
 * A round-trip probe outside the relay's process (bench/decisions/fairness-delay.ts): `select 1` on its own
 * connection every GAP_MS for `seconds`, then sends each round trip's ms to its parent and exits. Beside the same
 * probe inside the relay's process, it tells the relay's event loop from the server and the machine.
 * Runs as: select-probe.ts <url> <seconds> (forked from a script under `-r @swc-node/register`).
 */
import { Client } from 'pg';

/** The gap between two probes, ms. */
const GAP_MS = 5;

async function main(): Promise<void> {
  const [url, seconds] = process.argv.slice(2);
  if (!url || !(Number(seconds) > 0))
    throw new Error('select-probe runs as: select-probe.ts <url> <seconds>');
  const client = new Client({ connectionString: url });
  await client.connect();
  const ms: number[] = [];
  try {
    for (const end = performance.now() + Number(seconds) * 1000; performance.now() < end;) {
      const began = performance.now();
      await client.query('select 1');
      ms.push(performance.now() - began);
      await new Promise((resolve) => setTimeout(resolve, GAP_MS));
    }
  } finally {
    await client.end();
  }
  process.send!(ms, () => process.exit(0));
}

void main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
