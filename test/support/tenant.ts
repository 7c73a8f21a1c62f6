// A tenant's objects in the test cluster, built with ./builders.ts. A tenant namespace has its Account by default:
// the operator compiles and routes only namespaces that hold one (docs/operator.md, "The Account gate").
import type { KubernetesObject, V1Secret } from '@kubernetes/client-node';
import type { Account, BYOKCredential, GatewayAPIKey, Guardrail, Workspace } from '../../src/schema/generated/types.ts';
import { account, type Option } from './builders.ts';
import { core, crApi, createTestNamespace } from './kube.ts';

const PLURAL: Record<string, string> = {
  Account: 'accounts',
  Workspace: 'workspaces',
  Guardrail: 'guardrails',
  GatewayAPIKey: 'gatewayapikeys',
  BYOKCredential: 'byokcredentials',
};

/** Creates the objects in `namespace`, in the order given (Secrets through the core API). */
export async function createObjects(namespace: string, ...objects: KubernetesObject[]): Promise<void> {
  for (const o of objects) {
    if (o.kind === 'Secret') {
      await core().createNamespacedSecret({
        namespace,
        body: { ...(o as V1Secret), metadata: { ...o.metadata, namespace } },
      });
      continue;
    }
    const plural = PLURAL[o.kind ?? ''];
    if (!plural) throw new Error(`createObjects: no plural known for kind ${o.kind}`);
    await crApi(plural, namespace).create({ ...o, metadata: { ...o.metadata, namespace } });
  }
}

/**
 * Creates the namespace's Account, named after the namespace as the guide does (so its public id is the one an
 * offline compile of the namespace's other objects gives).
 */
export async function createAccount(namespace: string, ...options: Option<Account>[]): Promise<void> {
  await createObjects(namespace, account(namespace, ...options));
}

/** A fresh namespace (see createTestNamespace) that is an account: it holds an Account. */
export async function createAccountNamespace(prefix: string, ...options: Option<Account>[]): Promise<string> {
  const ns = await createTestNamespace(prefix);
  await createAccount(ns, ...options);
  return ns;
}

/** A tenant's set; `account: false` leaves the Account out (a namespace the gate holds back). */
export interface TenantSet {
  account?: Account | false;
  secrets?: V1Secret[];
  workspaces?: Workspace[];
  guardrails?: Guardrail[];
  gatewayKeys?: GatewayAPIKey[];
  credentials?: BYOKCredential[];
}

/** Creates a tenant's objects: the Account first (unless left out), then what credentials and keys refer to. */
export async function createTenant(namespace: string, set: TenantSet): Promise<void> {
  const first = set.account === false ? [] : [set.account ?? account(namespace)];
  await createObjects(
    namespace,
    ...first,
    ...(set.secrets ?? []),
    ...(set.workspaces ?? []),
    ...(set.guardrails ?? []),
    ...(set.gatewayKeys ?? []),
    ...(set.credentials ?? []),
  );
}
