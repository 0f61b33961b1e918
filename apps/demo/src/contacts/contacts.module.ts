import { Module } from '@nestjs/common';
import { ContactsController } from './contacts.controller';
import { ContactsService } from './contacts.service';
import { ContactTimelineConsumer, CrmAuditConsumer, WelcomeEmailConsumer } from './contact-consumers';

/** Contacts and the consumers of their events. */
@Module({
  controllers: [ContactsController],
  providers: [ContactsService, WelcomeEmailConsumer, ContactTimelineConsumer, CrmAuditConsumer],
})
export class ContactsModule {}
