// agentgateway's standalone config file (schema/config.json upstream): one account per file. Every attempt is an
// internal concrete model (`llm.models[]`, its key read from a file the platform mounts), and every model the
// account routes is a public virtual model whose failover targets are those attempts in order.

import type { AccountAttempts } from './attempt-order.ts';
import { credentialSecret, objectName, sharedSecretName, shortHash } from './names.ts';
import type { DerivedSecret, ExportOptions, ResolvedAttempt, UpstreamTarget } from './types.ts';

/** Where the standalone proxy finds each derived Secret: mounted as a folder per Secret, one file per key. */
export const SECRET_MOUNT = '/var/run/byok-secrets';

export interface StandaloneBuild {
  config: { llm: { models: Record<string, unknown>[]; virtualModels: Record<string, unknown>[] } };
  secrets: DerivedSecret[];
  /** Semantics only the standalone form loses, one line each. */
  notes: string[];
}

const file = (secretName: string, key: string) => ({ file: `${SECRET_MOUNT}/${secretName}/${key}` });

/** The provider, params and auth of one concrete model, and the keys its Secret holds. */
function concrete(
  target: UpstreamTarget,
  secretName: string,
): { provider: string; params: Record<string, unknown>; auth?: Record<string, unknown>; keys: string[] } {
  const baseUrl = `https://${target.host}${target.basePath}`;
  switch (target.api) {
    case 'openai':
      return {
        provider: 'openai',
        params: { model: target.model, apiKey: file(secretName, 'apiKey'), baseUrl },
        keys: ['apiKey'],
      };
    case 'anthropic':
      return {
        provider: 'anthropic',
        params: { model: target.model, apiKey: file(secretName, 'apiKey'), baseUrl },
        keys: ['apiKey'],
      };
    case 'azure-resource':
      return target.azure?.resourceName
        ? {
            provider: 'azure',
            params: {
              model: target.model,
              apiKey: file(secretName, 'apiKey'),
              azureResourceName: target.azure.resourceName,
              azureResourceType: target.azure.resourceType === 'ai_foundry' ? 'foundry' : 'openAI',
            },
            keys: ['apiKey'],
          }
        : {
            provider: 'azure',
            params: { model: target.model, apiKey: file(secretName, 'apiKey'), baseUrl },
            keys: ['apiKey'],
          };
    case 'azure-deployment':
      return {
        provider: 'azure',
        params: {
          model: target.model,
          apiKey: file(secretName, 'apiKey'),
          baseUrl,
          ...(target.azure?.apiVersion ? { azureApiVersion: target.azure.apiVersion } : {}),
        },
        keys: ['apiKey'],
      };
    case 'bedrock':
      return target.auth === 'bedrock-api-key'
        ? {
            provider: 'bedrock',
            params: { model: target.model, awsRegion: target.region, apiKey: file(secretName, 'apiKey') },
            keys: ['apiKey'],
          }
        : // The file can hold only inline AWS keys: the ambient AWS chain of the proxy signs instead.
          {
            provider: 'bedrock',
            params: { model: target.model, awsRegion: target.region },
            auth: { aws: { region: target.region } },
            keys: [],
          };
    case 'vertex':
      return {
        provider: 'vertex',
        params: { model: target.model, vertexProject: target.projectId, vertexRegion: target.region },
        auth: { gcp: { credential: file(secretName, 'credentials.json') } },
        keys: ['credentials.json'],
      };
  }
}

export function buildStandalone(plan: AccountAttempts, options: ExportOptions): StandaloneBuild {
  const ns = plan.account.namespace;
  const models = new Map<string, Record<string, unknown>>();
  const secrets = new Map<string, DerivedSecret>();
  const notes: string[] = [];
  const concreteName = (a: ResolvedAttempt, model: string): string => {
    const cred = a.credentialId === null ? undefined : plan.account.credentials.find((c) => c.id === a.credentialId);
    const owned = cred ? credentialSecret(options.target, ns, cred.name, a.target.credentialPart) : undefined;
    const secretName = owned ? owned.name : sharedSecretName(options.target, a.provider);
    const name = `${cred ? cred.name : `shared-${a.provider}`}--${objectName(model)}${a.target.credentialPart ? `--${shortHash(a.target.credentialPart, 4)}` : ''}`;
    if (models.has(name)) return name;
    const c = concrete(a.target, secretName);
    if (c.keys.length > 0 && !secrets.has(secretName))
      secrets.set(
        secretName,
        owned ? { keys: c.keys, ...owned } : { name: secretName, keys: c.keys, source: `shared:${a.provider}` },
      );
    if (c.keys.length === 0)
      notes.push(
        `${cred ? `${ns}/${cred.name}` : `shared ${a.provider}`}: AWS access keys cannot be read from a file in the standalone config; the proxy's ambient AWS credentials sign instead`,
      );
    models.set(name, {
      name,
      visibility: 'internal',
      provider: c.provider,
      params: c.params,
      ...(c.auth ? { auth: c.auth } : {}),
    });
    return name;
  };
  const virtualModels = plan.models.map((m) => ({
    name: m.model,
    routing: {
      failover: { targets: m.attempts.map((a, priority) => ({ model: concreteName(a, m.model), priority })) },
    },
  }));
  return {
    config: { llm: { models: [...models.values()], virtualModels } },
    secrets: [...secrets.values()],
    notes: [...new Set(notes)],
  };
}
