import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEventOf, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { ContactActivity } from './contact-activity.entity.js';

@Injectable()
export class ContactTimelineConsumer {
  @OnOutboxEvent('crm.contact.created.v1', { consumer: 'contact-timeline' })
  async record(event: OutboxEventOf<'crm.contact.created.v1'>, context: OutboxHandlerContext): Promise<void> {
    await context.manager.insert(ContactActivity, {
      eventId: event.eventId,
      contactId: event.data.contactId,
      summary: `created ${event.data.name}`,
    });
  }
}
