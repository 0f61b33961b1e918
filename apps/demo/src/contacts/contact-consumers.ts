import { Injectable, Logger } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEventOf, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { ContactActivity } from './contact-activity.entity';
import './contact-events';

/** Sends the welcome email (here: logs it; a real app calls its mail provider). */
@Injectable()
export class WelcomeEmailConsumer {
  private readonly logger = new Logger(WelcomeEmailConsumer.name);

  @OnOutboxEvent('crm.contact.created.v1', { consumer: 'welcome-email' })
  send(event: OutboxEventOf<'crm.contact.created.v1'>, context: OutboxHandlerContext): void {
    this.logger.log(
      `welcome email to ${event.data.email} (event ${event.eventId}, attempt ${context.attempt})`,
    );
  }
}

/** Writes the contact's timeline through the delivery's transaction: exactly one row per event. */
@Injectable()
export class ContactTimelineConsumer {
  private readonly logger = new Logger(ContactTimelineConsumer.name);

  @OnOutboxEvent('crm.contact.created.v1', { consumer: 'contact-timeline' })
  async record(event: OutboxEventOf<'crm.contact.created.v1'>, context: OutboxHandlerContext): Promise<void> {
    await context.manager.save(
      context.manager.create(ContactActivity, {
        tenantId: event.tenantId,
        contactId: event.data.contactId,
        eventId: event.eventId,
        summary: `Contact ${event.data.name} created`,
      }),
    );
    this.logger.log(`timeline row for contact ${event.data.contactId} (event ${event.eventId})`);
  }
}

/** Counts every CRM event (a catch-all consumer of `crm.*`). */
@Injectable()
export class CrmAuditConsumer {
  private readonly logger = new Logger(CrmAuditConsumer.name);

  @OnOutboxEvent('crm.*', { consumer: 'crm-audit' })
  audit(event: OutboxEventOf<'crm.*'>): void {
    this.logger.log(`${event.eventName} ${event.eventId} for tenant ${event.tenantId}`);
  }
}
