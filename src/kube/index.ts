// The Kubernetes edge shared by the operator and the REST API server.

export * from './apply.ts';
export * from './client.ts';
export * from './events.ts';
export * from './informer.ts';
export * from './resources.ts';
