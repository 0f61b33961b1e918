import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { OutboxService } from 'nestjs-pg-outbox';
import { Contact } from './contact.entity.js';

export interface ContactCreated {
  contactId: string;
  name: string;
}

// The app's events, declared once: enqueue and @OnOutboxEvent check their payloads against these.
declare module 'nestjs-pg-outbox' {
  interface OutboxEventMap {
    'crm.contact.created.v1': ContactCreated;
  }
}

@Injectable()
export class ContactsService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly outbox: OutboxService,
  ) {}

  /** The contact and its event commit together, or neither does. */
  async create(tenantId: string, name: string, fail = false): Promise<string> {
    return this.dataSource.transaction(async (manager) => {
      const contact = await manager.save(manager.create(Contact, { tenantId, name }));
      const payload: ContactCreated = { contactId: contact.id, name };
      await this.outbox.enqueue(manager, {
        tenantId,
        eventName: 'crm.contact.created.v1',
        aggregateType: 'contact',
        aggregateId: contact.id,
        payload,
      });
      if (fail) throw new Error('rolled back on purpose');
      return contact.id;
    });
  }
}
