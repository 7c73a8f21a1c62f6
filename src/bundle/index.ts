export * from './envelope.ts';
export * from './bundle.ts';
