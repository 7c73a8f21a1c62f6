// Waits until the projected routing config holds an account's compiled credentials, as a gateway would load it.
import type { Projector } from '../../../src/kube/projector.ts';
import { loadRoutingConfig } from '../../../src/sdk/index.ts';
import { until } from '../operator/helpers.ts';

export async function untilCompiled(projector: Projector, configDir: string, ns: string, credentials: number): Promise<void> {
  await until(`a compiled config with ${credentials} credentials`, async () => {
    await projector.sync();
    try {
      return loadRoutingConfig(configDir).accounts.get(ns)?.credentials.length === credentials;
    } catch {
      return false;
    }
  }, 30_000, 200);
}
