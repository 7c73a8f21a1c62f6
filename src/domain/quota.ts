// The per-account credential quota, shared by both doors (REST refuses beyond it; the operator leaves the
// newest credentials beyond it uncompiled).

/** Credentials per account when neither the Account (`spec.limits.maxCredentials`) nor the deployment sets one. */
export const DEFAULT_MAX_CREDENTIALS = 1000;

export function quotaMessage(count: number, limit: number): string {
  return `the account holds ${count} credentials and its limit is ${limit} (Account spec.limits.maxCredentials); the ${limit} oldest are used, this one is not compiled`;
}
