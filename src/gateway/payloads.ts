// The payload an attempt authenticates with: a tenant's BYOK credential (decrypted from the mounted bundle) or the
// platform's shared key for the provider (read from its mounted file).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Attempt, EgressAllowList, ProviderPayload, ProviderSlug } from '../domain/index.ts';
import { validatePayload } from '../domain/payloads.ts';
import { CredentialPayloadError, type RoutingConfigWatcher } from '../sdk/index.ts';
import { sharedKeyFileName, UpstreamSetupError } from './upstream.ts';

export class AttemptPayloads {
  private readonly routing: RoutingConfigWatcher;
  private readonly egress: EgressAllowList;
  private readonly sharedKeysDir: string | undefined;

  constructor(opts: { routing: RoutingConfigWatcher; egress: EgressAllowList; sharedKeysDir?: string | undefined }) {
    this.routing = opts.routing;
    this.egress = opts.egress;
    this.sharedKeysDir = opts.sharedKeysDir;
  }

  /** A BYOK credential's payload, validated with this gateway's egress policy (an older policy gets no exception). */
  credential(provider: ProviderSlug, credentialId: string): ProviderPayload {
    try {
      return this.routing.credentialPayload(credentialId, { provider, egress: this.egress });
    } catch (err) {
      if (err instanceof CredentialPayloadError)
        throw new UpstreamSetupError('the credential payload does not parse for its provider');
      throw err;
    }
  }

  shared(provider: ProviderSlug): ProviderPayload {
    if (!this.sharedKeysDir) throw new UpstreamSetupError(`no shared key configured for provider ${provider}`);
    let text: string;
    try {
      text = readFileSync(join(this.sharedKeysDir, sharedKeyFileName(provider)), 'utf8');
    } catch {
      throw new UpstreamSetupError(`no shared key configured for provider ${provider}`);
    }
    const parsed = validatePayload(provider, text);
    if (!parsed.ok) throw new UpstreamSetupError(`the shared key of provider ${provider} does not parse`);
    return parsed.payload;
  }

  for(attempt: Attempt): ProviderPayload {
    return attempt.kind === 'credential'
      ? this.credential(attempt.provider, attempt.credentialId)
      : this.shared(attempt.provider);
  }
}
