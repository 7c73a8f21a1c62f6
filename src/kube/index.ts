// The Kubernetes edge shared by the operator and the REST API server.
export * from './client.ts';
export * from './informer.ts';
export * from './apply.ts';
export * from './events.ts';
export * from './resources.ts';
