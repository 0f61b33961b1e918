-- nestjs-pg-outbox migration 0041-outbox-claim-floor-open-from (down), recorded from the TypeORM class OutboxClaimFloorOpenFrom1764504600000. Do not edit.
drop function if exists public.outbox_claim_floor(interval, uuid, xid8);

drop table if exists public.outbox_reopened;
