// The gateway and the spend ledger together, as the CLI wires them (openGatewaySpendGate): requests through the
// real operator → projected config → gateway → loopback upstream are metered into the embedded ledger, a guardrail
// budget that includes BYOK blocks at its limit before any upstream is called, the BYOK fee inside the free
// allowance is 0, and a restart from the ledger's snapshot keeps the month (the budget stays blocked).

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import pino from 'pino';
import { openGatewaySpendGate } from '../../../src/cli/gateway-ledger.ts';
import { createGatewayMetrics, type RunningGateway, startGateway } from '../../../src/gateway/index.ts';
import { type Projector, startProjector } from '../../../src/kube/projector.ts';
import type { LedgerSpendGate } from '../../../src/ledger/spend-gate.ts';
import {
  account,
  asDefault,
  credential,
  gatewayKey,
  guardrail,
  keyHash,
  secret,
  withBudget,
  withGuardrail,
  withSecret,
  withSpec,
  workspace,
} from '../../support/builders.ts';
import { gpt4o, writeCatalog } from '../../support/catalog.ts';
import { createTestNamespace, testKubeConfig } from '../../support/kube.ts';
import { type CapturedOperator, startTestOperator } from '../../support/operator.ts';
import { createTenant } from '../../support/tenant.ts';
import { until } from '../../support/until.ts';
import { startUpstreams, type Upstreams } from '../../support/upstreams.ts';

const kc = testKubeConfig();
const KEY = 'sk-gw-metering-0123456789abcdef0123';

describe('gateway metered by the embedded spend ledger', () => {
  let ns = '';
  let run: CapturedOperator;
  let up: Upstreams;
  let projector: Projector;
  let gw: RunningGateway | undefined;
  let gate: LedgerSpendGate | undefined;
  const root = mkdtempSync(join(tmpdir(), 'byok-int-metering-'));
  const dirs = { config: join(root, 'routing'), bundles: join(root, 'bundles'), key: join(root, 'key') };
  const snapshot = join(root, 'ledger.json');
  const log = pino({ level: 'silent' });

  const open = async () => {
    const metrics = createGatewayMetrics({ defaultMetrics: false });
    gate = await openGatewaySpendGate({ snapshotPath: snapshot, registry: metrics.registry, logger: log });
    gw = await startGateway({
      configDir: dirs.config,
      bundleDir: dirs.bundles,
      keyDir: dirs.key,
      catalogFile: join(root, 'catalog.json'),
      host: '127.0.0.1',
      port: 0,
      upstreamCaPem: up.caPem,
      spendGate: gate,
      metrics,
      pollMs: 100,
      logger: log,
    });
  };
  const close = async () => {
    await gw?.close();
    await gate?.close();
  };
  // max_tokens 500: admission reserves the prompt's 86 bytes as tokens plus 500 output tokens (0.005215 USD) against
  // the 0.02 USD budget; without it, the reservation (no context length in this catalog: 10M output tokens) would not
  // fit at all.
  const chat = async (maxTokens = 500) => {
    const before = up.hits.length;
    const res = await fetch(`${gw!.url}/api/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'openai/gpt-4o',
        max_tokens: maxTokens,
        messages: [{ role: 'user', content: 'hi' }],
      }),
    });
    return { status: res.status, json: (await res.json()) as Record<string, any>, hits: up.hits.length - before };
  };

  beforeAll(async () => {
    up = await startUpstreams();
    ns = await createTestNamespace('gw-meter');
    const routingNs = await createTestNamespace('gw-meter-routing');
    run = await startTestOperator(kc, {
      routingNamespace: routingNs,
      watchNamespaces: [ns],
      compile: { coalesceMs: 10 },
    });
    await createTenant(ns, {
      account: account('acct', (a) => void (a.spec.plan = 'pay-as-you-go')),
      workspaces: [workspace('main', asDefault())],
      // 0.02 USD counting BYOK: each request below lists at 0.0075 USD (1000 prompt + 500 completion tokens).
      guardrails: [
        guardrail('tight', withBudget({ limitUsd: 0.02, resetInterval: 'monthly', includeByokInBudgets: true })),
      ],
      gatewayKeys: [gatewayKey('k', keyHash(KEY), withGuardrail('tight'))],
      secrets: [secret('oa-key', 'sk-metering-openai-aaaaaaaa')],
      credentials: [credential('oa', withSecret('oa-key'), withSpec({ isByokOnly: true }))],
    });
    writeCatalog(join(root, 'catalog.json'), [gpt4o(up)]);
    projector = startProjector({
      kubeConfig: kc,
      routingNamespace: routingNs,
      configDir: dirs.config,
      bundleDir: dirs.bundles,
      keyDir: dirs.key,
      pollMs: 100,
    });
    await until(
      'the compiled credential and guardrail',
      async () => {
        await projector.sync();
        try {
          const { loadRoutingConfig } = await import('../../../src/sdk/index.ts');
          const account = loadRoutingConfig(dirs.config).accounts.get(ns);
          return account?.credentials.length === 1 && account.apiKeys[0]?.guardrailId !== null;
        } catch {
          return false;
        }
      },
      30_000,
      200,
    );
    await open();
  }, 60_000);

  afterAll(async () => {
    await close();
    await projector?.stop();
    await run?.op.stop();
    await up?.close();
    rmSync(root, { recursive: true, force: true });
  });

  test('BYOK requests inside the free allowance pay no fee and count toward a budget that includes BYOK, which then blocks before any upstream', async () => {
    // A request whose maximum cost cannot fit is refused before any upstream, naming the guardrail and what is left.
    const tooBig = await chat(4000);
    expect(tooBig.status).toBe(402);
    expect(tooBig.hits).toBe(0);
    expect(tooBig.json.error.message).toMatch(
      /^request over budget: this request would need up to 0\.04\d+ USD and this month's \(UTC\) monthly budget of guardrail "tight" has 0\.02 USD left \(0 of 0\.02 USD counted, BYOK included\); a max_tokens of at most 19\d\d would fit, or wait: /,
    );
    expect(tooBig.json.error.metadata.reason).toBe('request_over_budget');
    // When to try again: the end of the UTC month, in the message and the metadata.
    const monthEnd = new Date(Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth() + 1, 1)).toISOString();
    expect(tooBig.json.error.metadata.budget.resets_at).toBe(monthEnd);
    expect(tooBig.json.error.message).toContain(`it resets at ${monthEnd.replace('.000Z', 'Z')}`);
    expect(tooBig.json.error.metadata.budget).toMatchObject({
      name: 'tight',
      interval: 'monthly',
      remaining_micros: 20_000,
      limit_micros: 20_000,
    });
    const served = async (maxTokens?: number) => {
      const r = await chat(maxTokens);
      expect([r.status, r.status === 200 ? '' : JSON.stringify(r.json)]).toEqual([200, '']);
      expect(r.hits).toBe(1);
      const id = r.json.id as string;
      await until('the metered generation record', async () => {
        const g = (await (
          await fetch(`${gw!.url}/api/v1/generation?id=${id}`, { headers: { authorization: `Bearer ${KEY}` } })
        ).json()) as { data?: { fee_micros: number | null; list_cost_micros: number } };
        return g.data?.fee_micros === 0 && g.data.list_cost_micros === 7500;
      });
    };
    // The ids the embedded ledger remembers for exactly-once, as /metrics shows them: one more per record (a BYOK
    // request inside the free allowance writes no fee).
    const idsHeld = async () => {
      const text = await gw!.metrics.registry.getSingleMetricAsString('byok_ledger_exactly_once_ids');
      return Number(/^byok_ledger_exactly_once_ids (\d+)$/m.exec(text)?.[1]);
    };
    await served();
    const afterOne = await idsHeld();
    expect([afterOne, Number.isInteger(afterOne) && afterOne >= 1]).toEqual([afterOne, true]);
    await served();
    expect(await idsHeld()).toBe(afterOne + 1);
    // Counted 0.015 of 0.02: a request reserving about 0.005 USD no longer fits (before reservations it was admitted
    // and overshot the limit by its own cost); a smaller max_tokens does.
    const noRoom = await chat();
    expect(noRoom.status).toBe(402);
    expect(noRoom.hits).toBe(0);
    expect(noRoom.json.error.metadata.budget).toMatchObject({
      counted_micros: 15_000,
      remaining_micros: 5000,
      held_micros: 0,
    });
    expect(noRoom.json.error.message).toMatch(
      /^request over budget: this request would need up to 0\.005215 USD and this month's \(UTC\) monthly budget of guardrail "tight" has 0\.005 USD left/,
    );
    // The max_tokens that fits what is left: 0.005 USD less the prompt's bound (86 bytes at 2.5 USD/M), at 10 USD/M.
    expect(noRoom.json.error.metadata.fits_max_tokens).toBe(478);
    expect(noRoom.json.error.message).toContain('a max_tokens of at most 478 would fit');
  });

  test('a restart from the embedded ledger snapshot keeps the month: the budget stays blocked', async () => {
    await close();
    await open();
    const r = await chat();
    expect(r.status).toBe(402);
    expect(r.hits).toBe(0);
  });
});
