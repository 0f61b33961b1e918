/**
 * `npm test`'s first step (the `pretest` script; also before `test:e2e`, `test:faults` and `test:partitioned`):
 * provisions what the suite needs that `npm install` does not bring — Debian's chromium and pgbouncer, RabbitMQ and
 * NATS running — on Debian as root with apt-get, or fails at once naming each missing package and the command that
 * installs it.
 * With `--check` it only prints what it would do (exit 1 when anything is to be done).
 */
import { installPackages, probeMachine, startService } from './machine';
import { planSetUp, type SetUpPlan } from './test-requirements';

async function main(check: boolean): Promise<number> {
  const plan = planSetUp(await probeMachine());
  if (isEmpty(plan)) {
    console.log('test set-up: chromium, pgbouncer, RabbitMQ and NATS are here; nothing to do');
    return 0;
  }
  if (check) return report(plan, 'test set-up --check: to do');
  if (plan.problems.length > 0) return report(plan, 'test set-up: the test suite cannot run here:');
  if (plan.install.length > 0) {
    const lines = plan.install.map((r) => `${r.package} (${r.why})`);
    console.log(`test set-up: installing with apt-get: ${lines.join('; ')}`);
    installPackages(plan.install);
  }
  for (const service of plan.start) {
    console.log(
      `test set-up: ${service.name} is not running on ${service.host}:${service.port}; starting it`,
    );
    await startService(service);
  }
  // what the set-up did must leave nothing to do: say what is still missing rather than let specs fail on it
  const left = planSetUp(await probeMachine());
  return isEmpty(left) ? 0 : report(left, 'test set-up: still missing after the set-up:');
}

function isEmpty(plan: SetUpPlan): boolean {
  return plan.install.length + plan.start.length + plan.problems.length === 0;
}

function report(plan: SetUpPlan, heading: string): number {
  const lines = [
    ...plan.install.map((r) => `install ${r.package} with apt-get (${r.why})`),
    ...plan.start.map(
      (s) => `start ${s.name} on ${s.host}:${s.port}: ${s.start.map((c) => c.join(' ')).join(' && ')}`,
    ),
    ...plan.problems,
  ];
  console.error([heading, ...lines.map((line) => ` - ${line}`)].join('\n'));
  if (plan.problems.length > 0) console.error('(the unit specs alone need none of this: npm run test:unit)');
  return 1;
}

main(process.argv.includes('--check')).then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(`test set-up: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  },
);
