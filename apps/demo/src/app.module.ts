import { Module, type DynamicModule } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { OutboxModule, outboxMigrations } from '@app/outbox';
import { ContactsModule } from './contacts/contacts.module';
import { Contact } from './contacts/contact.entity';
import { ContactActivity } from './contacts/contact-activity.entity';
import { DemoContacts1764428500000 } from './migrations/1764428500000-demo-contacts';

/** The demo CRM: contacts, their events, and the outbox that delivers them. */
@Module({})
export class AppModule {
  static forRoot(databaseUrl: string): DynamicModule {
    return {
      module: AppModule,
      imports: [
        ScheduleModule.forRoot(),
        TypeOrmModule.forRoot({
          type: 'postgres',
          url: databaseUrl,
          entities: [Contact, ContactActivity],
          migrations: [...outboxMigrations, DemoContacts1764428500000],
          migrationsRun: true,
        }),
        OutboxModule.forRoot({ relay: { pollIntervalMs: 500 } }),
        ContactsModule,
      ],
    };
  }
}
