// Waits until the projected routing config holds an account's compiled credentials, as a gateway would load it;
// and stops such a stack.
import { rmSync } from 'node:fs';
import type { RunningGateway } from '../../src/gateway/index.ts';
import type { Projector } from '../../src/kube/projector.ts';
import { loadRoutingConfig } from '../../src/sdk/index.ts';
import { type CapturedOperator } from './operator.ts';
import { until } from './until.ts';
import type { Upstreams } from './upstreams.ts';

export async function untilCompiled(
  projector: Projector,
  configDir: string,
  ns: string,
  credentials: number,
): Promise<void> {
  await until(
    `a compiled config with ${credentials} credentials`,
    async () => {
      await projector.sync();
      try {
        return loadRoutingConfig(configDir).accounts.get(ns)?.credentials.length === credentials;
      } catch {
        return false;
      }
    },
    30_000,
    200,
  );
}

/** Stops what a gateway test started (whatever of it did start), the gateway first, and removes its directory. */
export async function stopStack(
  started: { gw?: RunningGateway; projector?: Projector; run?: CapturedOperator; up?: Upstreams },
  root: string,
): Promise<void> {
  await started.gw?.close();
  await started.projector?.stop();
  await started.run?.op.stop();
  await started.up?.close();
  rmSync(root, { recursive: true, force: true });
}
