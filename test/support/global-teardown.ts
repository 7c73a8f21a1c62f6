import { takeControlPlane } from './control-plane-handle.ts';

export default async function globalTeardown(): Promise<void> {
  await takeControlPlane()?.stop();
}
