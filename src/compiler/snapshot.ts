// The compiler's input: everything the operator's caches know about ONE account namespace, plus the
// reconciler's verdict per credential. Built by the operator (an AccountStateSource), consumed by the pure
// compiler. The only place key material appears is `verdict.payload`, which goes to the encrypted bundle.
import type { Account, BYOKCredential, GatewayAPIKey, Guardrail, Workspace } from '../schema/generated/types.ts';

export interface CredentialVerdict {
  /** The reconciler found the Secret, the payload, flags and filters valid (Ready=True). Invalid ones are not compiled. */
  valid: boolean;
  /** Masked label (maskLabel of the payload); '' when unknown. */
  label?: string;
  /** Effective sort order (status.sortOrder). */
  sortOrder: number;
  /** Raw provider payload, only when valid. Goes only into the encrypted bundle; never logged, never in a ConfigMap. */
  payload?: string;
}

export interface SnapshotCredential {
  resource: BYOKCredential;
  verdict: CredentialVerdict;
}

export interface AccountSnapshot {
  namespace: string;
  /**
   * The namespace's Account (the oldest wins, see electAccount in ./elect.ts). The operator compiles only namespaces
   * that hold one (./gate.ts); absent here means defaults (pay-as-you-go, no privacy restrictions), for offline
   * callers that compile a folder of manifests.
   */
  account?: Account;
  workspaces: Workspace[];
  guardrails: Guardrail[];
  apiKeys: GatewayAPIKey[];
  /**
   * Names of `apiKeys` whose hash an older GatewayAPIKey holds, in this account or another (keysNotHolding in
   * ./elect.ts, over every account's keys). They are never compiled. Absent: none.
   */
  conflictingApiKeys?: ReadonlySet<string>;
  /**
   * Names of `apiKeys` whose spec.previousHash an older GatewayAPIKey holds (previousHashesNotHeld in ./elect.ts): the
   * key itself compiles, its previous secret does not. Absent: none.
   */
  unheldPreviousHashes?: ReadonlySet<string>;
  credentials: SnapshotCredential[];
  /** Clock for API-key expiry; injected so compilation stays pure. */
  now: Date;
}
