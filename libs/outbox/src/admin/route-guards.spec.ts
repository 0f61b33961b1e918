import type { CanActivate, ExecutionContext } from '@nestjs/common';
import { guardProblems, routeGuards } from './route-guards';

class AuthGuard implements CanActivate {
  canActivate(): boolean {
    return true;
  }
}

const refuses = (guards: (CanActivate | (new () => CanActivate))[]): boolean =>
  guards.length === 1 &&
  typeof guards[0] === 'object' &&
  guards[0].canActivate({} as ExecutionContext) === false;

describe('route guards', () => {
  it('puts the given guards on the routes, or none when unguarded routes are allowed', () => {
    expect(routeGuards({ guards: [AuthGuard] })).toEqual([AuthGuard]);
    expect(routeGuards({ allowUnguarded: true })).toEqual([]);
    expect(routeGuards({ guards: [], allowUnguarded: true })).toEqual([]);
  });

  it('puts a guard that refuses every request on routes whose guards option is wrong or missing', () => {
    for (const guards of [AuthGuard, null, 'AuthGuard', {}, [{}], [AuthGuard, undefined]])
      for (const allowUnguarded of [undefined, true])
        expect(refuses(routeGuards({ guards: guards as never, allowUnguarded }))).toBe(true);
    expect(refuses(routeGuards({}))).toBe(true);
  });

  it("reports a wrong option under the module's name, and a missing one in the module's own words", () => {
    expect(guardProblems('SomeModule', { guards: AuthGuard as never }, () => 'none')).toEqual([
      expect.stringMatching(/^SomeModule\.forRoot\(\) option guards .* got the class AuthGuard on its own/),
    ]);
    expect(guardProblems('SomeModule', {}, () => 'none')).toEqual(['none']);
    expect(guardProblems('SomeModule', { guards: [new AuthGuard()] }, () => 'none')).toEqual([]);
  });
});
