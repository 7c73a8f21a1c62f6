// One pass of the operator's spend-status writer (src/operator/spend/spend-status-writer.ts, every 5 s on the leader) over N
// accounts read from caches shaped like the operator's: each account has an Account, a workspace with two budget
// intervals, two guardrails (one with a budget), an API key and 10 valid credentials whose verdicts point at their
// Secrets (one in five a ~2.3 KB service-account payload). Embedded ledger with spend in every window, so every
// status is already current after the first pass and a pass writes nothing (the steady state). Prints one JSON
// object: pass time (median and best of the measured passes) and what the pass read.
// Run: node bench/spend-status.ts [accounts] [passes]
import { performance } from 'node:perf_hooks';
import type { KubernetesObject, V1Secret } from '@kubernetes/client-node';
import pino from 'pino';
import { publicId } from '../src/domain/ids.ts';
import type { Applier } from '../src/kube/apply.ts';
import type { ResourceInformers } from '../src/kube/resources.ts';
import { createEmbeddedLedger, keySpace } from '../src/ledger/index.ts';
import { windowsAt } from '../src/ledger/windows.ts';
import { SpendStatusWriter } from '../src/operator/spend/spend-status-writer.ts';
import { createAccountStateSource, VerdictStore } from '../src/operator/verdicts.ts';

const accounts = Number(process.argv[2] ?? '1000');
const passes = Number(process.argv[3] ?? '7');
const CREDENTIALS = 10;
const created = '2026-01-01T00:00:00Z';
const group = 'byok.gateway.dev/v1alpha1';

type Obj = KubernetesObject & { spec?: unknown; status?: Record<string, unknown>; data?: Record<string, string> };

/** The four calls the state source makes on an informer, over a plain map per namespace. */
function cache<T extends Obj>(objects: T[]) {
  const byNs = new Map<string, T[]>();
  for (const o of objects) {
    const ns = o.metadata?.namespace ?? '';
    const list = byNs.get(ns) ?? [];
    list.push(o);
    byNs.set(ns, list);
  }
  return {
    namespaces: () => [...byNs.keys()],
    hasNamespace: (ns: string) => byNs.has(ns),
    list: (ns: string) => byNs.get(ns) ?? [],
    get: (ns: string, name: string) => byNs.get(ns)?.find((o) => o.metadata?.name === name),
  };
}

const gcpPayload = (i: number) =>
  JSON.stringify({
    type: 'service_account',
    project_id: `project-${i}`,
    private_key_id: 'a'.repeat(40),
    private_key: `-----BEGIN PRIVATE KEY-----\n${'M'.repeat(1600)}\n-----END PRIVATE KEY-----\n`,
    client_email: `sa-${i}@project-${i}.iam.gserviceaccount.com`,
    client_id: '1'.repeat(21),
    token_uri: 'https://oauth2.googleapis.com/token',
  });

const verdicts = new VerdictStore();
const all = {
  accounts: [] as Obj[],
  workspaces: [] as Obj[],
  guardrails: [] as Obj[],
  apiKeys: [] as Obj[],
  credentials: [] as Obj[],
  secrets: [] as V1Secret[],
};
const meta = (namespace: string, name: string) => ({
  namespace,
  name,
  uid: `${namespace}-${name}`,
  generation: 1,
  resourceVersion: '1',
  creationTimestamp: created as unknown as Date,
});
for (let a = 0; a < accounts; a++) {
  const ns = `acct-${a}`;
  all.accounts.push({
    apiVersion: group,
    kind: 'Account',
    metadata: meta(ns, 'account'),
    spec: { plan: 'pay-as-you-go' },
    status: {},
  });
  all.workspaces.push({
    apiVersion: group,
    kind: 'Workspace',
    metadata: meta(ns, 'default'),
    spec: {
      default: true,
      budgets: { daily: { limitUsd: 50 }, monthly: { limitUsd: 1000 } },
      includeByokInBudgets: true,
      defaultGuardrail: 'team',
    },
    status: {},
  });
  all.guardrails.push({
    apiVersion: group,
    kind: 'Guardrail',
    metadata: meta(ns, 'team'),
    spec: { budget: { limitUsd: 200, resetInterval: 'weekly' } },
    status: {},
  });
  all.guardrails.push({
    apiVersion: group,
    kind: 'Guardrail',
    metadata: meta(ns, 'zdr'),
    spec: { dataPolicy: { requireZdr: true } },
    status: {},
  });
  all.apiKeys.push({
    apiVersion: group,
    kind: 'GatewayAPIKey',
    metadata: meta(ns, 'key'),
    spec: { keyHash: `${a}`.padStart(64, '0'), workspace: 'default' },
    status: {},
  });
  for (let c = 0; c < CREDENTIALS; c++) {
    const gcp = c % 5 === 0;
    const payload = gcp ? gcpPayload(c) : JSON.stringify({ api_key: `sk-${ns}-${c}-${'x'.repeat(40)}` });
    const secret: V1Secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: meta(ns, `cred-${c}`),
      data: { payload: Buffer.from(payload).toString('base64') },
    };
    all.secrets.push(secret);
    all.credentials.push({
      apiVersion: group,
      kind: 'BYOKCredential',
      metadata: meta(ns, `cred-${c}`),
      spec: { provider: gcp ? 'google-vertex' : 'openai', secretRef: { name: `cred-${c}`, key: 'payload' } },
      status: { id: publicId('BYOKCredential', ns, `cred-${c}`) },
    });
    verdicts.set(ns, `cred-${c}`, {
      valid: true,
      sortOrder: 0,
      label: 'sk-...xxxx',
      payloadSecret: secret,
      payloadKey: 'payload',
      generation: 1,
      secretResourceVersion: '1',
    });
  }
}
const informers = {
  accounts: cache(all.accounts),
  workspaces: cache(all.workspaces),
  guardrails: cache(all.guardrails),
  apiKeys: cache(all.apiKeys),
  credentials: cache(all.credentials),
  secrets: cache(all.secrets),
} as unknown as ResourceInformers;

const source = createAccountStateSource(informers, verdicts);
const ledger = createEmbeddedLedger();
const keys = keySpace();
let writes = 0;
const applier = {
  fieldManager: 'bench',
  async applyStatus(kind: string, namespace: string, name: string, status: object) {
    writes++;
    // Feed the "cache": the next pass sees its own write and skips it, as with a real informer.
    const list = kind === 'Account' ? all.accounts : kind === 'Workspace' ? all.workspaces : all.guardrails;
    const obj = list.find((o) => o.metadata?.namespace === namespace && o.metadata?.name === name);
    if (obj) obj.status = { ...obj.status, ...status };
    return obj;
  },
} as unknown as Applier;

const at = new Date();
// Some spend in every window of every scope, so the figures are not all zero.
const windows = windowsAt(at);
const increments = [];
for (let a = 0; a < accounts; a++) {
  const ns = `acct-${a}`;
  const accountId = publicId('Account', ns, 'account');
  for (const w of Object.values(windows)) {
    increments.push({
      key: keys.budget(accountId, 'workspace', publicId('Workspace', ns, 'default'), w, 'nonbyok'),
      by: 1_000_000 + a,
      expiresAt: keys.expiresAt(w),
    });
    increments.push({
      key: keys.budget(accountId, 'guardrail', publicId('Guardrail', ns, 'team'), w, 'byok'),
      by: 2_000_000 + a,
      expiresAt: keys.expiresAt(w),
    });
  }
}
await ledger.add(increments);

const writer = new SpendStatusWriter({
  source,
  ledger,
  applier,
  log: pino({ level: 'silent' }),
  keys,
  clock: () => at,
});
await writer.syncOnce(); // first pass: publishes everything
const firstPassWrites = writes;
const times: number[] = [];
for (let i = 0; i < passes; i++) {
  const t0 = performance.now();
  await writer.syncOnce();
  times.push(performance.now() - t0);
}
times.sort((x, y) => x - y);
console.log(
  JSON.stringify({
    accounts,
    credentialsPerAccount: CREDENTIALS,
    passes,
    passMedianMs: +times[Math.floor(times.length / 2)]!.toFixed(1),
    passBestMs: +times[0]!.toFixed(1),
    firstPassWrites,
    steadyStateWrites: writes - firstPassWrites,
  }),
);
await ledger.close();
