import { Module } from '@nestjs/common';
import { ContactTimelineConsumer } from './contact-timeline.consumer.js';
import { ContactsService } from './contacts.service.js';

@Module({ providers: [ContactsService, ContactTimelineConsumer], exports: [ContactsService] })
export class ContactsModule {}
