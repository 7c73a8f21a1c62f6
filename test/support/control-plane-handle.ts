// Holds the control planes between Jest's globalSetup and globalTeardown (both run in the parent process).
import type { ControlPlane } from '../../src/controlplane/control-plane.ts';

const key = Symbol.for('byok-operator.test.control-plane');
type Holder = { [key]?: ControlPlane[] };

export function setControlPlanes(planes: ControlPlane[]): void {
  (globalThis as Holder)[key] = planes;
}

export function takeControlPlanes(): ControlPlane[] {
  const planes = (globalThis as Holder)[key] ?? [];
  delete (globalThis as Holder)[key];
  return planes;
}
