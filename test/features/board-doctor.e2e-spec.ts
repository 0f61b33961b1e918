import { OutboxBoardModule } from 'nestjs-pg-outbox/board';
import { OperatorGuard, tenantsOf } from '../support/board-operators';
import { buildHttpApp, type HttpTestApp } from '../support/http-app';
import { TENANTS } from '../support/outbox-fixture';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

const [TENANT_A] = TENANTS;

const rank = (severity: string | undefined) => ['ok', 'warn', 'critical'].indexOf(severity ?? '');

let db: TestDatabase;
let http: HttpTestApp;

beforeAll(async () => {
  db = await createTestDatabase();
  http = await buildHttpApp({
    url: db.url,
    outbox: { tenancy: 'multi' },
    providers: [OperatorGuard],
    imports: [OutboxBoardModule.forRoot({ guards: [OperatorGuard], tenants: tenantsOf })],
  });
});

afterAll(async () => {
  await http?.close();
  await db?.drop();
});

describe("the doctor's findings on the board (HTML over HTTP)", () => {
  const page = () => `${http.baseUrl}/outbox/board/t/${TENANT_A}/doctor`;

  it('lists them worst first with what to do, to an operator of every tenant only', async () => {
    await db.sql(`drop index outbox_audit_tenant_idx`);
    try {
      const root = await fetch(page(), { headers: { 'x-operator': 'root' } });
      expect(root.status).toBe(200);
      const body = await root.text();
      expect(body).toMatch(/<h1>\s*Database\s*<\/h1>/);
      expect(body).toMatch(/<a href="[^"]*\/doctor"\s+aria-current="page"\s*>Database<\/a/);
      const rows = [...body.matchAll(/<tr data-severity="(\w+)" data-check="([\w-]+)">/g)].map((m) => m[1]);
      expect(rows.length).toBeGreaterThan(5);
      expect(rows[0]).toBe('critical');
      expect(rows).toEqual([...rows].sort((a, b) => rank(b) - rank(a)));
      expect(body).toContain('Index public.outbox_audit_tenant_idx on public.outbox_audit is missing');
      expect(body).toContain(
        'Recreate it: create index concurrently if not exists outbox_audit_tenant_idx on public.outbox_audit using btree (tenant_id, id);',
      );

      // alice sees tenant A only, and the checks count every tenant's rows
      const alice = await fetch(page(), { headers: { 'x-operator': 'alice' } });
      expect(alice.status).toBe(200);
      const hidden = await alice.text();
      expect(hidden).toContain('only an operator who may see all tenants sees them');
      expect(hidden).not.toContain('data-testid="doctor"');
    } finally {
      await db.sql(`create index outbox_audit_tenant_idx on outbox_audit using btree (tenant_id, id)`);
    }
    const healed = await (await fetch(page(), { headers: { 'x-operator': 'root' } })).text();
    expect(healed).toContain('data-testid="doctor"');
    expect(healed).not.toContain('outbox_audit_tenant_idx');
    expect(healed).not.toContain('data-severity="critical"');
  });

  it('refuses an operator the guard refuses', async () => {
    expect((await fetch(page())).status).toBe(403);
  });

  it('refuses wrong thresholds at boot, naming the option and the threshold', async () => {
    await expect(
      buildHttpApp({
        url: db.url,
        providers: [OperatorGuard],
        imports: [
          OutboxBoardModule.forRoot({
            guards: [OperatorGuard],
            tenants: tenantsOf,
            doctor: { pendingSeconds: [600, 60] },
          }),
        ],
      }),
    ).rejects.toMatchObject({
      name: 'OutboxConfigurationError',
      message: expect.stringContaining(
        'option OutboxBoardModule doctor: threshold pendingSeconds must be [warn, critical]',
      ),
    });
  });
});
