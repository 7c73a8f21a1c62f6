// The Account gate: a namespace is an account, and is compiled and routed, only while it holds an Account object.
// A platform team onboards a tenant by creating its Account; the tenant's own objects (credentials, keys,
// workspaces) never make a namespace an account by themselves. The operator, the export command and the docs
// share these words, so what `kubectl describe` says is what `export --cluster` reports.

/** Whether a namespace holding these Accounts is routed (any Account counts; the oldest is the one compiled). */
export const isRoutedNamespace = (accounts: readonly unknown[]): boolean => accounts.length > 0;

/** What to tell the owner of an object in a namespace without an Account: what is missing and what to create. */
export function accountMissingMessage(namespace: string, what: 'credential' | 'key'): string {
  const effect =
    what === 'key'
      ? 'the gateway does not know this key (401) and routes nothing for it'
      : 'this credential is not compiled and the gateway never uses it';
  return `namespace ${namespace} has no Account: the operator routes only namespaces with one, so ${effect}; create an Account (apiVersion byok.gateway.dev/v1alpha1, kind Account) in namespace ${namespace}`;
}
