// Holds the control plane between Jest's globalSetup and globalTeardown (both run in the parent process).
import type { ControlPlane } from '../../src/controlplane/control-plane.ts';

const key = Symbol.for('byok-operator.test.control-plane');
type Holder = { [key]?: ControlPlane };

export function setControlPlane(cp: ControlPlane): void {
  (globalThis as Holder)[key] = cp;
}

export function takeControlPlane(): ControlPlane | undefined {
  const cp = (globalThis as Holder)[key];
  delete (globalThis as Holder)[key];
  return cp;
}
