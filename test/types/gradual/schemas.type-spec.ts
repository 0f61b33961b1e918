import type { StandardSchemaV1 as PublishedSpec } from '@standard-schema/spec';
import { expectTypeOf } from 'expect-type';
import type { EntityManager } from 'typeorm';
import * as v from 'valibot';
import { z } from 'zod';
import {
  defineOutboxEvents,
  OutboxModule,
  type OutboxService,
  type OutboxEventMapOf,
  type OutboxEventOf,
  type StandardSchemaV1,
} from 'nestjs-pg-outbox';

// The map inferred from schemas, written once: zod for one name, valibot per version for another.
export const schemaEvents = defineOutboxEvents({
  'sales.lead.created.v1': z.object({ leadId: z.string(), score: z.number().int() }),
  'sales.lead.merged': {
    1: v.object({ leadId: v.string(), into: v.string() }),
    2: v.object({ leadId: v.string(), into: v.array(v.string()) }),
  },
});

declare module 'nestjs-pg-outbox' {
  interface OutboxEventMap extends OutboxEventMapOf<typeof schemaEvents> {}
}

OutboxModule.forRoot({ events: schemaEvents });

declare const outbox: OutboxService;
declare const manager: EntityManager;

// Compiled, never run: the promises `void`ed below are never made.

void outbox.enqueue(manager, { eventName: 'sales.lead.created.v1', payload: { leadId: 'l1', score: 3 } });
// @ts-expect-error the schema says score is a number
void outbox.enqueue(manager, { eventName: 'sales.lead.created.v1', payload: { leadId: 'l1', score: '3' } });
void outbox.enqueue(manager, {
  eventName: 'sales.lead.merged',
  schemaVersion: 2,
  payload: { leadId: 'l1', into: ['l2', 'l3'] },
});
expectTypeOf<OutboxEventOf<'sales.lead.created.v1'>['data']>().toEqualTypeOf<{
  leadId: string;
  score: number;
}>();
expectTypeOf<Extract<OutboxEventOf<'sales.lead.merged'>, { schemaVersion: 2 }>['data']>().toEqualTypeOf<{
  leadId: string;
  into: string[];
}>();

// The vendored interface and the published spec accept the same schemas, both ways.
expectTypeOf<StandardSchemaV1<string>>().toExtend<PublishedSpec<string>>();
expectTypeOf<PublishedSpec<string>>().toExtend<StandardSchemaV1<string>>();
expectTypeOf(z.string()).toExtend<StandardSchemaV1<string>>();
expectTypeOf(v.string()).toExtend<StandardSchemaV1<string>>();
