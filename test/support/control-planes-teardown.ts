import { takeControlPlanes } from './control-plane-handle.ts';

export default async function stopControlPlanes(): Promise<void> {
  await Promise.all(takeControlPlanes().map((plane) => plane.stop()));
}
