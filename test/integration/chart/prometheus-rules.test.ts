// The chart's PrometheusRule, rendered by helm, checked and unit-tested with promtool (built from the Prometheus
// Go module by hack/promtool/build.sh), and every metric the rules and the Grafana dashboard query is one the
// operator or the API server actually registers.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, test } from '@jest/globals';
import Fastify from 'fastify';
import pino from 'pino';
import { Registry } from 'prom-client';
import { parseAllDocuments, stringify } from 'yaml';
import { registerApiMetrics } from '../../../src/api/metrics.ts';
import { createEmbeddedLedger, createSpendGate } from '../../../src/ledger/index.ts';
import { createCompilePipeline } from '../../../src/operator/compile/pipeline.ts';
import { createOperatorMetrics, registerCredentialReadiness } from '../../../src/operator/metrics.ts';
import { testKubeConfig } from '../../support/kube.ts';

const run = promisify(execFile);
const repoRoot = join(import.meta.dirname, '..', '..', '..');
const chart = join(repoRoot, 'charts', 'byok-operator');
const dir = mkdtempSync(join(tmpdir(), 'prom-rules-'));
const NS = 'byok-system';

interface RuleGroup {
  name: string;
  rules: { alert?: string; expr: string }[];
}

async function promtoolPath(): Promise<string> {
  if (process.env.BYOK_PROMTOOL) return process.env.BYOK_PROMTOOL;
  // Cached after the first build (.ci/run builds it before the tests).
  const { stdout } = await run('bash', [join(repoRoot, 'hack', 'promtool', 'build.sh')], { encoding: 'utf8', maxBuffer: 16 << 20 });
  return stdout.trim().split('\n').pop()!;
}

/** Metric names an expression reads: identifiers followed by a selector, histogram suffixes removed. */
function metricsIn(expr: string): string[] {
  return [...expr.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)\{/g)].map((m) => m[1]!.replace(/_(bucket|count|sum)$/, ''));
}

const alertTests = {
  rule_files: ['rules.yaml'],
  evaluation_interval: '1m',
  tests: [
    {
      name: 'credentials not Ready for 10 minutes, by reason, only in this release namespace',
      interval: '1m',
      input_series: [
        { series: `byok_credential_ready{namespace="${NS}",pod="a",status="True",reason="Ready"}`, values: '5x20' },
        { series: `byok_credential_ready{namespace="${NS}",pod="a",status="False",reason="SecretNotFound"}`, values: '2x20' },
        { series: `byok_credential_ready{namespace="${NS}",pod="b",status="False",reason="SecretNotFound"}`, values: '2x20' },
        { series: `byok_credential_ready{namespace="other",pod="c",status="False",reason="PayloadInvalid"}`, values: '3x20' },
      ],
      alert_rule_test: [
        { eval_time: '5m', alertname: 'ByokCredentialsNotReady', exp_alerts: [] },
        {
          eval_time: '12m',
          alertname: 'ByokCredentialsNotReady',
          exp_alerts: [{
            exp_labels: { severity: 'warning', reason: 'SecretNotFound' },
            exp_annotations: {
              summary: '2 BYOK credentials not Ready (SecretNotFound)',
              description: 'Credentials have not been Ready for 10m. List them with: kubectl get byok -A | grep -v True',
            },
          }],
        },
      ],
    },
    {
      name: 'compile errors that keep coming',
      interval: '1m',
      input_series: [{ series: `byok_compile_errors_total{namespace="${NS}",pod="a"}`, values: '0 0 0 1+1x20' }],
      alert_rule_test: [
        { eval_time: '4m', alertname: 'ByokCompileErrors', exp_alerts: [] },
        {
          eval_time: '12m',
          alertname: 'ByokCompileErrors',
          exp_alerts: [{
            exp_labels: { severity: 'warning' },
            exp_annotations: {
              summary: 'Routing config compiles are failing',
              description: "The leader's compile runs keep failing (retried with backoff); gateway pods keep the last written config. Check the operator's logs ('compile failed').",
            },
          }],
        },
      ],
    },
    {
      name: 'leader lost by every replica',
      interval: '1m',
      input_series: [
        { series: `leader_election_master_status{namespace="${NS}",name="byok-operator",pod="a"}`, values: '1x5 0x10' },
        { series: `leader_election_master_status{namespace="${NS}",name="byok-operator",pod="b"}`, values: '0x15' },
      ],
      alert_rule_test: [
        { eval_time: '5m', alertname: 'ByokLeaderMissing', exp_alerts: [] },
        { eval_time: '7m', alertname: 'ByokLeaderMissing', exp_alerts: [] },
        {
          eval_time: '10m',
          alertname: 'ByokLeaderMissing',
          exp_alerts: [{
            exp_labels: { severity: 'critical' },
            exp_annotations: { summary: 'No byok-operator replica holds the leader Lease', description: 'Without a leader no status is written and the routing config is not recompiled.' },
          }],
        },
      ],
    },
    {
      name: 'leader missing because no operator reports at all',
      interval: '1m',
      input_series: [{ series: `leader_election_master_status{namespace="other",name="byok-operator",pod="x"}`, values: '1x10' }],
      alert_rule_test: [{
        eval_time: '5m',
        alertname: 'ByokLeaderMissing',
        exp_alerts: [{
          exp_labels: { severity: 'critical' },
          exp_annotations: { summary: 'No byok-operator replica holds the leader Lease', description: 'Without a leader no status is written and the routing config is not recompiled.' },
        }],
      }],
    },
    {
      name: 'informer watch restarts on errors, not on periodic resyncs',
      interval: '1m',
      input_series: [
        { series: `byok_informer_watch_restarts_total{namespace="${NS}",pod="a",informer="byokcredentials",reason="error"}`, values: '0+1x20' },
        { series: `byok_informer_watch_restarts_total{namespace="${NS}",pod="a",informer="workspaces",reason="resync"}`, values: '0+10x20' },
      ],
      alert_rule_test: [{
        eval_time: '16m',
        alertname: 'ByokInformerRestarts',
        exp_alerts: [{
          exp_labels: { severity: 'warning', informer: 'byokcredentials' },
          exp_annotations: {
            summary: 'Informer byokcredentials keeps restarting its watch',
            description: 'More than 3 watch restarts (error or stale) in 15 minutes: the apiserver connection is unhealthy or the watch stalls.',
          },
        }],
      }],
    },
    {
      name: 'budgets closed after a ledger restart for more than a pass',
      interval: '1m',
      input_series: [{ series: `byok_ledger_reset_refusals_total{namespace="${NS}",pod="gw"}`, values: '0x3 2+3x10 32x10' }],
      alert_rule_test: [
        { eval_time: '3m', alertname: 'ByokLedgerResetPending', exp_alerts: [] },
        {
          eval_time: '8m',
          alertname: 'ByokLedgerResetPending',
          exp_alerts: [{
            exp_labels: { severity: 'critical' },
            exp_annotations: {
              summary: 'Budgets are closed after a ledger restart',
              description: "Gateways refuse budgeted requests (503) because the ledger's Redis restarted and the operator's leader has not rebuilt its counters from status.spend: check the operator's leader and its --ledger-redis-url.",
            },
          }],
        },
        // Rebuilt: no new refusals; quiet again once the 5-minute window has passed.
        { eval_time: '22m', alertname: 'ByokLedgerResetPending', exp_alerts: [] },
      ],
    },
    {
      // Rendered with gateway.routingSlots=32: the slots the gateway mounts are the alert's slots (one value).
      name: 'routing shards near the gateway slot count (80% of 32 = 25)',
      interval: '1m',
      input_series: [
        { series: `byok_routing_shards{namespace="${NS}",pod="a",kind="configmap"}`, values: '20x5 26x10' },
        { series: `byok_routing_shards{namespace="${NS}",pod="a",kind="bundle"}`, values: '40x15' },
      ],
      alert_rule_test: [
        { eval_time: '4m', alertname: 'ByokRoutingShardsNearGatewaySlots', exp_alerts: [] },
        { eval_time: '8m', alertname: 'ByokRoutingShardsNearGatewaySlots', exp_alerts: [] },
        {
          eval_time: '12m',
          alertname: 'ByokRoutingShardsNearGatewaySlots',
          exp_alerts: [{
            exp_labels: { severity: 'warning' },
            exp_annotations: {
              summary: 'Routing shards use 26 of 32 gateway slots',
              description: 'Gateway pods mount 32 shard slots; shards beyond them are not visible to the gateway. Raise gateway.routingSlots.',
            },
          }],
        },
      ],
    },
  ],
};

describe('chart monitoring: PrometheusRule and Grafana dashboard', () => {
  let promtool: string;
  let groups: RuleGroup[];
  let dashboard: { panels: { title: string; targets: { expr: string }[] }[] };

  beforeAll(async () => {
    promtool = await promtoolPath();
    const helm = join(process.env.BYOK_CONTROL_PLANE_BIN ?? '', 'helm');
    const rendered = (await run(helm, ['template', 'rel', chart, '-n', NS, '--kube-version', '1.34.4',
      '--set', 'monitoring.prometheusRule.enabled=true', '--set', 'monitoring.grafanaDashboard.enabled=true', '--set', 'gateway.routingSlots=32'], { encoding: 'utf8', maxBuffer: 64 << 20 })).stdout;
    const docs = parseAllDocuments(rendered).map((d) => d.toJS() as { kind?: string; spec?: { groups: RuleGroup[] }; data?: Record<string, string> } | null);
    groups = docs.find((d) => d?.kind === 'PrometheusRule')!.spec!.groups;
    dashboard = JSON.parse(docs.find((d) => d?.kind === 'ConfigMap' && d.data?.['byok-operator.json'])!.data!['byok-operator.json']!) as typeof dashboard;
    writeFileSync(join(dir, 'rules.yaml'), stringify({ groups }));
    writeFileSync(join(dir, 'tests.yaml'), stringify(alertTests));
  }, 900_000);

  test('promtool check rules accepts the rendered rules', async () => {
    const { stdout } = await run(promtool, ['check', 'rules', join(dir, 'rules.yaml')], { encoding: 'utf8' });
    expect(stdout).toMatch(/SUCCESS: 6 rules found/);
  });

  test('promtool test rules: each alert fires when it should and stays quiet otherwise', async () => {
    const result = await run(promtool, ['test', 'rules', join(dir, 'tests.yaml')], { encoding: 'utf8', cwd: dir }).catch((e: { stdout?: string; stderr?: string }) => {
      throw new Error(`promtool test rules failed:\n${e.stdout ?? ''}${e.stderr ?? ''}`);
    });
    expect(result.stdout).toMatch(/SUCCESS/);
    // Every alert the chart ships has a test.
    const tested = new Set(alertTests.tests.flatMap((t) => t.alert_rule_test.map((a) => a.alertname)));
    expect(groups.flatMap((g) => g.rules.map((r) => r.alert)).sort()).toEqual([...tested].sort());
  });

  test('rules and dashboard query only metrics the operator and API server register', async () => {
    const registry = new Registry();
    createOperatorMetrics(registry, { defaultMetrics: false });
    registerCredentialReadiness(registry, () => []);
    createCompilePipeline({ kubeConfig: testKubeConfig(), routingNamespace: NS, logger: pino({ level: 'silent' }), registry, source: { accountNamespaces: () => [], snapshot: () => { throw new Error('unused'); } } });
    const app = Fastify();
    registerApiMetrics(app, { registry });
    await app.close();
    // The gateway's spend gate (ledger metrics).
    await createSpendGate(createEmbeddedLedger(), { registry }).close();
    const registered = new Set(registry.getMetricsAsArray().map((m) => m.name));
    const queried = [...groups.flatMap((g) => g.rules.map((r) => r.expr)), ...dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr))].flatMap(metricsIn);
    expect(queried.length).toBeGreaterThan(15);
    expect([...new Set(queried)].filter((m) => !registered.has(m))).toEqual([]);
    expect(dashboard.panels.length).toBeGreaterThanOrEqual(10);
    expect(readFileSync(join(chart, 'dashboards', 'byok-operator.json'), 'utf8')).toContain('"uid": "byok-operator"');
  });
});
