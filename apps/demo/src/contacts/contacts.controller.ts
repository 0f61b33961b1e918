import { Body, Controller, Get, Headers, Param, ParseUUIDPipe, Post } from '@nestjs/common';
import { Contact } from './contact.entity';
import { ContactActivity } from './contact-activity.entity';
import { ContactsService } from './contacts.service';
import { DEMO_TENANT_ID } from '../demo.constants';

/** The demo's HTTP API. The tenant comes from `x-tenant-id` (default: the demo tenant). */
@Controller('contacts')
export class ContactsController {
  constructor(private readonly contacts: ContactsService) {}

  @Post()
  create(
    @Headers('x-tenant-id') tenant: string | undefined,
    @Body() body: { name?: unknown; email?: unknown },
  ): Promise<Contact> {
    return this.contacts.create(tenant ?? DEMO_TENANT_ID, body ?? {});
  }

  @Get()
  list(@Headers('x-tenant-id') tenant: string | undefined): Promise<Contact[]> {
    return this.contacts.list(tenant ?? DEMO_TENANT_ID);
  }

  @Get(':id/activities')
  activities(
    @Headers('x-tenant-id') tenant: string | undefined,
    @Param('id', ParseUUIDPipe) id: string,
  ): Promise<ContactActivity[]> {
    return this.contacts.activities(tenant ?? DEMO_TENANT_ID, id);
  }
}
