import { Module } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { OutboxModule, outboxMigrations } from 'nestjs-pg-outbox';
import { ContactActivity } from './contacts/contact-activity.entity.js';
import { Contact } from './contacts/contact.entity.js';
import { ContactsModule } from './contacts/contacts.module.js';

@Module({
  imports: [
    ScheduleModule.forRoot(),
    TypeOrmModule.forRoot({
      type: 'postgres',
      url: process.env.DATABASE_URL,
      entities: [Contact, ContactActivity],
      // MIGRATE=sql: the schema was made beforehand from `npx nestjs-pg-outbox sql`.
      migrations: process.env.MIGRATE === 'classes' ? [...outboxMigrations] : [],
      migrationsRun: process.env.MIGRATE === 'classes',
    }),
    OutboxModule.forRoot({ relay: { pollIntervalMs: 100 } }),
    ContactsModule,
  ],
})
export class AppModule {}
