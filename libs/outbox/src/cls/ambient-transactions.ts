import { Inject, Injectable } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import type { EntityManager } from 'typeorm';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import { OutboxError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import type { OutboxConsumer } from '../model/outbox-consumer';
import { OutboxStore } from '../store/outbox.store';

type Handle = NonNullable<OutboxConsumer['handle']>;

/**
 * What the outbox uses of `@nestjs-cls/transactional`'s `TransactionHost` (typed here, so that the package's
 * declarations never name the optional peer). `setTxInstance` is the method the host itself calls inside
 * `withTransaction`; TypeScript-private there, so its presence is checked at boot (ADR 0303).
 */
interface TransactionHostLike {
  readonly tx: unknown;
  isTransactionActive(): boolean;
  setTxInstance(tx: unknown): void;
}

/** What the outbox uses of nestjs-cls's `ClsService`. */
interface ClsServiceLike {
  run<T>(options: { ifNested: 'inherit' }, callback: () => T): T;
}

/**
 * The ambient transactions of `@nestjs-cls/transactional` (TypeORM adapter), when the `transactionHost` option
 * asks for them: `enqueue` without a manager writes through `TransactionHost.tx`, and a handler runs with its
 * delivery transaction as the host's `tx`. The peer packages are loaded only then, at boot (`problems`).
 */
@Injectable()
export class AmbientTransactions {
  private host: TransactionHostLike | null = null;
  private cls: ClsServiceLike | null = null;

  constructor(
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
    private readonly moduleRef: ModuleRef,
    private readonly store: OutboxStore,
  ) {}

  /** The connection name of the TransactionHost to join, or null when the option is off. */
  private get connection(): { name: string | undefined } | null {
    const option = this.options.transactionHost;
    if (option === false || option === undefined || option === null) return null;
    return { name: option === true ? undefined : option.connectionName };
  }

  /**
   * Loads the peers and finds the TransactionHost, when the option is on; says what is missing otherwise.
   * Called once, at boot, with the other wiring checks.
   */
  problems(): string[] {
    const connection = this.connection;
    if (connection === null) return [];
    const label =
      connection.name === undefined
        ? 'the default TransactionHost'
        : `the TransactionHost "${connection.name}"`;
    let transactional: { getTransactionHostToken(name?: string): unknown };
    let clsModule: { ClsService: unknown };
    try {
      // Loaded here and only here: an app that leaves the option off never loads the optional peers.
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- an optional peer, loaded when configured
      transactional = require('@nestjs-cls/transactional') as typeof transactional;
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- an optional peer, loaded when configured
      clsModule = require('nestjs-cls') as typeof clsModule;
    } catch (error) {
      return [messages.clsMissing(String((error as Error).message).split('\n')[0]!)];
    }
    let host: Partial<TransactionHostLike>;
    try {
      host = this.moduleRef.get(transactional.getTransactionHostToken(connection.name) as never, {
        strict: false,
      });
      this.cls = this.moduleRef.get(clsModule.ClsService as never, { strict: false });
    } catch {
      return [messages.clsNoHost(label, connection.name)];
    }
    if (typeof host.setTxInstance !== 'function' || typeof host.isTransactionActive !== 'function')
      return [messages.clsUnsupported(label)];
    // Outside a transaction the host's tx is its adapter's fallback: the manager of the DataSource it wraps.
    let dataSource: unknown;
    try {
      dataSource = this.store.dataSource();
    } catch {
      return []; // reported by the explorer's own DataSource check
    }
    if ((host.tx as EntityManager | undefined)?.connection !== dataSource)
      return [messages.clsOtherDataSource(label, this.options.dataSource)];
    this.host = host as TransactionHostLike;
    return [];
  }

  /**
   * The manager of the ambient transaction, for `enqueue` without one: refuses when the option is off, and,
   * like a manager outside a transaction, when none is active.
   */
  manager(): EntityManager {
    if (this.connection === null) throw new OutboxError(messages.noManager());
    if (!this.host) throw new OutboxError(messages.clsNotReady());
    if (!this.host.isTransactionActive()) throw new OutboxError(messages.noTransaction());
    return this.host.tx as EntityManager;
  }

  /**
   * Wraps a handler so that it runs in a CLS context of its own whose TransactionHost `tx` is `context.manager`:
   * what the code it calls writes through the host commits with the delivery, once, or rolls back with it.
   * Without the option, the handler itself.
   */
  bound(handle: Handle): Handle {
    if (this.connection === null) return handle;
    return (event, context) => {
      const host = this.host;
      const cls = this.cls;
      if (!host || !cls) return handle(event, context);
      return cls.run({ ifNested: 'inherit' }, () => {
        host.setTxInstance(context.manager);
        return handle(event, context);
      });
    };
  }
}
