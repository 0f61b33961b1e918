import { BadRequestException, Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { OutboxService } from 'nestjs-pg-outbox';
import { Contact } from './contact.entity';
import { ContactActivity } from './contact-activity.entity';
import './contact-events';

/** Contacts, written together with their `crm.contact.created.v1` event. */
@Injectable()
export class ContactsService {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly outbox: OutboxService,
  ) {}

  /** Creates a contact and its event in one transaction: both commit, or neither. */
  async create(tenantId: string, input: { name?: unknown; email?: unknown }): Promise<Contact> {
    if (typeof input.name !== 'string' || input.name.trim() === '')
      throw new BadRequestException('name must be a non-empty string');
    if (typeof input.email !== 'string' || !input.email.includes('@'))
      throw new BadRequestException('email must be an email address');
    const { name, email } = input;
    return this.dataSource.transaction(async (manager) => {
      const contact = await manager.save(manager.create(Contact, { tenantId, name, email }));
      await this.outbox.enqueue(manager, {
        tenantId,
        eventName: 'crm.contact.created.v1',
        aggregateType: 'contact',
        aggregateId: contact.id,
        payload: { contactId: contact.id, name, email },
      });
      return contact;
    });
  }

  /** The tenant's contacts, newest first. */
  list(tenantId: string): Promise<Contact[]> {
    return this.dataSource
      .getRepository(Contact)
      .find({ where: { tenantId }, order: { createdAt: 'DESC' }, take: 100 });
  }

  /** A contact's timeline, as written by the consumers. */
  activities(tenantId: string, contactId: string): Promise<ContactActivity[]> {
    return this.dataSource
      .getRepository(ContactActivity)
      .find({ where: { tenantId, contactId }, order: { id: 'ASC' } });
  }
}
