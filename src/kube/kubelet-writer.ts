// kubelet's atomic volume layout, for the projector and the tests; the writer lives in contract/ because the SDK's
// delivery stream client writes the same layout.
export { kubeletWrite } from '../contract/atomic-dir.ts';
