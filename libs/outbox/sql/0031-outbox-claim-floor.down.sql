-- nestjs-pg-outbox migration 0031-outbox-claim-floor (down), recorded from the TypeORM class OutboxClaimFloor1764502700000. Do not edit.
drop function if exists public.outbox_claim_floor(interval);
