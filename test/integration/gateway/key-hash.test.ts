// A copied gateway-key hash never takes over the key. The hash is public (the CLI prints it, GitOps
// repos and credential filters hold it); a tenant applying a GatewayAPIKey with another account's hash used to have
// the victim's requests, made with the victim's own secret key, routed through its own credentials when its
// namespace sorted first. Real apiserver → operator → projected config → gateway → loopback upstreams: the copy
// is Ready=False Conflicting with a Warning Event, a filter naming the hash in the copier's account resolves
// nothing, and the victim's prompt reaches the victim's upstream whether the copier's namespace sorts first or last.

import { createHash } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { EventsV1Api } from '@kubernetes/client-node';
import { parseEgressAllowList } from '../../../src/domain/egress.ts';
import { type RunningGateway, startGateway } from '../../../src/gateway/index.ts';
import { type Projector, startProjector } from '../../../src/kube/projector.ts';
import { API_VERSION } from '../../../src/schema/resources.ts';
import { loadRoutingConfig } from '../../../src/sdk/index.ts';
import { endpoint, writeCatalog } from '../../support/catalog.ts';
import { stopStack, untilCompiled } from '../../support/compiled.ts';
import { createTestNamespace, rejection, testKubeConfig } from '../../support/kube.ts';
import { type CapturedOperator, createSecret, resource, startTestOperator } from '../../support/operator.ts';
import { createAccountNamespace } from '../../support/tenant.ts';
import { sleep, until } from '../../support/until.ts';
import { startUpstreams, type Upstreams } from '../../support/upstreams.ts';

const kc = testKubeConfig();
const VICTIM_KEY = 'sk-byok-gw-v1-victim-0123456789abcdef0123456789abcdef';
const VICTIM_HASH = createHash('sha256').update(VICTIM_KEY).digest('hex');
const VICTIM_UPSTREAM_KEY = 'sk-victim-openai-0001';
const ATTACKER_AZURE_KEY = 'az-attacker-resource-key';
const PROMPT = 'the victim prompt 7f3e: quarterly numbers, confidential';
const EARLY_HASH = createHash('sha256').update('sk-byok-gw-v1-early-key').digest('hex');
const OTHER_ACCOUNT =
  "this hash is already held by another account's key (the key that named a hash first holds it): this key is not compiled and the gateway never routes it to this account";
const LOOPBACK_ALLOWED = parseEgressAllowList(['127.0.0.1/32']);

describe('a gateway-key hash copied into another account', () => {
  // kh-a-* sorts before the victim's kh-m-*, kh-z-* after it.
  const ns = { victim: '', first: '', last: '' };
  let routingNs = '';
  let run: CapturedOperator;
  let up: Upstreams;
  let projector: Projector;
  let gw: RunningGateway;
  const root = mkdtempSync(join(tmpdir(), 'byok-int-keyhash-'));
  const dirs = { config: join(root, 'routing'), bundles: join(root, 'bundles'), key: join(root, 'key') };

  const create = (plural: string, namespace: string, kind: string, name: string, spec: Record<string, unknown>) =>
    resource(plural, namespace).create({ apiVersion: API_VERSION, kind, metadata: { name }, spec });
  /** A default workspace and one credential whose upstream tells the accounts apart on the wire. */
  const account = async (namespace: string, provider: 'openai' | 'azure', payload: string) => {
    await create('workspaces', namespace, 'Workspace', 'main', { default: true });
    await createSecret(kc, namespace, 'upstream-key', payload);
    await create('byokcredentials', namespace, 'BYOKCredential', 'upstream', {
      provider,
      secretRef: { name: 'upstream-key' },
    });
  };
  /** The victim's chat completion, and the upstream hits it caused. */
  const victimRequest = async () => {
    const before = up.hits.length;
    const res = await fetch(`${gw.url}/api/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${VICTIM_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4.1', messages: [{ role: 'user', content: PROMPT }] }),
    });
    await res.text();
    return { status: res.status, hits: up.hits.slice(before).map((h) => [h.path, h.auth]) };
  };
  /** Until the gateway serves what the operator last projected. */
  const gatewayCaughtUp = async () => {
    await until(
      'the gateway on the projected config',
      async () => {
        await projector.sync();
        return gw.routing.current()?.version === loadRoutingConfig(dirs.config).version;
      },
      30_000,
      100,
    );
  };
  const warningEvent = (namespace: string, name: string) =>
    until(
      `a Warning Conflicting Event on ${namespace}/${name}`,
      async () => {
        const events = await kc.makeApiClient(EventsV1Api).listNamespacedEvent({ namespace });
        return events.items.find(
          (e) =>
            e.regarding?.name === name &&
            e.regarding.kind === 'GatewayAPIKey' &&
            e.type === 'Warning' &&
            e.reason === 'Conflicting',
        );
      },
      15_000,
      200,
    );

  beforeAll(async () => {
    up = await startUpstreams();
    ns.victim = await createAccountNamespace('kh-m');
    ns.first = await createAccountNamespace('kh-a');
    ns.last = await createAccountNamespace('kh-z');
    routingNs = await createTestNamespace('kh-routing');
    run = await startTestOperator(kc, {
      routingNamespace: routingNs,
      watchNamespaces: [ns.victim, ns.first, ns.last],
      compile: { coalesceMs: 10 },
      gatewaySlots: { routing: 0, bundles: 8 },
      egress: LOOPBACK_ALLOWED,
    });
    // A key older than the victim's, for the rotation below: by age alone it would win any hash it moves to.
    await create('gatewayapikeys', ns.last, 'GatewayAPIKey', 'early', { hash: EARLY_HASH });
    await sleep(1100);
    await account(ns.victim, 'openai', VICTIM_UPSTREAM_KEY);
    await create('gatewayapikeys', ns.victim, 'GatewayAPIKey', 'victim', { hash: VICTIM_HASH });
    await resource('gatewayapikeys', ns.victim).waitReady('victim', 'True');

    writeCatalog(join(root, 'catalog.json'), [
      {
        model: 'openai/gpt-4.1',
        endpoints: [
          endpoint(up, 'openai', { upstream: { model: 'gpt-4.1' } }),
          endpoint(up, 'azure', {
            upstream: {
              baseUrl: `${up.base}/azure/unused`,
              model: 'gpt-4.1',
              azureOpenAiUrl: `${up.base}/azure/{resource_name}/openai/v1`,
            },
          }),
        ],
      },
    ]);
    projector = startProjector({
      kubeConfig: kc,
      routingNamespace: routingNs,
      configDir: dirs.config,
      bundleDir: dirs.bundles,
      keyDir: dirs.key,
      pollMs: 100,
    });
    await untilCompiled(projector, dirs.config, ns.victim, 1);
    // The credential and the key may land in two compiles: wait for the one that carries the key.
    await until(
      "the victim's key compiled",
      async () => {
        await projector.sync();
        return loadRoutingConfig(dirs.config).apiKey(VICTIM_HASH)?.account.namespace === ns.victim;
      },
      30_000,
      100,
    );
    gw = await startGateway({
      configDir: dirs.config,
      bundleDir: dirs.bundles,
      keyDir: dirs.key,
      catalogFile: join(root, 'catalog.json'),
      host: '127.0.0.1',
      port: 0,
      upstreamCaPem: up.caPem,
      pollMs: 100,
      egress: LOOPBACK_ALLOWED,
    });
    expect(await victimRequest()).toEqual({
      status: 200,
      hits: [['/openai/v1/chat/completions', VICTIM_UPSTREAM_KEY]],
    });
  }, 90_000);

  afterAll(() => stopStack({ gw, projector, run, up }, root));

  for (const where of ['first', 'last'] as const) {
    test(`the copier's namespace sorts ${where}: its key is Conflicting with an Event, and the victim's requests stay the victim's`, async () => {
      const copier = ns[where];
      // creationTimestamp has one-second resolution: the copy is plainly the newer key.
      await sleep(1100);
      await account(copier, 'azure', JSON.stringify([{ api_key: ATTACKER_AZURE_KEY, resource_name: 'attacker-res' }]));
      await create('gatewayapikeys', copier, 'GatewayAPIKey', 'copied', { hash: VICTIM_HASH });
      // A filter naming the hash in the copier's account resolves nothing: the copy is not a live key of it.
      await createSecret(kc, copier, 'filtered-key', 'sk-attacker-filtered-0001');
      await create('byokcredentials', copier, 'BYOKCredential', 'filtered', {
        provider: 'openai',
        secretRef: { name: 'filtered-key' },
        allowedApiKeyHashes: [VICTIM_HASH],
      });

      const key = await resource('gatewayapikeys', copier).waitReady('copied', 'False', 'Conflicting');
      const ready = key.status!.conditions!.find((c) => c.type === 'Ready')!;
      expect(ready.message).toBe(OTHER_ACCOUNT);
      expect((await warningEvent(copier, 'copied')).note).toBe(OTHER_ACCOUNT);
      await resource('byokcredentials', copier).waitReady('filtered', 'False', 'UnknownApiKeyHash');
      expect(
        (await resource('gatewayapikeys', ns.victim).get('victim')).status?.conditions?.find((c) => c.type === 'Ready')
          ?.status,
      ).toBe('True');

      // The copier's account is compiled (its own credential) without the hash, and the gateway has loaded it.
      await untilCompiled(projector, dirs.config, copier, 1);
      await gatewayCaughtUp();
      const loaded = gw.routing.current()!;
      expect(loaded.accounts.get(copier)!.apiKeys.filter((k) => k.hash !== EARLY_HASH)).toEqual([]);
      expect(loaded.apiKey(VICTIM_HASH)?.account.namespace).toBe(ns.victim);
      for (let i = 0; i < 4; i++)
        expect(await victimRequest()).toEqual({
          status: 200,
          hits: [['/openai/v1/chat/completions', VICTIM_UPSTREAM_KEY]],
        });
      expect(up.hits.some((h) => h.auth.includes(ATTACKER_AZURE_KEY) || h.auth === 'sk-attacker-filtered-0001')).toBe(
        false,
      );
    }, 60_000);
  }

  test("a key older than the victim's rotated onto its hash is Conflicting: it named the hash last", async () => {
    await resource('gatewayapikeys', ns.last).update('early', (k) => {
      k.spec = {
        ...k.spec,
        hash: VICTIM_HASH,
        previousHash: EARLY_HASH,
        previousHashExpiresAt: new Date(Date.now() + 3_600_000).toISOString(),
      };
    });
    const early = await resource('gatewayapikeys', ns.last).waitReady('early', 'False', 'Conflicting');
    expect(early.status!.conditions!.find((c) => c.type === 'Ready')!.message).toBe(OTHER_ACCOUNT);
    const victim = await resource('gatewayapikeys', ns.victim).get('victim');
    expect(victim.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
    // The claims the operator recorded: the victim's from its creation, the rotated key's from the rotation.
    const claim = (k: typeof victim) =>
      Date.parse(
        ((k.status?.hashClaims ?? []) as Array<{ hash: string; since: string }>).find((c) => c.hash === VICTIM_HASH)
          ?.since ?? '',
      );
    const rotated = await until('the rotated claim recorded', async () => {
      const k = await resource('gatewayapikeys', ns.last).get('early');
      return Number.isNaN(claim(k)) ? undefined : k;
    });
    expect(claim(rotated)).toBeGreaterThan(claim(victim));
    expect(Date.parse(String(rotated.metadata!.creationTimestamp))).toBeLessThan(
      Date.parse(String(victim.metadata!.creationTimestamp)),
    );
    // Nor can it then pass for a key never rotated (held since its creation): previousHash cannot be removed.
    const cleared = await rejection(
      resource('gatewayapikeys', ns.last).update('early', (k) => {
        const { previousHash: _h, previousHashExpiresAt: _e, ...rest } = k.spec!;
        k.spec = rest;
      }),
    );
    expect(cleared.code).toBe(422);
    expect(cleared.message).toContain('previousHash cannot be removed');
    await gatewayCaughtUp();
    expect(gw.routing.current()!.apiKey(VICTIM_HASH)?.account.namespace).toBe(ns.victim);
    expect(await victimRequest()).toEqual({
      status: 200,
      hits: [['/openai/v1/chat/completions', VICTIM_UPSTREAM_KEY]],
    });
  }, 60_000);

  test('the holder deleted, the oldest copy holds the hash; a re-created key is then the newer one and Conflicting', async () => {
    // Documented: a hash belongs to its oldest live object, so deleting a key releases its hash to the next holder.
    await resource('gatewayapikeys', ns.victim).delete('victim');
    await resource('gatewayapikeys', ns.first).waitReady('copied', 'True');
    await resource('gatewayapikeys', ns.last).waitReady('copied', 'False', 'Conflicting');
    await sleep(1100);
    await create('gatewayapikeys', ns.victim, 'GatewayAPIKey', 'victim', { hash: VICTIM_HASH });
    await resource('gatewayapikeys', ns.victim).waitReady('victim', 'False', 'Conflicting');
    await resource('byokcredentials', ns.first).waitReady('filtered', 'True');
    await until(
      'the hash compiled into the oldest holder alone',
      async () => {
        await gatewayCaughtUp();
        const loaded = gw.routing.current()!;
        return loaded.apiKey(VICTIM_HASH)?.account.namespace === ns.first &&
          loaded.accounts.get(ns.victim)!.apiKeys.length === 0
          ? loaded
          : undefined;
      },
      30_000,
      200,
    );
  }, 60_000);
});
