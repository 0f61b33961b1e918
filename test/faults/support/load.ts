import { buildApp } from '../../support/build-app';

export const FAULT_TENANTS = [
  'a0000000-0000-4000-8000-00000000000a',
  'b0000000-0000-4000-8000-00000000000b',
  'c0000000-0000-4000-8000-00000000000c',
];

/** Enqueues `count` `fault.load.v1` events through the library (relay off), spread over three tenants; returns their ids. */
export async function enqueueLoad(url: string, count: number): Promise<string[]> {
  const producer = await buildApp({ url, outbox: { relay: { enabled: false, wakeUps: 'off' } } });
  try {
    const ids: string[] = [];
    for (let i = 0; i < count; i += 1000) {
      const chunk = Array.from({ length: Math.min(1000, count - i) }, (_, j) => ({
        tenantId: FAULT_TENANTS[(i + j) % FAULT_TENANTS.length]!,
        eventName: 'fault.load.v1',
        aggregateType: 'load',
        aggregateId: String(i + j),
        payload: { n: i + j },
      }));
      ids.push(...(await producer.dataSource.transaction((m) => producer.outbox.enqueueMany(m, chunk))));
    }
    return ids;
  } finally {
    await producer.close();
  }
}
