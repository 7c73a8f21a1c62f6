// Azure OpenAI and AI Foundry: a JSON array of resource configs (the gateway builds the URL from the resource name)
// and per-deployment configs (the tenant's own endpoint URL for one model slug), each with its api-key.
import { urlEgressProblem } from '../egress.ts';
import type { PayloadIssue } from '../errors.ts';
import type { PayloadShapeModule, ShapeInput } from './shape.ts';
import {
  compileSchema,
  fillTemplate,
  HTTPS,
  isObject,
  jsonDocument,
  NO_SPACE,
  runSchema,
  stringField,
} from './validation.ts';

export type AzureResourceType = 'ai_foundry' | 'openai';

export interface AzureResourceConfig {
  type: 'resource';
  api_key: string;
  resource_name: string;
  resource_type: AzureResourceType;
}

export interface AzureDeploymentConfig {
  type: 'deployment';
  api_key: string;
  model_slug: string;
  endpoint_url: string;
  model_id: string;
}

export interface AzurePayload {
  kind: 'azure';
  /** Entries in the order given, each tagged with its type. */
  entries: (AzureResourceConfig | AzureDeploymentConfig)[];
}

/** An Azure entry without its api_key. */
export type AzureEntryFacts =
  | { type: 'resource'; resourceName: string; resourceType: AzureResourceType }
  | { type: 'deployment'; modelSlug: string; endpointUrl: string; modelId: string };

export type AzureFacts = { kind: 'azure'; entries: AzureEntryFacts[] };

const validateResource = compileSchema({
  type: 'object',
  required: ['api_key', 'resource_name'],
  additionalProperties: false,
  properties: {
    api_key: { type: 'string', minLength: 1, pattern: NO_SPACE },
    resource_name: { type: 'string', minLength: 1, pattern: '^[A-Za-z0-9]([A-Za-z0-9-]{0,62}[A-Za-z0-9])?$' },
    resource_type: { type: 'string', enum: ['ai_foundry', 'openai'] },
  },
});

const validateDeployment = compileSchema({
  type: 'object',
  required: ['api_key', 'model_slug', 'endpoint_url', 'model_id'],
  additionalProperties: false,
  properties: {
    api_key: { type: 'string', minLength: 1, pattern: NO_SPACE },
    model_slug: { type: 'string', minLength: 1, pattern: '^[^\\s/]+/\\S+$' },
    endpoint_url: { type: 'string', minLength: 1, format: 'uri', pattern: HTTPS },
    model_id: { type: 'string', minLength: 1, pattern: NO_SPACE },
  },
});

const RULES = {
  api_key: 'must not contain whitespace',
  resource_name: 'must be the Azure resource subdomain name (letters, digits and hyphens), not a URL',
  model_slug: 'must be a gateway model slug of the form <vendor>/<model>',
  endpoint_url: 'must be a full https URL',
  model_id: 'must be the deployment name, without whitespace',
};

const SHAPE_RULE = 'must be a JSON array of Azure resource configs and/or per-deployment configs';

function validateAzure({ text, looksJson, egress }: ShapeInput, errors: PayloadIssue[]): AzurePayload | null {
  const v = jsonDocument(text, looksJson, SHAPE_RULE, errors);
  if (v === undefined) return null;
  if (!Array.isArray(v)) {
    errors.push({ field: '', message: SHAPE_RULE });
    return null;
  }
  if (v.length === 0) {
    errors.push({ field: '', message: 'must contain at least one entry' });
    return null;
  }
  const entries: (AzureResourceConfig | AzureDeploymentConfig)[] = [];
  const slugs = new Map<string, number>();
  v.forEach((entry: unknown, i) => {
    const at = `[${i}]`;
    if (!isObject(entry)) {
      errors.push({ field: at, message: 'must be an object' });
      return;
    }
    // An entry naming any per-deployment field is a per-deployment config, so its errors talk about those fields.
    const isDeployment = 'model_slug' in entry || 'endpoint_url' in entry || 'model_id' in entry;
    if (!isDeployment) {
      if (runSchema(validateResource, entry, at, RULES, errors)) {
        entries.push({
          type: 'resource',
          api_key: entry['api_key'] as string,
          resource_name: entry['resource_name'] as string,
          resource_type: (entry['resource_type'] as AzureResourceType | undefined) ?? 'openai',
        });
      }
      return;
    }
    const schemaOk = runSchema(validateDeployment, entry, at, RULES, errors);
    const url = entry['endpoint_url'];
    let urlOk = true;
    if (typeof url === 'string' && url !== '') {
      const problem = endpointUrlProblem(url) ?? urlEgressProblem(url, egress);
      if (problem !== null) {
        urlOk = false;
        // Replace the generic https message with the specific one.
        const idx = errors.findIndex((e) => e.field === `${at}.endpoint_url`);
        if (idx >= 0) errors.splice(idx, 1);
        errors.push({ field: `${at}.endpoint_url`, message: problem });
      }
    }
    const slug = entry['model_slug'];
    if (typeof slug === 'string') {
      const first = slugs.get(slug);
      if (first !== undefined)
        errors.push({ field: `${at}.model_slug`, message: `duplicates the model_slug of entry [${first}]` });
      else slugs.set(slug, i);
    }
    if (schemaOk && urlOk) {
      entries.push({
        type: 'deployment',
        api_key: entry['api_key'] as string,
        model_slug: slug as string,
        endpoint_url: url as string,
        model_id: entry['model_id'] as string,
      });
    }
  });
  return errors.length === 0 ? { kind: 'azure', entries } : null;
}

/** Why an Azure deployment URL is unusable, or null. */
export function endpointUrlProblem(url: string): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'must be a full https URL';
  }
  if (u.protocol !== 'https:') return 'must use https';
  if (u.username !== '' || u.password !== '') return 'must not contain credentials';
  if (!/\/chat\/completions\/?$/.test(u.pathname)) return 'must include the chat-completions path (…/chat/completions)';
  const version = u.searchParams.get('api-version');
  if (version === null || version.trim() === '') return 'must include an api-version query parameter';
  return null;
}

/**
 * The Azure entry serving a model: a per-deployment config whose model_slug matches wins over resource configs;
 * otherwise the first resource config (which needs no per-model setup); null when neither applies.
 */
export function azureDeploymentFor(
  payload: AzurePayload,
  modelSlug: string,
): AzureDeploymentConfig | AzureResourceConfig | null {
  let resource: AzureResourceConfig | null = null;
  for (const e of payload.entries) {
    if (e.type === 'deployment') {
      if (e.model_slug === modelSlug) return e;
    } else if (resource === null) {
      resource = e;
    }
  }
  return resource;
}

/** The name of an entry's own exported Secret: `resource <resource_name>` or `deployment <model_slug>`. */
function azureEntryPart(entry: AzureResourceConfig | AzureDeploymentConfig): string {
  return entry.type === 'resource' ? `resource ${entry.resource_name}` : `deployment ${entry.model_slug}`;
}

export const azureShape: PayloadShapeModule<AzurePayload, AzureFacts> = {
  kinds: ['azure'],
  takesJson: true,
  validate: validateAzure,
  labelField(document) {
    if (!Array.isArray(document)) return null;
    for (const entry of document as unknown[]) {
      const key = stringField(entry, 'api_key');
      if (key !== null) return key;
    }
    return null;
  },
  upstream(payload, spec, modelSlug) {
    const entry = azureDeploymentFor(payload, modelSlug);
    if (entry === null) return { problem: `no Azure deployment or resource config serves ${modelSlug}` };
    const auth = { kind: 'header', name: 'api-key', value: entry.api_key } as const;
    if (entry.type === 'deployment')
      return { url: { full: entry.endpoint_url }, model: entry.model_id, auth, tenantUrl: true };
    const template = entry.resource_type === 'ai_foundry' ? spec.azureFoundryUrl : spec.azureOpenAiUrl;
    return { url: { chat: fillTemplate(template, { resource_name: entry.resource_name }) }, model: spec.model, auth };
  },
  facts: (payload) => ({
    kind: 'azure',
    entries: payload.entries.map((e) =>
      e.type === 'resource'
        ? { type: 'resource', resourceName: e.resource_name, resourceType: e.resource_type }
        : { type: 'deployment', modelSlug: e.model_slug, endpointUrl: e.endpoint_url, modelId: e.model_id },
    ),
  }),
  secret(payload, part) {
    // One Secret per entry (the export plan names the parts).
    const entry = payload.entries.find((e) => azureEntryPart(e) === part);
    if (entry === undefined) throw new RangeError(`no Azure entry ${part ?? '(none named)'} in the payload`);
    return { kind: 'api-key', apiKey: entry.api_key };
  },
};
