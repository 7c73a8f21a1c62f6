// Test alias of the kubelet-style atomic writer (promoted to src/shared for the dev projector).
export { kubeletWrite } from '../../../src/shared/kubelet-writer.ts';
