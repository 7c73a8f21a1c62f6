// Process-wide hardening of the long-running server commands (run, operator, api, gateway, dev).

/**
 * Freezes Object.prototype and Array.prototype once a server process has loaded everything and is serving: a key a
 * tenant smuggles past the doors' checks (`__proto__`, `constructor.prototype`) can then change nothing shared by
 * every tenant (the checks themselves are in src/domain/json.ts and src/aggregated/patch.ts). Measured
 * with fastify, pino, prom-client, ajv, ioredis, yaml and the Kubernetes client; see docs/api.md. Set
 * BYOK_FREEZE_PROTOTYPES=0 to turn it off if a dependency ever needs to assign to a built-in prototype.
 */
export function hardenPrototypes(): void {
  if (process.env.BYOK_FREEZE_PROTOTYPES === '0') return;
  Object.freeze(Object.prototype);
  Object.freeze(Array.prototype);
}
