// GitOps folders for the export tests: every payload shape (plain key, {api_key, region}, Azure resource and
// deployment configs, Bedrock IAM and API key, Vertex global and regional) under every flag combination, with fake
// key material that each test checks never reaches the output.
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';

/** A fake Google service-account key document with a private key the output must never contain. */
export function serviceAccount(project: string, region?: string): Record<string, string> {
  return {
    type: 'service_account',
    project_id: project,
    private_key_id: '0123456789abcdef0123456789abcdef01234567',
    private_key: '-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCcanaryPRIVATEKEY\n-----END PRIVATE KEY-----\n',
    client_email: `router@${project}.iam.gserviceaccount.com`,
    client_id: '112233445566778899001',
    auth_uri: 'https://accounts.google.com/o/oauth2/auth',
    token_uri: 'https://oauth2.googleapis.com/token',
    auth_provider_x509_cert_url: 'https://www.googleapis.com/oauth2/v1/certs',
    client_x509_cert_url: `https://www.googleapis.com/robot/v1/metadata/x509/router%40${project}.iam.gserviceaccount.com`,
    ...(region ? { region } : {}),
  };
}

/** Every payload shape: name, provider, payload text. Each secret string contains `canary`. */
export const SHAPES: readonly { name: string; provider: string; payload: string }[] = [
  { name: 'openai-plain', provider: 'openai', payload: 'sk-proj-canary0000000000000001' },
  { name: 'openai-region', provider: 'openai', payload: JSON.stringify({ api_key: 'sk-proj-canary0000000000000002', region: 'eu' }) },
  { name: 'anthropic-plain', provider: 'anthropic', payload: 'sk-ant-api03-canary000000000003' },
  { name: 'groq-plain', provider: 'groq', payload: 'gsk_canary00000000000000000004' },
  {
    name: 'azure-mixed',
    provider: 'azure',
    payload: JSON.stringify([
      { api_key: 'azcanary0000000000000000000005', model_slug: 'openai/gpt-5-mini', endpoint_url: 'https://team-east.openai.azure.com/openai/deployments/gpt5mini-prod/chat/completions?api-version=2024-10-21', model_id: 'gpt5mini-prod' },
      { api_key: 'azcanary0000000000000000000006', resource_name: 'team-foundry', resource_type: 'ai_foundry' },
    ]),
  },
  { name: 'azure-resource', provider: 'azure', payload: JSON.stringify([{ api_key: 'azcanary0000000000000000000007', resource_name: 'team-west' }]) },
  { name: 'bedrock-iam', provider: 'amazon-bedrock', payload: JSON.stringify({ accessKeyId: 'AKIACANARY0000000008', secretAccessKey: 'canarySecretAccessKey000000000000000008', region: 'eu-central-1' }) },
  { name: 'bedrock-key', provider: 'amazon-bedrock', payload: 'ABSKcanaryBedrockApiKey0000000009' },
  { name: 'vertex-global', provider: 'google-vertex', payload: JSON.stringify(serviceAccount('team-global')) },
  { name: 'vertex-regional', provider: 'google-vertex', payload: JSON.stringify(serviceAccount('team-eu', 'europe-west4')) },
];

export const FLAG_SETS = {
  none: {},
  required: { isRequired: true },
  'byok-only': { isByokOnly: true },
  both: { isRequired: true, isByokOnly: true },
} as const;

export type FlagSet = keyof typeof FLAG_SETS;

/** Manifests of one account: a default workspace, a gateway key, every shape with the flag set, and one fallback. */
export function accountManifests(namespace: string, flags: FlagSet): Record<string, unknown>[] {
  // A key hash of the account's own: a hash several accounts name belongs to the oldest of them alone.
  const HASH = createHash('sha256').update(`gateway key of ${namespace}`).digest('hex');
  const docs: Record<string, unknown>[] = [
    { apiVersion: 'byok.gateway.dev/v1alpha1', kind: 'Workspace', metadata: { name: 'default', namespace }, spec: { default: true } },
    { apiVersion: 'byok.gateway.dev/v1alpha1', kind: 'GatewayAPIKey', metadata: { name: 'ci', namespace }, spec: { hash: HASH } },
  ];
  SHAPES.forEach((s, i) => {
    docs.push({ apiVersion: 'v1', kind: 'Secret', metadata: { name: s.name, namespace }, stringData: { key: s.payload } });
    const filters = i === 0 ? { allowedApiKeyHashes: [HASH], allowedUserIds: ['alice'] } : {};
    docs.push({ apiVersion: 'byok.gateway.dev/v1alpha1', kind: 'BYOKCredential', metadata: { name: s.name, namespace }, spec: { provider: s.provider, secretRef: { name: s.name }, sortOrder: i, ...FLAG_SETS[flags], ...filters } });
  });
  docs.push({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'openai-fallback', namespace }, stringData: { key: 'sk-proj-canary000000000000000fb' } });
  docs.push({ apiVersion: 'byok.gateway.dev/v1alpha1', kind: 'BYOKCredential', metadata: { name: 'openai-fallback', namespace }, spec: { provider: 'openai', secretRef: { name: 'openai-fallback' }, isFallback: true } });
  return docs;
}

/** A folder with one account per flag set (namespaces `flags-<set>`), one file per account. */
export function allShapesFolder(): string {
  const dir = mkdtempSync(join(tmpdir(), 'byok-export-'));
  for (const flags of Object.keys(FLAG_SETS) as FlagSet[]) {
    writeFileSync(join(dir, `${flags}.yaml`), accountManifests(`flags-${flags}`, flags).map((d) => stringify(d)).join('---\n'));
  }
  return dir;
}

/**
 * `accounts` accounts of `perAccount` credentials each (plain keys over `providers`), for the timing and the
 * object counts; written as one file per account.
 */
export function scaleFolder(accounts: number, perAccount: number, providers: readonly string[] = ['openai', 'anthropic', 'groq']): string {
  const dir = mkdtempSync(join(tmpdir(), 'byok-export-scale-'));
  mkdirSync(join(dir, 'accounts'));
  for (let a = 0; a < accounts; a++) {
    const namespace = `team-${a}`;
    const docs: Record<string, unknown>[] = [{ apiVersion: 'byok.gateway.dev/v1alpha1', kind: 'Workspace', metadata: { name: 'default', namespace }, spec: { default: true } }];
    for (let c = 0; c < perAccount; c++) {
      const name = `key-${c}`;
      docs.push({ apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace }, stringData: { key: `sk-canary-${a}-${c}-0000000000000000` } });
      docs.push({ apiVersion: 'byok.gateway.dev/v1alpha1', kind: 'BYOKCredential', metadata: { name, namespace }, spec: { provider: providers[c % providers.length], secretRef: { name }, sortOrder: c } });
    }
    writeFileSync(join(dir, 'accounts', `${namespace}.yaml`), docs.map((d) => stringify(d)).join('---\n'));
  }
  return dir;
}
