// Hostile text at both doors, table-driven: every free-text field of the REST API, of the CRDs (kubectl/Git) and
// of a credential Secret gets C0, C1, U+2028/2029, NUL, DEL, a noncharacter, a lone surrogate, invalid UTF-8 and a
// 1 MB string. Each must be refused naming the field (REST 400/413, apiserver 422, PayloadValid=False), and after
// each value: the victim account, hashed to the SAME routing shard (one bucket), still gets its create and delete
// into the compiled routing within seconds, `kubectl get byok-all -A -o yaml` still works, and every credential
// has a status. A canary key never appears in an Event, a status, a log line or a routing ConfigMap.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { CoreV1Api } from '@kubernetes/client-node';
import type { BYOKCredential } from '../../../src/schema/generated/types.ts';
import { API_VERSION, GROUP, VERSION } from '../../../src/schema/resources.ts';
import { type Account, type Harness, one, seedAccount, startHarness } from '../../support/api-harness.ts';
import { crApi, createTestNamespace, customObjects, kubectl, rejection, testKubeConfig } from '../../support/kube.ts';
import { type CapturedOperator, cond, createSecret, resource, startTestOperator } from '../../support/operator.ts';
import { createAccountNamespace } from '../../support/tenant.ts';
import { until } from '../../support/until.ts';
import {
  eventTexts,
  HOSTILE,
  type HostileValue,
  jsonWithBytes,
  kubectlCreateRaw,
  kubectlYamlWorks,
  readRouting,
  routedCredentials,
} from './helpers.ts';

const kc = testKubeConfig();
const CANARY = 'sk-CANARY-integrity-5e1f0c2a9b7d';
const VALID_KEY = 'sk-valid-rest-0123456789abcdef';

describe('hostile text at both doors', () => {
  let routing = '';
  let victim = '';
  let hostile: Account;
  let run: CapturedOperator;
  let h: Harness;
  let baseId = '';
  let probes = 0;
  const deleteToRoutedMs: number[] = [];

  beforeAll(async () => {
    [routing, victim, hostile] = await Promise.all([
      createTestNamespace('integ-routing'),
      createAccountNamespace('integ-victim'),
      seedAccount('integ-hostile'),
    ]);
    // The victim's credential, the operator and the REST harness are independent: set them up together.
    const seedVictim = async () => {
      await createSecret(kc, victim, 'keep-key', 'sk-victim-keep-0123456789');
      await crApi('byokcredentials', victim).create({
        apiVersion: API_VERSION,
        kind: 'BYOKCredential',
        metadata: { name: 'keep' },
        spec: { provider: 'openai', secretRef: { name: 'keep-key' } },
      });
    };
    // One bucket: every account shares the one routing shard, so a shard write refused for one freezes all.
    [, run, h] = await Promise.all([
      seedVictim(),
      startTestOperator(kc, {
        routingNamespace: routing,
        watchNamespaces: [victim, hostile.namespace],
        compile: { shardOptions: { targetBytes: 1 << 30 } },
      }),
      startHarness([hostile.namespace]),
    ]);
    await until('victim routed', async () => (await routedCredentials(kc, routing, victim)).includes('keep'));
    const base = await h.call('POST', '/byok', {
      key: hostile.managementKey,
      body: { provider: 'openai', key: CANARY, name: 'base' },
    });
    expect(base.status).toBe(201);
    baseId = one(base).id;
    // The REST answer carries the operator's status: let it settle, so "nothing changes" compares the
    // stored state and not the operator's first reconcile landing between two reads.
    await until(
      'the base credential reconciled',
      async () =>
        (
          one(await h.call('GET', `/byok/${baseId}`, { key: hostile.managementKey })) as {
            status?: { ready?: boolean | null };
          }
        ).status?.ready === true,
    );
  });
  afterAll(async () => {
    await h?.close();
    await run?.op.stop();
    if (deleteToRoutedMs.length)
      process.stderr.write(
        `[integrity doors] victim delete -> routed: max ${Math.max(...deleteToRoutedMs)} ms over ${deleteToRoutedMs.length} probes\n`,
      );
  });

  const credentialsOf = async (ns: string) =>
    (
      (await customObjects().listNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: ns,
        plural: 'byokcredentials',
      })) as { items: BYOKCredential[] }
    ).items;

  /** The properties that must hold after every hostile value. */
  async function stillHealthy(label: string): Promise<void> {
    const name = `probe-${++probes}`;
    // The victim's create-then-delete round trip, the cluster-wide kubectl read and the status check are
    // independent observations of the same state: run them together.
    const victimStillRouted = async () => {
      const index = [...(await readRouting(kc, routing)).keys()];
      expect(index).toEqual(expect.arrayContaining([victim, hostile.namespace]));
      await createSecret(kc, victim, `${name}-key`, `sk-victim-probe-${probes}-0123456789`);
      await crApi('byokcredentials', victim).create({
        apiVersion: API_VERSION,
        kind: 'BYOKCredential',
        metadata: { name },
        spec: { provider: 'mistral', secretRef: { name: `${name}-key` } },
      });
      await until(
        `${label}: the victim's new credential in the routing shard`,
        async () => (await routedCredentials(kc, routing, victim)).includes(name),
        15_000,
      );
      const t0 = Date.now();
      await crApi('byokcredentials', victim).delete(name);
      await until(
        `${label}: the victim's delete in the routing shard`,
        async () => !(await routedCredentials(kc, routing, victim)).includes(name),
        15_000,
      );
      deleteToRoutedMs.push(Date.now() - t0);
    };
    const everyCredentialHasStatus = () =>
      until(`${label}: every credential has a status for its generation`, async () => {
        for (const ns of [victim, hostile.namespace]) {
          for (const c of await credentialsOf(ns))
            if (c.status?.observedGeneration !== c.metadata.generation || !c.status?.conditions?.length) return false;
        }
        return true;
      });
    const [, yaml] = await Promise.all([victimStillRouted(), kubectlYamlWorks(), everyCredentialHasStatus()]);
    expect(yaml).toContain('kind: BYOKCredential');
    // Checked again once the probe is gone, so the probe credential itself is covered too.
    await everyCredentialHasStatus();
  }

  // ---- REST door ----

  const rest = (method: string, path: string, body: Buffer) =>
    fetch(`${h.base}${path}`, {
      method,
      headers: { authorization: `Bearer ${hostile.managementKey}`, 'content-type': 'application/json' },
      body,
    });

  const REST_FIELDS: { field: string; method: 'POST' | 'PATCH'; body: (v: string) => Record<string, unknown> }[] = [
    { field: 'name', method: 'POST', body: (v) => ({ provider: 'openai', key: VALID_KEY, name: v }) },
    { field: 'key', method: 'POST', body: (v) => ({ provider: 'openai', key: `${CANARY}${v}` }) },
    {
      field: 'allowed_models[0]',
      method: 'POST',
      body: (v) => ({ provider: 'openai', key: VALID_KEY, allowed_models: [`openai/${v}`] }),
    },
    {
      field: 'allowed_user_ids[0]',
      method: 'POST',
      body: (v) => ({ provider: 'openai', key: VALID_KEY, allowed_user_ids: [v] }),
    },
    { field: 'name', method: 'PATCH', body: (v) => ({ name: v }) },
    { field: 'key', method: 'PATCH', body: (v) => ({ key: `${CANARY}${v}` }) },
  ];

  const restBody = (make: (v: string) => Record<string, unknown>, value: HostileValue): Buffer =>
    value.bytes ? jsonWithBytes(make('@@'), value.bytes) : Buffer.from(JSON.stringify(make(value.text!)), 'utf8');

  test.each(HOSTILE.map((v) => [v.label, v] as const))(
    'REST: %s is refused naming the field, and nothing changes',
    async (label, value) => {
      const before = await h.call('GET', '/byok', { key: hostile.managementKey });
      // Each field's request is independent of the others: send them together.
      await Promise.all(
        REST_FIELDS.map(async (f) => {
          const res = await rest(f.method, f.method === 'POST' ? '/byok' : `/byok/${baseId}`, restBody(f.body, value));
          const text = await res.text();
          const body = JSON.parse(text) as {
            error: { code: number; message: string; metadata: { field?: string } | null };
          };
          if (value.oversize) {
            expect([413, 400]).toContain(res.status);
          } else {
            expect({ field: f.field, method: f.method, status: res.status }).toEqual({
              field: f.field,
              method: f.method,
              status: 400,
            });
            expect({ field: f.field, method: f.method, named: body.error.metadata?.field }).toEqual({
              field: f.field,
              method: f.method,
              named: f.field,
            });
            expect(body.error.message.startsWith(f.field)).toBe(true);
          }
          expect(body.error.code).toBe(res.status);
          expect(text).not.toContain(CANARY);
          if (value.text && !value.oversize) expect(text).not.toContain(value.text);
        }),
      );
      const after = await h.call('GET', '/byok', { key: hostile.managementKey });
      expect(after.text).toBe(before.text);
      await stillHealthy(`REST ${label}`);
    },
  );

  // ---- kubectl / Git door: the CRD schema ----

  const hash = 'a'.repeat(64);
  const CR_FIELDS: { kind: string; plural: string; path: string; spec: (v: string) => Record<string, unknown> }[] = [
    {
      kind: 'BYOKCredential',
      plural: 'byokcredentials',
      path: 'spec.displayName',
      spec: (v) => ({ provider: 'openai', secretRef: { name: 's' }, displayName: v }),
    },
    {
      kind: 'BYOKCredential',
      plural: 'byokcredentials',
      path: 'spec.allowedModels[0]',
      spec: (v) => ({ provider: 'openai', secretRef: { name: 's' }, allowedModels: [`openai/${v}`] }),
    },
    {
      kind: 'BYOKCredential',
      plural: 'byokcredentials',
      path: 'spec.allowedUserIds[0]',
      spec: (v) => ({ provider: 'openai', secretRef: { name: 's' }, allowedUserIds: [v] }),
    },
    { kind: 'Workspace', plural: 'workspaces', path: 'spec.displayName', spec: (v) => ({ displayName: v }) },
    {
      kind: 'Workspace',
      plural: 'workspaces',
      path: 'spec.members[0].userId',
      spec: (v) => ({ members: [{ userId: v }] }),
    },
    { kind: 'Guardrail', plural: 'guardrails', path: 'spec.displayName', spec: (v) => ({ displayName: v }) },
    {
      kind: 'GatewayAPIKey',
      plural: 'gatewayapikeys',
      path: 'spec.displayName',
      spec: (v) => ({ hash, displayName: v }),
    },
    { kind: 'Account', plural: 'accounts', path: 'spec.displayName', spec: (v) => ({ displayName: v }) },
  ];

  test.each(HOSTILE.map((v) => [v.label, v] as const))(
    'kubectl/Git: %s in every free-text CRD field is refused (422 naming the field)',
    async (label, value) => {
      const ns = hostile.namespace;
      // Each field's create is independent of the others: send them together.
      await Promise.all(
        CR_FIELDS.map(async (f, i) => {
          const name = `hostile-${probes}-${i}`;
          const doc = (v: string) => ({ apiVersion: API_VERSION, kind: f.kind, metadata: { name }, spec: f.spec(v) });
          let code: number;
          let message: string;
          if (value.bytes) {
            const out = await kubectlCreateRaw(
              `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${f.plural}`,
              jsonWithBytes(doc('@@'), value.bytes),
            );
            expect(out.ok).toBe(false);
            code = 422;
            message = out.output;
          } else {
            ({ code, message } = await rejection(crApi(f.plural, ns).create(doc(value.text!))));
          }
          expect({ path: f.path, code }).toEqual({ path: f.path, code: 422 });
          expect(message).toContain(f.path);
        }),
      );
      await stillHealthy(`CRD ${label}`);
    },
  );

  // ---- kubectl / Git door: the Secret a credential references ----

  test.each(HOSTILE.map((v) => [v.label, v] as const))(
    'Git Secret: %s in the key gives PayloadValid=False (PayloadInvalid) naming the problem, never the key',
    async (label, value) => {
      const ns = hostile.namespace;
      const name = `secret-${++probes}`;
      // A lone surrogate in a byte stream is its CESU-8 form (ED A0 80): invalid UTF-8 too.
      const bytes =
        value.bytes ??
        (value.label.startsWith('lone')
          ? Buffer.concat([Buffer.from(CANARY), Buffer.from([0xed, 0xa0, 0x80])])
          : Buffer.from(`${CANARY}${value.oversize ? 'x'.repeat(200_000) : value.text!}`, 'utf8'));
      await kc.makeApiClient(CoreV1Api).createNamespacedSecret({
        namespace: ns,
        body: { metadata: { name: `${name}-key` }, data: { key: bytes.toString('base64') } },
      });
      await crApi('byokcredentials', ns).create({
        apiVersion: API_VERSION,
        kind: 'BYOKCredential',
        metadata: { name },
        spec: { provider: 'openai', secretRef: { name: `${name}-key` } },
      });
      const c = await resource('byokcredentials', ns).waitReady(name, 'False', 'PayloadInvalid');
      const payload = cond(c, 'PayloadValid');
      expect(payload).toMatchObject({ status: 'False', reason: 'PayloadInvalid' });
      // Bytes are checked before decoding: invalid UTF-8 is named as such, not as the U+FFFD a decoder would leave.
      if (value.bytes || value.label.startsWith('lone')) expect(payload?.message).toBe('key is not valid UTF-8');
      else expect(payload?.message).toMatch(/^key (contains .* at position \d+|is too long)/);
      expect(JSON.stringify(c.status)).not.toContain(CANARY);
      expect(c.status?.label).toBeUndefined();
      // Invalid, so not compiled into routing.
      expect((await readRouting(kc, routing)).get(ns)?.credentials.map((x) => x.name) ?? []).not.toContain(name);
      await stillHealthy(`Secret ${label}`);
    },
  );

  test('JSON payloads (azure, vertex) follow the multi-line rules: a C1 inside is refused, line breaks are not the problem', async () => {
    const ns = hostile.namespace;
    const doc = `[\n  {"api_key": "${CANARY}\u0096", "resource_name": "res", "resource_type": "openai"}\n]`;
    await createSecret(kc, ns, 'azure-key', doc);
    await crApi('byokcredentials', ns).create({
      apiVersion: API_VERSION,
      kind: 'BYOKCredential',
      metadata: { name: 'azure' },
      spec: { provider: 'azure', secretRef: { name: 'azure-key' } },
    });
    const c = await resource('byokcredentials', ns).waitReady('azure', 'False', 'PayloadInvalid');
    expect(cond(c, 'PayloadValid')?.message).toBe(
      `key contains a control character (U+0096) at position ${doc.indexOf('\u0096')}`,
    );
  });

  test('the canary key appears in no Event, status, log line or routing ConfigMap', async () => {
    await run.op.waitForIdle();
    const everything = [
      await eventTexts(kc, [victim, hostile.namespace, routing]),
      await kubectl('get', 'byok-all', '-A', '-o', 'json'),
      JSON.stringify((await kc.makeApiClient(CoreV1Api).listNamespacedConfigMap({ namespace: routing })).items),
      JSON.stringify([...(await readRouting(kc, routing)).values()]),
      run.logs.join('\n'),
      h.logLines.join('\n'),
    ].join('\n');
    expect(everything.length).toBeGreaterThan(1000);
    expect(everything).not.toContain(CANARY);
    expect(everything).not.toContain('CANARY-integrity');
    // The valid canary credential is compiled (only its masked label is in routing).
    expect(
      (await readRouting(kc, routing)).get(hostile.namespace)?.credentials.some((c) => c.displayName === 'base'),
    ).toBe(true);
  });
});
