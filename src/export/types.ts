// What an export reads and writes: compiled accounts plus the non-secret facts of each credential's payload in,
// the target's Kubernetes objects (or a standalone config) and a report of every semantic the target drops out.
// No type here holds key material: payloads are reduced to CredentialFacts before they reach this room.
import type { CatalogEndpoint, ModelCatalog, UpstreamSpec } from '../domain/catalog.ts';
import type { CompiledAccount } from '../domain/compiled.ts';
import type { CredentialFacts } from '../domain/payloads.ts';
import type { ProviderSlug } from '../domain/providers.ts';

export const EXPORT_TARGETS = ['envoy-ai-gateway', 'agentgateway'] as const;
export type ExportTarget = (typeof EXPORT_TARGETS)[number];

/** Static: one object set per (account, model). Override: per-provider objects, the credential chosen per request. */
export type ExportMode = 'static' | 'override';

/** What routing needs from a payload, and an Azure entry without its api_key: each payload shape defines its own. */
export type { AzureEntryFacts, CredentialFacts } from '../domain/payloads.ts';

/** How a catalog endpoint is reached: the gateway catalog's upstream, without the wire protocol the export never reads. */
export type ExportUpstream = Omit<UpstreamSpec, 'api'>;

/** A credential the offline checks left out (not compiled): named in the report, never exported. */
export interface SkippedCredential {
  namespace: string;
  name: string;
  provider: string;
  reason: string;
}

export interface ExportOptions {
  target: ExportTarget;
  mode: ExportMode;
  /** Namespace the exported objects are written to (the target's objects reference each other within it). */
  namespace: string;
  /** The Gateway the routes attach to. */
  gateway: { name: string; namespace?: string };
  /** The platform's own Google project for the shared google-vertex tier (none: that tier is left out). */
  sharedVertexProject?: string;
  /**
   * Export hosts tenants name in their payloads (an Azure deployment's endpoint_url) although the target resolves
   * them without our egress policy (`--allow-tenant-hosts`). Off: such a credential entry is not exported, and the
   * report says why.
   */
  allowTenantHosts?: boolean;
}

export interface ExportInput {
  accounts: readonly CompiledAccount[];
  /** Credential public id -> facts of its payload. A compiled credential without facts is skipped and reported. */
  facts: ReadonlyMap<string, CredentialFacts>;
  /** Credentials left out before compiling (invalid, Secret missing): reported per account. */
  skipped: readonly SkippedCredential[];
  catalog: ModelCatalog;
  upstream(model: string, endpointId: string): ExportUpstream | undefined;
}

/** A Kubernetes object of the target. */
export interface TargetObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec: Record<string, unknown>;
}

/** How one semantic of ours fares in the target. */
export type Treatment = 'kept' | 'approximated' | 'dropped';

export interface SemanticNote {
  semantic: string;
  treatment: Treatment;
  detail: string;
}

/** A Secret the target needs in its own shape: only the in-cluster controller writes it, never the export. */
export interface DerivedSecret {
  name: string;
  /** The keys the target reads from it, e.g. `apiKey` or `credentials` (an AWS INI file). */
  keys: string[];
  /** `namespace/name` of the BYOKCredential it is derived from (with the Azure entry), or `shared:<provider>`. */
  source: string;
  /** `namespace/name` of that BYOKCredential; absent for the platform's keys and placeholders. */
  credential?: string;
  /** The part of the credential (an Azure entry: `resource <name>`, `deployment <model>`), when it has parts. */
  part?: string;
}

export interface CredentialReport {
  namespace: string;
  name: string;
  provider: string;
  /** Empty when the credential was not exported; several for an Azure credential whose entries have their own keys. */
  derivedSecrets: DerivedSecret[];
  notes: SemanticNote[];
}

export interface AccountReport {
  namespace: string;
  models: string[];
  /** Objects written for this account (shared platform objects are counted once, in ExportReport.sharedObjects). */
  objects: number;
  notes: SemanticNote[];
  credentials: CredentialReport[];
}

export interface ExportReport {
  target: ExportTarget;
  mode: ExportMode;
  accounts: AccountReport[];
  /** Objects every account shares (the platform's shared-capacity backends and their policies). */
  sharedObjects: number;
  /** Secrets the platform provides for its shared capacity, and those derived per credential. */
  derivedSecrets: DerivedSecret[];
  /** Target limits hit and how they were handled (split or cut), one line each. */
  limits: string[];
  /** Names two objects would have shared: neither is written (one line each). */
  conflicts: string[];
  totalObjects: number;
}

export interface ExportResult {
  objects: TargetObject[];
  report: ExportReport;
}

/** One attempt of an (account, model) plan, resolved to where and how it is sent. */
export interface ResolvedAttempt {
  /** Credential public id, or null for the shared tier. */
  credentialId: string | null;
  provider: ProviderSlug;
  endpoint: CatalogEndpoint;
  section: 'prioritized' | 'shared' | 'fallback';
  target: UpstreamTarget;
}

/** The upstream of one attempt: host, path prefix, model name sent and the auth it needs. */
export interface UpstreamTarget {
  host: string;
  /** Path before `/chat/completions`, e.g. `/v1` or `/openai/v1`. */
  basePath: string;
  /** The model name the upstream expects (an Azure deployment name, a Bedrock model id...). */
  model: string;
  api: 'openai' | 'anthropic' | 'azure-deployment' | 'azure-resource' | 'bedrock' | 'vertex';
  auth: 'api-key' | 'azure-api-key' | 'anthropic-api-key' | 'aws-iam' | 'bedrock-api-key' | 'gcp-service-account';
  region?: string;
  projectId?: string;
  /** The part of a credential this attempt uses when the parts hold different keys (an Azure entry). */
  credentialPart?: string;
  azure?: { resourceName?: string; resourceType?: 'ai_foundry' | 'openai'; apiVersion?: string };
  /** A host the tenant named, exported because the platform allowed it (`allowTenantHosts`). */
  tenantHost?: true;
}
