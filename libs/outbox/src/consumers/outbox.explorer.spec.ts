import { Injectable, Logger, type Type } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, ModuleRef, Reflector } from '@nestjs/core';
import { OnOutboxEvent } from './on-outbox-event.decorator';
import { OutboxConfigurationError } from '../errors/outbox.error';
import { resolveOutboxOptions } from '../options/outbox-options';
import type { OutboxConsumer } from '../model/outbox-consumer';
import { OutboxConsumerRegistry } from './outbox-consumer.registry';
import { OutboxExtension } from '../extension/outbox-extension';
import type { OutboxSchemaRegistry } from '../events/outbox-schema.registry';
import type { AmbientTransactions } from '../cls/ambient-transactions';
import type { OutboxStore } from '../store/outbox.store';
import { OutboxExplorer } from './outbox.explorer';

@Injectable()
class WelcomeEmail {
  @OnOutboxEvent('crm.contact.created.v1')
  async send(): Promise<void> {}
}

/** An extension whose consumers come at once, and which may find a problem in its options. */
@Injectable()
@OutboxExtension()
class HooksExtension implements OutboxExtension {
  readonly source = 'the hooks option';
  constructor(
    private readonly names: string[],
    private readonly problem?: string,
  ) {}
  consumers(problems: string[]): OutboxConsumer[] {
    if (this.problem) problems.push(this.problem);
    return this.names.map((name) => external(name, HooksExtension));
  }
}

/** An extension whose consumers are made asynchronously (a transport created with its dependencies). */
@Injectable()
@OutboxExtension()
class QueuesExtension implements OutboxExtension {
  readonly source = 'the queues option';
  constructor(private readonly names: string[]) {}
  async consumers(): Promise<OutboxConsumer[]> {
    return this.names.map((name) => external(name, QueuesExtension));
  }
}

describe('OutboxExplorer with extensions', () => {
  // one line per consumer at boot: not wanted in the spec's output
  beforeAll(() => Logger.overrideLogger(false));

  it('loads the consumers of every extension after the @OnOutboxEvent ones, in discovery order', async () => {
    const { explorer, registry } = explorerOf([
      new QueuesExtension(['queue:orders', 'queue:mail']),
      new WelcomeEmail(),
      { notAnExtension: true },
      new HooksExtension(['hook:crm']),
    ]);
    await explorer.onModuleInit();
    expect(registry.names()).toEqual(['WelcomeEmail.send', 'queue:orders', 'queue:mail', 'hook:crm']);
    expect(registry.get('queue:mail')?.hostClass).toBe(QueuesExtension);
  });

  it("fails boot once, with every extension's problems and a consumer named as another source's", async () => {
    const { explorer } = explorerOf([
      new WelcomeEmail(),
      new HooksExtension(['WelcomeEmail.send', 'hook:a'], 'hooks[1] has no url'),
      new QueuesExtension(['hook:a']),
    ]);
    const error = await explorer.onModuleInit().then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(OutboxConfigurationError);
    const { problems } = error as OutboxConfigurationError;
    expect(problems).toHaveLength(3);
    expect(problems[0]).toBe('hooks[1] has no url');
    expect(problems[1]).toContain('"WelcomeEmail.send" (WelcomeEmail#send, the hooks option)');
    expect(problems[2]).toContain('"hook:a" (the hooks option, the queues option)');
  });

  it('refuses a request-scoped extension', async () => {
    const { explorer } = explorerOf([new QueuesExtension(['queue:orders'])], { static: false });
    await expect(explorer.onModuleInit()).rejects.toThrow(/QueuesExtension is request-scoped/);
  });
});

function external(name: string, hostClass: Type): OutboxConsumer {
  return {
    name,
    kind: 'transport',
    eventName: '*',
    eventNames: ['*'],
    hostClass,
    methodName: 'send',
    maxAttempts: 5,
    timeoutMs: 1000,
    backoff: resolveOutboxOptions().options.backoff,
    deliverBatch: async (deliveries) => deliveries.map(() => ({ status: 'delivered' as const })),
  };
}

/** An explorer over these provider instances, with the relay off (no scheduler needed) and no schema or CLS. */
function explorerOf(instances: object[], scope = { static: true }) {
  const wrappers = instances.map((instance) => ({
    instance,
    metatype: instance.constructor,
    isTransient: false,
    isDependencyTreeStatic: () => scope.static,
  }));
  const discovery = { getProviders: () => wrappers, getControllers: () => [] } as unknown as DiscoveryService;
  const registry = new OutboxConsumerRegistry();
  const store = { dataSource: () => ({}) } as unknown as OutboxStore;
  const resolution = resolveOutboxOptions({ relay: { enabled: false } });
  const schemas = { problems: () => [], covers: () => false } as unknown as OutboxSchemaRegistry;
  const ambient = {
    problems: () => [],
    bound: (handle: unknown) => handle,
  } as unknown as AmbientTransactions;
  const explorer = new OutboxExplorer(
    discovery,
    new MetadataScanner(),
    new Reflector(),
    {} as ModuleRef,
    registry,
    store,
    resolution.options,
    resolution,
    schemas,
    ambient,
  );
  return { explorer, registry };
}
