// The Argo CD health checks (docs/argocd/byok-health.lua) run by Debian's lua5.4 on status objects the real
// operator wrote: Healthy when Ready, Degraded with the reason when not, Suspended when disabled / not live,
// Progressing before a reconcile and when status lags the generation, and Degraded for a Ready credential whose key
// the upstream refuses (UpstreamHealthy=False) unless upstreamDegrades is turned off. Argo CD hands the script the object as
// a Lua table (`obj`) and reads `hs.status` / `hs.message`; the test does the same.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { parse } from 'yaml';
import { API_VERSION } from '../../../src/schema/resources.ts';
import { credential, withSecret } from '../../support/builders.ts';
import { createTestNamespace, testKubeConfig } from '../../support/kube.ts';
import { type CapturedOperator, createSecret, type Obj, resource, startTestOperator } from '../../support/operator.ts';
import { until } from '../../support/until.ts';

const kc = testKubeConfig();
const docs = join(import.meta.dirname, '..', '..', '..', 'docs', 'argocd');
const script = readFileSync(join(docs, 'byok-health.lua'), 'utf8');
const KINDS = ['BYOKCredential', 'Workspace', 'Guardrail', 'GatewayAPIKey', 'Account'];

/** A JSON value as a Lua table constructor (what Argo CD's unstructured-to-Lua conversion produces). */
function lua(value: unknown): string {
  if (value === null || value === undefined) return 'nil';
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return `{${value.map(lua).join(', ')}}`;
  return `{${Object.entries(value as Record<string, unknown>)
    .map(([k, v]) => `[${JSON.stringify(k)}] = ${lua(v)}`)
    .join(', ')}}`;
}

async function health(obj: object, source = script): Promise<{ status: string; message: string }> {
  const program = `local obj = ${lua(obj)}\nlocal function check(obj)\n${source}\nend\nlocal hs = check(obj)\nio.write(hs.status, "\\n", hs.message or "")\n`;
  const child = execFile('lua5.4', ['-'], { encoding: 'utf8' });
  const out = new Promise<string>((resolve, reject) => {
    let text = '';
    child.stdout!.on('data', (d: string) => (text += d));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(text) : reject(new Error(`lua5.4 exited ${code}`))));
  });
  child.stdin!.end(program);
  const [status = '', ...rest] = (await out).split('\n');
  return { status, message: rest.join('\n') };
}

describe('Argo CD health checks', () => {
  let ns = '';
  let op: CapturedOperator | undefined;
  const live: Record<string, Obj> = {};

  beforeAll(async () => {
    ns = await createTestNamespace('argocd');
    const routing = await createTestNamespace('argocd-routing');
    op = await startTestOperator(kc, { routingNamespace: routing, watchNamespaces: [ns] });
    const create = (plural: string, kind: string, name: string, spec: object) =>
      resource(plural, ns).create({ apiVersion: API_VERSION, kind, metadata: { name }, spec });
    await createSecret(kc, ns, 'ok-key', 'sk-proj-argocdargocdargocd00001');
    await create('accounts', 'Account', 'account', { plan: 'enterprise' });
    await create('workspaces', 'Workspace', 'main', { default: true });
    await create('guardrails', 'Guardrail', 'g', { budget: { limitUsd: 5 } });
    await create('gatewayapikeys', 'GatewayAPIKey', 'live-key', { hash: 'c'.repeat(64) });
    await create('gatewayapikeys', 'GatewayAPIKey', 'expired-key', {
      hash: 'd'.repeat(64),
      expiresAt: '2020-01-01T00:00:00Z',
    });
    await create('byokcredentials', 'BYOKCredential', 'ok', { provider: 'openai', secretRef: { name: 'ok-key' } });
    await create('byokcredentials', 'BYOKCredential', 'off', {
      provider: 'openai',
      secretRef: { name: 'ok-key' },
      disabled: true,
    });
    await create('byokcredentials', 'BYOKCredential', 'missing', {
      provider: 'openai',
      secretRef: { name: 'no-such-secret' },
    });
    for (const [plural, name] of [
      ['accounts', 'account'],
      ['workspaces', 'main'],
      ['guardrails', 'g'],
      ['gatewayapikeys', 'live-key'],
      ['gatewayapikeys', 'expired-key'],
      ['byokcredentials', 'ok'],
      ['byokcredentials', 'off'],
    ] as const) {
      live[name] = await resource(plural, ns).waitReady(name, 'True');
    }
    live.missing = await resource('byokcredentials', ns).waitReady('missing', 'False', 'SecretNotFound');
    live['expired-key'] = await until('expired key not live', async () => {
      const o = await resource('gatewayapikeys', ns).get('expired-key');
      return o.status?.live === false ? o : undefined;
    });
  }, 60_000);
  afterAll(async () => {
    await op?.op.stop();
  });

  test('argocd-cm.yaml carries the same script for each of the five kinds', () => {
    const cm = parse(readFileSync(join(docs, 'argocd-cm.yaml'), 'utf8')) as { data: Record<string, string> };
    expect(Object.keys(cm.data).sort()).toEqual(
      KINDS.map((k) => `resource.customizations.health.byok.gateway.dev_${k}`).sort(),
    );
    for (const value of Object.values(cm.data)) expect(value).toBe(script);
  });

  test('Ready objects of all five kinds are Healthy', async () => {
    for (const name of ['account', 'main', 'g', 'live-key', 'ok']) {
      expect({ name, ...(await health(live[name]!)) }).toMatchObject({ name, status: 'Healthy' });
    }
  });

  test('a credential whose Secret is missing is Degraded with the reason', async () => {
    const hs = await health(live.missing!);
    expect(hs.status).toBe('Degraded');
    expect(hs.message).toMatch(/^SecretNotFound: /);
  });

  test('a Ready credential the upstream refuses (UpstreamHealthy=False) is Degraded with the upstream reason; upstreamDegrades=false keeps it Healthy', async () => {
    // The operator's Ready=True object, with the condition the health writer sets after a gateway reported 401s.
    const upstream = {
      type: 'UpstreamHealthy',
      status: 'False',
      reason: 'Unauthorized',
      message: 'the provider refused the key: 4 of 4 attempts answered 401',
      lastTransitionTime: '2026-11-26T00:00:00Z',
    };
    const withCondition = (o: Obj, c: typeof upstream): Obj => ({
      ...o,
      status: { ...o.status, conditions: [...(o.status?.conditions ?? []), c as never] },
    });
    const refused = withCondition(live.ok!, upstream);
    expect(await health(refused)).toEqual({
      status: 'Degraded',
      message: `Upstream Unauthorized: ${upstream.message}`,
    });
    const optedOut = script.replace('local upstreamDegrades = true', 'local upstreamDegrades = false');
    expect(optedOut).not.toBe(script);
    expect(await health(refused, optedOut)).toEqual({
      status: 'Healthy',
      message: `Upstream Unauthorized: ${upstream.message}`,
    });
    // Serving (or no report yet) stays Healthy; a disabled credential stays Suspended whatever its upstream said.
    expect(
      (await health(withCondition(live.ok!, { ...upstream, status: 'True', reason: 'Serving', message: 'ok' }))).status,
    ).toBe('Healthy');
    expect((await health(withCondition(live.off!, upstream))).status).toBe('Suspended');
  });

  test('a disabled credential and an expired API key are Suspended', async () => {
    expect(await health(live.off!)).toEqual({ status: 'Suspended', message: 'Disabled: never used for routing' });
    expect(await health(live['expired-key']!)).toEqual({
      status: 'Suspended',
      message: 'Not live (disabled or expired)',
    });
  });

  test('Progressing before the first reconcile and while status lags a spec change', async () => {
    await op!.op.stop();
    op = undefined;
    const fresh = await resource('byokcredentials', ns).create(credential('fresh', withSecret('ok-key')));
    expect((await health(fresh)).status).toBe('Progressing');
    await resource('byokcredentials', ns).update('ok', (o) => {
      o.spec = { ...o.spec, isRequired: true };
    });
    const changed = await resource('byokcredentials', ns).get('ok');
    expect(changed.metadata.generation).toBeGreaterThan(changed.status!.observedGeneration as number);
    expect(await health(changed)).toEqual({
      status: 'Progressing',
      message: `Waiting for the byok operator to observe generation ${changed.metadata.generation}`,
    });
  });
});
