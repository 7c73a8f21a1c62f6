// Test alias of the kubelet-style atomic writer (src/kube, used by the dev projector).
export { kubeletWrite } from '../../../src/kube/kubelet-writer.ts';
