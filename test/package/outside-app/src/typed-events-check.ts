import type { OutboxEventOf } from 'nestjs-pg-outbox';
import type { ContactsService } from './contacts/contacts.service.js';

// Compiles only while the app's declaration merging reaches the package's OutboxEventMap: without it the data
// would be `unknown`, this assignment would be fine, and tsc would report the directive as unused.
// @ts-expect-error the map says name is a string
export const wrong: OutboxEventOf<'crm.contact.created.v1'>['data'] = { contactId: 'c1', name: 1 };
export type Service = ContactsService;
