// The chart's PrometheusRule, rendered by helm, checked and unit-tested with promtool (built from the Prometheus
// Go module by hack/promtool/build.sh), every metric the rules and the Grafana dashboard query is one the operator,
// the API server or the gateway actually registers, and the gateway is scraped on its ops port.
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
import { createGatewayMetrics } from '../../../src/gateway/metrics.ts';
import { createEmbeddedLedger, createSpendGate } from '../../../src/ledger/index.ts';
import { CompilePipeline } from '../../../src/operator/compile/pipeline.ts';
import { registerAccountDelivery } from '../../../src/operator/delivery-metrics.ts';
import { HealthStatusWriter } from '../../../src/operator/health/health-status-writer.ts';
import { createOperatorMetrics, registerCredentialReadiness } from '../../../src/operator/metrics.ts';
import { CHART_DIR, helmTemplate } from '../../support/helm.ts';
import { testKubeConfig } from '../../support/kube.ts';

const run = promisify(execFile);
const repoRoot = join(import.meta.dirname, '..', '..', '..');
const dir = mkdtempSync(join(tmpdir(), 'prom-rules-'));
const NS = 'byok-system';
// The chart's default runbook base (monitoring.prometheusRule.runbookBaseUrl); every alert links its own section.
const RUNBOOK = 'https://github.com/byok-operator/byok-operator/blob/main/docs/guide/alerts.md';
const GATEWAY_JOB = 'rel-byok-gateway';
const API_JOB = 'rel-byok-api';

interface RuleGroup {
  name: string;
  rules: { alert?: string; expr: string; annotations?: Record<string, string> }[];
}

type AlertTests = typeof alertTests;
/** The expected alerts with the runbook_url every rule carries (promtool compares all annotations). */
function withRunbooks(t: AlertTests): unknown {
  return {
    ...t,
    tests: t.tests.map((c) => ({
      ...c,
      alert_rule_test: c.alert_rule_test.map((a) => ({
        ...a,
        exp_alerts: (
          a.exp_alerts as { exp_labels: Record<string, string>; exp_annotations: Record<string, string> }[]
        ).map((e) => ({
          ...e,
          exp_annotations: { runbook_url: `${RUNBOOK}#${a.alertname.toLowerCase()}`, ...e.exp_annotations },
        })),
      })),
    })),
  };
}

async function promtoolPath(): Promise<string> {
  if (process.env.BYOK_PROMTOOL) return process.env.BYOK_PROMTOOL;
  // Cached after the first build (.ci/run builds it before the tests).
  const { stdout } = await run('bash', [join(repoRoot, 'hack', 'promtool', 'build.sh')], {
    encoding: 'utf8',
    maxBuffer: 16 << 20,
  });
  return stdout.trim().split('\n').pop()!;
}

/** A dashboard query as Grafana sends it: the variables replaced (All of pod/provider/model is the regex .*). */
function withVariables(expr: string): string {
  return expr
    .replaceAll('$namespace', NS)
    .replaceAll('$__range', '1d')
    .replaceAll(/\$(pod|provider|model)\b/g, '.*');
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
        {
          series: `byok_credential_ready{namespace="${NS}",pod="a",status="False",reason="SecretNotFound"}`,
          values: '2x20',
        },
        {
          series: `byok_credential_ready{namespace="${NS}",pod="b",status="False",reason="SecretNotFound"}`,
          values: '2x20',
        },
        {
          series: `byok_credential_ready{namespace="other",pod="c",status="False",reason="PayloadInvalid"}`,
          values: '3x20',
        },
      ],
      alert_rule_test: [
        { eval_time: '5m', alertname: 'ByokCredentialsNotReady', exp_alerts: [] },
        {
          eval_time: '12m',
          alertname: 'ByokCredentialsNotReady',
          exp_alerts: [
            {
              exp_labels: { severity: 'warning', reason: 'SecretNotFound' },
              exp_annotations: {
                summary: '2 BYOK credentials not Ready (SecretNotFound)',
                description:
                  'Credentials have not been Ready for 10m. List them with: kubectl get byok -A | grep -v True',
              },
            },
          ],
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
          exp_alerts: [
            {
              exp_labels: { severity: 'warning' },
              exp_annotations: {
                summary: 'Routing config compiles are failing',
                description:
                  "The leader's compile runs keep failing (retried with backoff); gateway pods keep the last written config. Check the operator's logs ('compile failed').",
              },
            },
          ],
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
          exp_alerts: [
            {
              exp_labels: { severity: 'critical' },
              exp_annotations: {
                summary: 'No byok-operator replica holds the leader Lease',
                description: 'Without a leader no status is written and the routing config is not recompiled.',
              },
            },
          ],
        },
      ],
    },
    {
      name: 'leader missing because no operator reports at all',
      interval: '1m',
      input_series: [
        { series: `leader_election_master_status{namespace="other",name="byok-operator",pod="x"}`, values: '1x10' },
      ],
      alert_rule_test: [
        {
          eval_time: '5m',
          alertname: 'ByokLeaderMissing',
          exp_alerts: [
            {
              exp_labels: { severity: 'critical' },
              exp_annotations: {
                summary: 'No byok-operator replica holds the leader Lease',
                description: 'Without a leader no status is written and the routing config is not recompiled.',
              },
            },
          ],
        },
      ],
    },
    {
      name: 'informer watch restarts on errors, not on periodic resyncs or the apiserver warming its cache',
      interval: '1m',
      input_series: [
        {
          series: `byok_informer_watch_restarts_total{namespace="${NS}",pod="a",informer="workspaces",reason="warming"}`,
          values: '0 6x20',
        },
        {
          series: `byok_informer_watch_restarts_total{namespace="${NS}",pod="a",informer="byokcredentials",reason="error"}`,
          values: '0+1x20',
        },
        {
          series: `byok_informer_watch_restarts_total{namespace="${NS}",pod="a",informer="workspaces",reason="resync"}`,
          values: '0+10x20',
        },
      ],
      alert_rule_test: [
        {
          eval_time: '16m',
          alertname: 'ByokInformerRestarts',
          exp_alerts: [
            {
              exp_labels: { severity: 'warning', informer: 'byokcredentials' },
              exp_annotations: {
                summary: 'Informer byokcredentials keeps restarting its watch',
                description:
                  'More than 3 watch restarts (error or stale) in 15 minutes: the apiserver connection is unhealthy or the watch stalls.',
              },
            },
          ],
        },
      ],
    },
    {
      name: 'budgets closed after a ledger restart for more than a pass',
      interval: '1m',
      input_series: [
        { series: `byok_ledger_reset_refusals_total{namespace="${NS}",pod="gw"}`, values: '0x3 2+3x10 32x10' },
      ],
      alert_rule_test: [
        { eval_time: '3m', alertname: 'ByokLedgerResetPending', exp_alerts: [] },
        {
          eval_time: '8m',
          alertname: 'ByokLedgerResetPending',
          exp_alerts: [
            {
              exp_labels: { severity: 'critical' },
              exp_annotations: {
                summary: 'Budgets are closed after a ledger restart',
                description:
                  "Gateways refuse budgeted requests (503) because the ledger's Redis restarted and the operator's leader has not rebuilt its counters from status.spend: check the operator's leader and its --ledger-redis-url.",
              },
            },
          ],
        },
        // Rebuilt: no new refusals; quiet again once the 5-minute window has passed.
        { eval_time: '22m', alertname: 'ByokLedgerResetPending', exp_alerts: [] },
      ],
    },
    {
      name: 'upstream keys refused for 15 minutes, per tenant namespace and provider; a short rate-limit burst stays quiet',
      interval: '1m',
      input_series: [
        // Two operator replicas report the same counts; the tenant namespace arrives as exported_namespace.
        {
          series: `byok_credential_upstream_healthy{namespace="${NS}",pod="op-a",exported_namespace="tenant-a",provider="openai",reason="Unauthorized"}`,
          values: '0x5 2x30',
        },
        {
          series: `byok_credential_upstream_healthy{namespace="${NS}",pod="op-b",exported_namespace="tenant-a",provider="openai",reason="Unauthorized"}`,
          values: '0x5 2x30',
        },
        {
          series: `byok_credential_upstream_healthy{namespace="${NS}",pod="op-a",exported_namespace="tenant-a",provider="openai",reason="Serving"}`,
          values: '5x35',
        },
        {
          series: `byok_credential_upstream_healthy{namespace="${NS}",pod="op-a",exported_namespace="tenant-b",provider="groq",reason="RateLimited"}`,
          values: '0x5 1x5 0x25',
        },
        {
          series: `byok_credential_upstream_healthy{namespace="other",pod="op-c",exported_namespace="tenant-c",provider="mistral",reason="Unauthorized"}`,
          values: '4x35',
        },
      ],
      alert_rule_test: [
        { eval_time: '12m', alertname: 'ByokUpstreamKeysUnhealthy', exp_alerts: [] },
        {
          eval_time: '25m',
          alertname: 'ByokUpstreamKeysUnhealthy',
          exp_alerts: [
            {
              exp_labels: {
                severity: 'warning',
                exported_namespace: 'tenant-a',
                provider: 'openai',
                reason: 'Unauthorized',
              },
              exp_annotations: {
                summary: '2 openai credentials in tenant-a are UpstreamHealthy=False (Unauthorized)',
                description:
                  'The provider keeps refusing (Unauthorized: a revoked or wrong key, rotate it), rate limiting or failing these BYOK keys. List them with: kubectl get byok -n tenant-a',
              },
            },
          ],
        },
      ],
    },
    {
      name: 'gateway pods serving outdated credentials past 5 minutes',
      interval: '1m',
      input_series: [{ series: `byok_gateway_pods_stale{namespace="${NS}",pod="op-a"}`, values: '0x5 1x10 0x10' }],
      alert_rule_test: [
        { eval_time: '8m', alertname: 'ByokGatewayPodsStale', exp_alerts: [] },
        {
          eval_time: '12m',
          alertname: 'ByokGatewayPodsStale',
          exp_alerts: [
            {
              exp_labels: { severity: 'warning' },
              exp_annotations: {
                summary: '1 gateway pods serve outdated credentials',
                description:
                  "Gateway pods have not loaded the current credential versions of some accounts past the stale threshold. The operator's GatewayPodStale Events on the Accounts name the pods: check their projected volumes (bundle slots, Secrets they cannot read).",
              },
            },
          ],
        },
        { eval_time: '25m', alertname: 'ByokGatewayPodsStale', exp_alerts: [] },
      ],
    },
    {
      name: 'gateway pods not answering the status endpoint for 10 minutes',
      interval: '1m',
      input_series: [
        { series: `byok_gateway_pods_reporting{namespace="${NS}",pod="op-a",result="failed"}`, values: '0x5 1x15' },
        { series: `byok_gateway_pods_reporting{namespace="${NS}",pod="op-a",result="ok"}`, values: '3x20' },
      ],
      alert_rule_test: [
        { eval_time: '10m', alertname: 'ByokGatewayPodsNotReporting', exp_alerts: [] },
        {
          eval_time: '17m',
          alertname: 'ByokGatewayPodsNotReporting',
          exp_alerts: [
            {
              exp_labels: { severity: 'warning' },
              exp_annotations: {
                summary: '1 gateway pods do not answer the status endpoint',
                description:
                  "The operator's leader cannot read GET /byok/status of these pods (network policy, status token, or a pod that is not serving): their upstream health and delivery are not reported.",
              },
            },
          ],
        },
      ],
    },
    {
      name: 'a gateway pod left on an old routing config while the other moved on',
      interval: '1m',
      input_series: [
        {
          series: `byok_gateway_routing_config_info{namespace="${NS}",pod="gw-a",version="aaaa"}`,
          values: '1 1 1 stale',
        },
        {
          series: `byok_gateway_routing_config_info{namespace="${NS}",pod="gw-a",version="bbbb"}`,
          values: '_ _ _ 1x27',
        },
        {
          series: `byok_gateway_routing_config_info{namespace="${NS}",pod="gw-b",version="aaaa"}`,
          values: '1x19 stale',
        },
        { series: `byok_gateway_routing_config_info{namespace="${NS}",pod="gw-b",version="bbbb"}`, values: '_x20 1x9' },
      ],
      alert_rule_test: [
        // A rollout the pods follow within minutes does not fire.
        { eval_time: '10m', alertname: 'ByokGatewayRoutingVersionSkew', exp_alerts: [] },
        {
          eval_time: '15m',
          alertname: 'ByokGatewayRoutingVersionSkew',
          exp_alerts: [
            {
              exp_labels: { severity: 'warning' },
              exp_annotations: {
                summary: 'Gateway pods serve 2 different routing config versions',
                description:
                  "Some gateway pods have not loaded the current routing config for 10 minutes (kubelet has not projected it, or the pod rejects it: see byok_gateway_reloads_total and the pod's log).",
              },
            },
          ],
        },
        { eval_time: '25m', alertname: 'ByokGatewayRoutingVersionSkew', exp_alerts: [] },
      ],
    },
    {
      name: 'gateway pods rejecting new routing files',
      interval: '1m',
      input_series: [
        {
          series: `byok_gateway_reloads_total{namespace="${NS}",pod="gw-a",what="routing",result="error"}`,
          values: '0x5 1+1x10 11x40',
        },
        {
          series: `byok_gateway_reloads_total{namespace="${NS}",pod="gw-a",what="catalog",result="ok"}`,
          values: '0+1x55',
        },
      ],
      alert_rule_test: [
        { eval_time: '4m', alertname: 'ByokGatewayReloadsFailing', exp_alerts: [] },
        {
          eval_time: '13m',
          alertname: 'ByokGatewayReloadsFailing',
          exp_alerts: [
            {
              exp_labels: { severity: 'warning', what: 'routing' },
              exp_annotations: {
                summary: 'Gateway pods reject new routing files',
                description:
                  "Gateways keep their last good routing and log 'rejected; keeping the last good one': they serve stale routing or prices until the mounted files load. A routing config kubelet has not fully projected yet counts as result=pending, not here, unless it is still refused after 2 minutes.",
              },
            },
          ],
        },
        { eval_time: '45m', alertname: 'ByokGatewayReloadsFailing', exp_alerts: [] },
      ],
    },
    {
      name: 'an account undelivered for more than 15 minutes',
      interval: '1m',
      input_series: [
        { series: `byok_account_delivery_lag_seconds{namespace="${NS}",pod="op-a"}`, values: '0x5 0+60x30' },
      ],
      alert_rule_test: [
        { eval_time: '20m', alertname: 'ByokDeliveryLagging', exp_alerts: [] },
        {
          eval_time: '30m',
          alertname: 'ByokDeliveryLagging',
          exp_alerts: [
            {
              exp_labels: { severity: 'warning' },
              exp_annotations: {
                summary: "An account's current credentials have not reached every gateway pod for 24m 0s",
                description:
                  "Accounts stay Delivered=False (kubectl get accounts -A): a gateway pod does not load the new credential versions. See ByokGatewayPodsStale and the Accounts' GatewayPodStale Events.",
              },
            },
          ],
        },
      ],
    },
    {
      name: 'the spend ledger unreachable for 5 minutes',
      interval: '1m',
      input_series: [
        {
          series: `byok_ledger_unavailable_total{namespace="${NS}",pod="gw-a",op="admit"}`,
          values: '0x5 1+2x10 21x20',
        },
      ],
      alert_rule_test: [
        { eval_time: '4m', alertname: 'ByokLedgerUnavailable', exp_alerts: [] },
        {
          eval_time: '13m',
          alertname: 'ByokLedgerUnavailable',
          exp_alerts: [
            {
              exp_labels: { severity: 'critical' },
              exp_annotations: {
                summary: 'Gateways cannot reach the spend ledger',
                description:
                  "Budgeted requests are refused (503) while the ledger is unreachable and finished requests' spend waits in gateway memory (byok_ledger_pending_records) until it is back: check the ledger's Redis (ledger.redisUrl).",
              },
            },
          ],
        },
        { eval_time: '25m', alertname: 'ByokLedgerUnavailable', exp_alerts: [] },
      ],
    },
    {
      name: 'spend dropped by a gateway',
      interval: '1m',
      input_series: [{ series: `byok_ledger_records_dropped_total{namespace="${NS}",pod="gw-a"}`, values: '0x5 3x20' }],
      alert_rule_test: [
        { eval_time: '3m', alertname: 'ByokLedgerSpendDropped', exp_alerts: [] },
        {
          eval_time: '8m',
          alertname: 'ByokLedgerSpendDropped',
          exp_alerts: [
            {
              exp_labels: { severity: 'warning' },
              exp_annotations: {
                summary: 'Gateways dropped the spend of finished requests',
                description:
                  "A gateway's replay queue overflowed during a ledger outage (or the gateway stopped with records pending): budgets and fees miss that spend.",
              },
            },
          ],
        },
        { eval_time: '25m', alertname: 'ByokLedgerSpendDropped', exp_alerts: [] },
      ],
    },
    {
      // a catalog provider's count is metered as reported even past the request's bounds, so it must page
      // someone; a tenant endpoint's is clamped (nothing to do) and stays quiet.
      name: 'a catalog provider reports usage past the request bounds; a tenant endpoint clamped stays quiet',
      interval: '1m',
      input_series: [
        {
          series: `byok_gateway_usage_out_of_bounds_total{namespace="${NS}",pod="gw-a",upstream="tenant",bound="below"}`,
          values: '0+5x40',
        },
        {
          series: `byok_gateway_usage_out_of_bounds_total{namespace="${NS}",pod="gw-a",upstream="catalog",bound="above"}`,
          values: '0x10 1x30',
        },
        {
          series: `byok_gateway_usage_out_of_bounds_total{namespace="other",pod="gw-z",upstream="catalog",bound="below"}`,
          values: '0+1x40',
        },
      ],
      alert_rule_test: [
        { eval_time: '8m', alertname: 'ByokUpstreamUsageOutOfBounds', exp_alerts: [] },
        {
          eval_time: '15m',
          alertname: 'ByokUpstreamUsageOutOfBounds',
          exp_alerts: [
            {
              exp_labels: { severity: 'warning', bound: 'above' },
              exp_annotations: {
                summary: 'A provider reported usage above what the requests could produce',
                description:
                  "Gateways metered a catalog provider's usage as reported although it lay outside the request's bounds (docs/ledger.md, \"What drives cost\"): budgets may pass their limit by the excess. A parameter the reservation does not price, or a provider counting differently: compare the generation records with the provider's bill.",
              },
            },
          ],
        },
        { eval_time: '35m', alertname: 'ByokUpstreamUsageOutOfBounds', exp_alerts: [] },
      ],
    },
    {
      name: 'a third of the requests refused by a workspace budget',
      interval: '1m',
      input_series: [
        {
          series: `byok_gateway_budget_refusals_total{namespace="${NS}",pod="gw-a",scope="workspace",interval="daily"}`,
          values: '0x5 0+10x20',
        },
        { series: `byok_gateway_requests_total{namespace="${NS}",pod="gw-a",status="402"}`, values: '0x5 0+10x20' },
        { series: `byok_gateway_requests_total{namespace="${NS}",pod="gw-a",status="200"}`, values: '0+20x25' },
      ],
      alert_rule_test: [
        { eval_time: '8m', alertname: 'ByokBudgetRefusalSpike', exp_alerts: [] },
        {
          eval_time: '20m',
          alertname: 'ByokBudgetRefusalSpike',
          exp_alerts: [
            {
              exp_labels: { severity: 'warning', scope: 'workspace' },
              exp_annotations: {
                summary: '100 requests refused by workspace budgets in 10 minutes',
                description:
                  'More than 25% of gateway requests are refused with 402 by budgets: a limit set too low, or a client looping on a refused request. byok_gateway_budget_refusals_total has the scope and window.',
              },
            },
          ],
        },
      ],
    },
    {
      name: 'budget refusals that are few, or a small share of the traffic, stay quiet',
      interval: '1m',
      input_series: [
        // Every request refused, but only 5 in 10 minutes.
        {
          series: `byok_gateway_budget_refusals_total{namespace="${NS}",pod="gw-a",scope="guardrail",interval="monthly"}`,
          values: '0+0.5x30',
        },
        { series: `byok_gateway_requests_total{namespace="${NS}",pod="gw-a",status="402"}`, values: '0+0.5x30' },
      ],
      alert_rule_test: [{ eval_time: '25m', alertname: 'ByokBudgetRefusalSpike', exp_alerts: [] }],
    },
    {
      name: 'many budget refusals in heavy traffic stay quiet',
      interval: '1m',
      input_series: [
        {
          series: `byok_gateway_budget_refusals_total{namespace="${NS}",pod="gw-a",scope="workspace",interval="daily"}`,
          values: '0+10x30',
        },
        { series: `byok_gateway_requests_total{namespace="${NS}",pod="gw-a",status="402"}`, values: '0+10x30' },
        { series: `byok_gateway_requests_total{namespace="${NS}",pod="gw-a",status="200"}`, values: '0+200x30' },
      ],
      alert_rule_test: [{ eval_time: '25m', alertname: 'ByokBudgetRefusalSpike', exp_alerts: [] }],
    },
    {
      // the projected routing config seen half-swapped twice in five minutes of normal use is counted as
      // result="pending" and must not page; only a rejection (result="error") does (test above).
      name: 'the normal projection race (reloads pending) stays quiet',
      interval: '1m',
      input_series: [
        {
          series: `byok_gateway_reloads_total{namespace="${NS}",pod="gw-a",what="routing",result="pending"}`,
          values: '0x2 1 1 2x40',
        },
        {
          series: `byok_gateway_reloads_total{namespace="${NS}",pod="gw-a",what="routing",result="ok"}`,
          values: '1x2 2 2 3x40',
        },
      ],
      alert_rule_test: [
        { eval_time: '10m', alertname: 'ByokGatewayReloadsFailing', exp_alerts: [] },
        { eval_time: '20m', alertname: 'ByokGatewayReloadsFailing', exp_alerts: [] },
      ],
    },
    {
      name: 'gateway 5xx above 5% of the requests for 10 minutes',
      interval: '1m',
      input_series: [
        { series: `byok_gateway_requests_total{namespace="${NS}",pod="gw-a",status="200"}`, values: '0+100x40' },
        { series: `byok_gateway_requests_total{namespace="${NS}",pod="gw-a",status="502"}`, values: '0x5 0+10x35' },
        { series: `byok_gateway_requests_total{namespace="other",pod="gw-z",status="503"}`, values: '0+1000x40' },
      ],
      alert_rule_test: [
        { eval_time: '12m', alertname: 'ByokGatewayErrorRatio', exp_alerts: [] },
        {
          eval_time: '25m',
          alertname: 'ByokGatewayErrorRatio',
          exp_alerts: [
            {
              exp_labels: { severity: 'critical' },
              exp_annotations: {
                summary: '9.091% of gateway requests answered 5xx',
                description:
                  'More than 5% of chat completion requests got a 5xx over 10 minutes (502: every attempt failed; 503: the ledger or the routing config is unavailable; 504: upstream timeouts). byok_gateway_requests_total has the status.',
              },
            },
          ],
        },
      ],
    },
    {
      name: 'gateway 5xx that are few (quiet traffic) or a small share stay quiet',
      interval: '1m',
      input_series: [
        // Half the requests fail, but only 10 in 10 minutes.
        { series: `byok_gateway_requests_total{namespace="${NS}",pod="gw-a",status="200"}`, values: '0+0.5x40' },
        { series: `byok_gateway_requests_total{namespace="${NS}",pod="gw-a",status="500"}`, values: '0+0.5x40' },
      ],
      alert_rule_test: [{ eval_time: '30m', alertname: 'ByokGatewayErrorRatio', exp_alerts: [] }],
    },
    {
      name: 'gateway 5xx at 2% of heavy traffic stay quiet',
      interval: '1m',
      input_series: [
        { series: `byok_gateway_requests_total{namespace="${NS}",pod="gw-a",status="200"}`, values: '0+98x40' },
        { series: `byok_gateway_requests_total{namespace="${NS}",pod="gw-a",status="502"}`, values: '0+2x40' },
      ],
      alert_rule_test: [{ eval_time: '30m', alertname: 'ByokGatewayErrorRatio', exp_alerts: [] }],
    },
    {
      name: 'time to first token p99 above 5 s for a busy provider; a provider with a few slow streams stays quiet',
      interval: '1m',
      input_series: [
        // openai: 30 streams a minute, 3 of them between 5 and 7.5 s: p99 = 7.25 s.
        ...[
          ['1', 27],
          ['5', 27],
          ['7.5', 30],
          ['10', 30],
          ['+Inf', 30],
        ].map(([le, n]) => ({
          series: `gen_ai_server_time_to_first_token_seconds_bucket{namespace="${NS}",pod="gw-a",gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="openai/gpt-5",le="${le}"}`,
          values: `0+${n}x40`,
        })),
        {
          series: `gen_ai_server_time_to_first_token_seconds_count{namespace="${NS}",pod="gw-a",gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="openai/gpt-5"}`,
          values: '0+30x40',
        },
        // groq: every stream slow, but one a minute (10 in 10 minutes).
        ...[
          ['1', 0],
          ['5', 0],
          ['7.5', 0],
          ['10', 1],
          ['+Inf', 1],
        ].map(([le, n]) => ({
          series: `gen_ai_server_time_to_first_token_seconds_bucket{namespace="${NS}",pod="gw-a",gen_ai_operation_name="chat",gen_ai_provider_name="groq",gen_ai_request_model="groq/llama",le="${le}"}`,
          values: `0+${n}x40`,
        })),
        {
          series: `gen_ai_server_time_to_first_token_seconds_count{namespace="${NS}",pod="gw-a",gen_ai_operation_name="chat",gen_ai_provider_name="groq",gen_ai_request_model="groq/llama"}`,
          values: '0+1x40',
        },
      ],
      alert_rule_test: [
        { eval_time: '10m', alertname: 'ByokGatewayTimeToFirstTokenHigh', exp_alerts: [] },
        {
          eval_time: '25m',
          alertname: 'ByokGatewayTimeToFirstTokenHigh',
          exp_alerts: [
            {
              exp_labels: { severity: 'warning', gen_ai_provider_name: 'openai' },
              exp_annotations: {
                summary: 'Time to first token p99 of openai streams is 7.25s',
                description:
                  'Over 10 minutes, 1% of openai streams waited longer than 5 s for their first token (failovers included): a slow provider or failovers before the serving attempt.',
              },
            },
          ],
        },
      ],
    },
    {
      name: 'a provider failing for everyone; rate limits, rejections and a few errors stay quiet',
      interval: '1m',
      input_series: [
        {
          series: `byok_gateway_attempts_total{namespace="${NS}",pod="gw-a",provider="openai",kind="byok",outcome="ok"}`,
          values: '0+50x40',
        },
        {
          series: `byok_gateway_attempts_total{namespace="${NS}",pod="gw-a",provider="openai",kind="byok",outcome="upstream_error"}`,
          values: '0x5 0+20x35',
        },
        {
          series: `byok_gateway_attempts_total{namespace="${NS}",pod="gw-a",provider="openai",kind="shared",outcome="timeout"}`,
          values: '0x5 0+10x35',
        },
        // Per-key trouble (ByokUpstreamKeysUnhealthy's business), not the provider's.
        {
          series: `byok_gateway_attempts_total{namespace="${NS}",pod="gw-a",provider="anthropic",kind="byok",outcome="ok"}`,
          values: '0+10x40',
        },
        {
          series: `byok_gateway_attempts_total{namespace="${NS}",pod="gw-a",provider="anthropic",kind="byok",outcome="rate_limited"}`,
          values: '0+50x40',
        },
        {
          series: `byok_gateway_attempts_total{namespace="${NS}",pod="gw-a",provider="anthropic",kind="byok",outcome="rejected"}`,
          values: '0+50x40',
        },
        // Every attempt fails, but one a minute.
        {
          series: `byok_gateway_attempts_total{namespace="${NS}",pod="gw-a",provider="mistral",kind="byok",outcome="upstream_error"}`,
          values: '0+1x40',
        },
      ],
      alert_rule_test: [
        { eval_time: '12m', alertname: 'ByokProviderErrorRatio', exp_alerts: [] },
        {
          eval_time: '25m',
          alertname: 'ByokProviderErrorRatio',
          exp_alerts: [
            {
              exp_labels: { severity: 'warning', provider: 'openai' },
              exp_annotations: {
                summary: '37.5% of openai attempts fail',
                description:
                  'More than 25% of the upstream attempts to openai (BYOK and shared keys together) ended in a 5xx, a timeout, a connection error or a broken stream over 10 minutes: the provider is failing, not one key. Requests fail over where a fallback exists.',
              },
            },
          ],
        },
      ],
    },
    {
      name: 'a gateway pod not scraped for 5 minutes; a pod restarting for 2 minutes stays quiet',
      interval: '1m',
      input_series: [
        { series: `up{namespace="${NS}",job="${GATEWAY_JOB}",pod="gw-a"}`, values: '1x5 0x20' },
        { series: `up{namespace="${NS}",job="${GATEWAY_JOB}",pod="gw-b"}`, values: '1x5 0x2 1x20' },
        { series: `up{namespace="${NS}",job="${API_JOB}",pod="api-a"}`, values: '0x25' },
      ],
      alert_rule_test: [
        { eval_time: '9m', alertname: 'ByokGatewayDown', exp_alerts: [] },
        {
          eval_time: '15m',
          alertname: 'ByokGatewayDown',
          exp_alerts: [
            {
              exp_labels: { severity: 'warning', namespace: NS, job: GATEWAY_JOB, pod: 'gw-a' },
              exp_annotations: {
                summary: 'Gateway pod gw-a cannot be scraped',
                description:
                  'Prometheus has not reached the ops port of this gateway pod for 5m: the pod is not serving, or a NetworkPolicy (networkPolicy.gatewayMetricsFrom) keeps Prometheus out.',
              },
            },
          ],
        },
        // Targets present (even down): not absent.
        { eval_time: '15m', alertname: 'ByokGatewayAbsent', exp_alerts: [] },
      ],
    },
    {
      name: 'no gateway target at all for 5 minutes',
      interval: '1m',
      input_series: [
        { series: `up{namespace="${NS}",job="${GATEWAY_JOB}",pod="gw-a"}`, values: '1x5 stale' },
        { series: `up{namespace="other",job="${GATEWAY_JOB}",pod="gw-z"}`, values: '1x20' },
      ],
      alert_rule_test: [
        { eval_time: '4m', alertname: 'ByokGatewayAbsent', exp_alerts: [] },
        {
          eval_time: '15m',
          alertname: 'ByokGatewayAbsent',
          exp_alerts: [
            {
              exp_labels: { severity: 'critical', namespace: NS, job: GATEWAY_JOB },
              exp_annotations: {
                summary: `No gateway pod is scraped in ${NS}`,
                description: `Prometheus has no ${GATEWAY_JOB} target for 5m: no gateway pod runs, or the ServiceMonitor is not picked up (its labels, serviceMonitor.labels, must match your Prometheus' selector).`,
              },
            },
          ],
        },
      ],
    },
    {
      name: 'REST API 5xx above 5% for 10 minutes; a few 5xx of quiet traffic stay quiet',
      interval: '1m',
      input_series: [
        {
          series: `byok_api_requests_total{namespace="${NS}",pod="api-a",method="GET",route="/api/v1/byok",status="200"}`,
          values: '0+20x40',
        },
        {
          series: `byok_api_requests_total{namespace="${NS}",pod="api-a",method="POST",route="/api/v1/byok",status="500"}`,
          values: '0x5 0+5x35',
        },
      ],
      alert_rule_test: [
        { eval_time: '12m', alertname: 'ByokApiErrorRatio', exp_alerts: [] },
        {
          eval_time: '25m',
          alertname: 'ByokApiErrorRatio',
          exp_alerts: [
            {
              exp_labels: { severity: 'warning' },
              exp_annotations: {
                summary: '20% of REST API requests answered 5xx',
                description:
                  "More than 5% of REST API requests got a 5xx over 10 minutes: usually the kube-apiserver behind it failing or refusing the API's ServiceAccount. byok_api_requests_total has the route.",
              },
            },
          ],
        },
      ],
    },
    {
      name: 'REST API 5xx of quiet traffic stay quiet',
      interval: '1m',
      input_series: [
        {
          series: `byok_api_requests_total{namespace="${NS}",pod="api-a",method="GET",route="/api/v1/byok",status="500"}`,
          values: '0+1x40',
        },
      ],
      alert_rule_test: [{ eval_time: '30m', alertname: 'ByokApiErrorRatio', exp_alerts: [] }],
    },
    {
      name: 'an API pod not scraped for 5 minutes, then no API target at all',
      interval: '1m',
      input_series: [
        { series: `up{namespace="${NS}",job="${API_JOB}",pod="api-a"}`, values: '1x5 0x10 stale' },
        { series: `up{namespace="${NS}",job="${API_JOB}",pod="api-b"}`, values: '1x15 stale' },
      ],
      alert_rule_test: [
        { eval_time: '8m', alertname: 'ByokApiDown', exp_alerts: [] },
        {
          eval_time: '13m',
          alertname: 'ByokApiDown',
          exp_alerts: [
            {
              exp_labels: { severity: 'warning', namespace: NS, job: API_JOB, pod: 'api-a' },
              exp_annotations: {
                summary: 'REST API pod api-a cannot be scraped',
                description:
                  "Prometheus has not reached this API server pod's /metrics for 5m: the pod is not serving, or a NetworkPolicy keeps Prometheus out.",
              },
            },
          ],
        },
        { eval_time: '13m', alertname: 'ByokApiAbsent', exp_alerts: [] },
        {
          eval_time: '25m',
          alertname: 'ByokApiAbsent',
          exp_alerts: [
            {
              exp_labels: { severity: 'warning', namespace: NS, job: API_JOB },
              exp_annotations: {
                summary: `No REST API pod is scraped in ${NS}`,
                description: `Prometheus has no ${API_JOB} target for 5m: no API pod runs, or the ServiceMonitor is not picked up (its labels, serviceMonitor.labels, must match your Prometheus' selector).`,
              },
            },
          ],
        },
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
          exp_alerts: [
            {
              exp_labels: { severity: 'warning' },
              exp_annotations: {
                summary: 'Routing shards use 26 of 32 gateway slots',
                description:
                  'Gateway pods mount 32 shard slots; shards beyond them are not visible to the gateway. Raise gateway.routingSlots.',
              },
            },
          ],
        },
      ],
    },
  ],
};

describe('chart monitoring: PrometheusRule and Grafana dashboard', () => {
  let promtool: string;
  let groups: RuleGroup[];
  let dashboard: {
    panels: {
      type: string;
      title: string;
      description?: string;
      gridPos: { x: number; y: number };
      timeFrom?: string;
      targets: { expr: string }[];
    }[];
    templating: { list: { name: string; query?: string | { query: string }; allValue?: string }[] };
  };
  let dashboardMapName: string;

  beforeAll(async () => {
    promtool = await promtoolPath();
    const rendered = await helmTemplate({
      namespace: NS,
      set: [
        'monitoring.prometheusRule.enabled=true',
        'monitoring.grafanaDashboard.enabled=true',
        'gateway.routingSlots=32',
        // The up/absent alerts exist only with the ServiceMonitors that make those targets.
        'serviceMonitor.enabled=true',
        'gateway.enabled=true',
      ],
    });
    const docs = parseAllDocuments(rendered).map(
      (d) => d.toJS() as { kind?: string; spec?: { groups: RuleGroup[] }; data?: Record<string, string> } | null,
    );
    groups = docs.find((d) => d?.kind === 'PrometheusRule')!.spec!.groups;
    const dashboardMap = docs.find((d) => d?.kind === 'ConfigMap' && d.data?.['byok-operator.json'])! as {
      metadata: { name: string };
      data: Record<string, string>;
    };
    dashboard = JSON.parse(dashboardMap.data['byok-operator.json']!) as typeof dashboard;
    dashboardMapName = dashboardMap.metadata.name;
    writeFileSync(join(dir, 'rules.yaml'), stringify({ groups }));
    writeFileSync(join(dir, 'tests.yaml'), stringify(withRunbooks(alertTests)));
  }, 900_000);

  test('promtool check rules accepts the rendered rules', async () => {
    const { stdout } = await run(promtool, ['check', 'rules', join(dir, 'rules.yaml')], { encoding: 'utf8' });
    expect(stdout).toMatch(/SUCCESS: 24 rules found/);
  });

  test('every alert links its own section of the alerts runbook (docs/guide/alerts.md)', () => {
    const runbook = readFileSync(join(repoRoot, 'docs', 'guide', 'alerts.md'), 'utf8');
    const headings = new Set([...runbook.matchAll(/^## (\w+)$/gm)].map((m) => m[1]!));
    const rules = groups.flatMap((g) => g.rules).filter((r) => r.alert);
    expect(rules.length).toBe(24);
    for (const r of rules) {
      expect({ alert: r.alert, url: r.annotations?.runbook_url }).toEqual({
        alert: r.alert,
        url: `${RUNBOOK}#${r.alert!.toLowerCase()}`,
      });
      expect({ alert: r.alert, documented: headings.has(r.alert!) }).toEqual({ alert: r.alert, documented: true });
    }
    // Each section says what it means, how to confirm and what to do.
    for (const section of runbook.split(/^## /m).slice(1)) {
      expect({
        section: section.split('\n')[0],
        parts: ['**Means**', '**Confirm**', '**Do**'].filter((p) => section.includes(p)),
      }).toEqual({ section: section.split('\n')[0], parts: ['**Means**', '**Confirm**', '**Do**'] });
    }
  });

  test('every dashboard query is valid PromQL (checked by promtool as recording rules)', async () => {
    const rules = dashboard.panels.flatMap((p, i) =>
      p.targets.map((t, j) => ({ record: `byok:dashboard:panel${i}_${j}`, expr: withVariables(t.expr) })),
    );
    writeFileSync(join(dir, 'dashboard-rules.yaml'), stringify({ groups: [{ name: 'dashboard', rules }] }));
    const { stdout } = await run(promtool, ['check', 'rules', join(dir, 'dashboard-rules.yaml')], { encoding: 'utf8' });
    expect(stdout).toContain(`SUCCESS: ${rules.length} rules found`);
  });

  test('promtool test rules: each alert fires when it should and stays quiet otherwise', async () => {
    const result = await run(promtool, ['test', 'rules', join(dir, 'tests.yaml')], {
      encoding: 'utf8',
      cwd: dir,
    }).catch((e: { stdout?: string; stderr?: string }) => {
      throw new Error(`promtool test rules failed:\n${e.stdout ?? ''}${e.stderr ?? ''}`);
    });
    expect(result.stdout).toMatch(/SUCCESS/);
    // Every alert the chart ships has a test.
    const tested = new Set(alertTests.tests.flatMap((t) => t.alert_rule_test.map((a) => a.alertname)));
    expect(groups.flatMap((g) => g.rules.map((r) => r.alert)).sort()).toEqual([...tested].sort());
  });

  test('dashboard: a top stat row, the Gateway row first, provider/model/pod variables, a description on every panel', () => {
    const top = dashboard.panels.filter((p) => p.gridPos.y === 0);
    expect(top.every((p) => p.type === 'stat')).toBe(true);
    expect(top.map((p) => p.title)).toEqual([
      'Requests / s',
      'Error % (5xx)',
      'p99 latency',
      'Spend today (list USD)',
      '402s (1 h)',
      'Unhealthy keys',
    ]);
    // "Today": the stat's range starts at midnight (Grafana's relative time now/d) and the query sums over that range.
    const spend = top.find((p) => p.title.startsWith('Spend today'))!;
    expect(spend.timeFrom).toBe('now/d');
    expect(spend.targets[0]!.expr).toContain('[$__range]');
    expect(dashboard.panels.filter((p) => p.type === 'row').map((p) => p.title)).toEqual([
      'Gateway',
      'Operator',
      'REST API',
    ]);
    expect(
      dashboard.panels.filter((p) => p.description === undefined || p.description.length < 20).map((p) => p.title),
    ).toEqual([]);
    const variables = dashboard.templating.list.map((v) => v.name);
    expect(variables).toEqual(expect.arrayContaining(['namespace', 'pod', 'provider', 'model']));
    for (const v of dashboard.templating.list.filter((x) => ['pod', 'provider', 'model'].includes(x.name)))
      expect(v.allValue).toBe('.*');
    // Each gateway panel whose metric has the label is filtered by it.
    const gatewayExprs = dashboard.panels
      .filter((p) => p.gridPos.y < dashboard.panels.find((r) => r.title === 'Operator')!.gridPos.y)
      .flatMap((p) => p.targets.map((t) => t.expr));
    for (const e of gatewayExprs.filter((x) => x.includes('gen_ai_server_')))
      expect(e).toContain('gen_ai_provider_name=~"$provider",gen_ai_request_model=~"$model"');
    for (const e of gatewayExprs.filter((x) => x.includes('byok_gateway_requests_total')))
      expect(e).toContain('pod=~"$pod"');
    for (const e of gatewayExprs.filter((x) => x.includes('byok_gateway_attempts_total')))
      expect(e).toContain('provider=~"$provider"');
  });

  test('the dashboard ConfigMap is not named byok-byok-… when the release is called byok', async () => {
    expect(dashboardMapName).toBe('rel-byok-dashboard');
    const out = await helmTemplate({
      release: 'byok',
      namespace: NS,
      set: ['monitoring.grafanaDashboard.enabled=true'],
      showOnly: ['templates/grafana-dashboard.yaml'],
    });
    expect((parseAllDocuments(out)[0]!.toJS() as { metadata: { name: string } }).metadata.name).toBe('byok-dashboard');
  });

  test('rules and dashboard query only metrics the operator and API server register', async () => {
    const registry = new Registry();
    createOperatorMetrics(registry, { defaultMetrics: false });
    registerCredentialReadiness(registry, () => []);
    new CompilePipeline({
      kubeConfig: testKubeConfig(),
      routingNamespace: NS,
      logger: pino({ level: 'silent' }),
      registry,
      source: {
        accountNamespaces: () => [],
        snapshot: () => {
          throw new Error('unused');
        },
      },
    });
    const app = Fastify();
    registerApiMetrics(app, { registry });
    await app.close();
    // The gateway's spend gate (ledger metrics).
    await createSpendGate(createEmbeddedLedger(), { registry }).close();
    // The operator's health writer and delivery gauges (built, never started).
    new HealthStatusWriter({
      config: { token: 'unused-status-token' },
      kubeConfig: testKubeConfig(),
      informers: {} as never,
      pipeline: undefined,
      applier: {} as never,
      events: {} as never,
      registry,
      log: pino({ level: 'silent' }),
    });
    registerAccountDelivery(registry, () => []);
    // The gateway's own registry.
    const gateway = createGatewayMetrics({ defaultMetrics: false }).registry;
    const registered = new Set([...registry.getMetricsAsArray(), ...gateway.getMetricsAsArray()].map((m) => m.name));
    const variableQueries = dashboard.templating.list.flatMap((v) =>
      typeof v.query === 'object' ? [v.query.query] : [],
    );
    const queried = [
      ...groups.flatMap((g) => g.rules.map((r) => r.expr)),
      ...dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr)),
      ...variableQueries,
    ].flatMap(metricsIn);
    expect(queried.length).toBeGreaterThan(15);
    // `up` is Prometheus' own (one per scrape target), not a metric of ours.
    expect([...new Set(queried)].filter((m) => m !== 'up' && !registered.has(m))).toEqual([]);
    expect(dashboard.panels.length).toBeGreaterThanOrEqual(10);
    expect(readFileSync(join(CHART_DIR, 'dashboards', 'byok-operator.json'), 'utf8')).toContain(
      '"uid": "byok-operator"',
    );
  });

  test('with serviceMonitor.enabled and gateway.enabled, a ServiceMonitor scrapes the gateway Service on its ops port', async () => {
    type Doc = {
      kind?: string;
      metadata?: { name?: string; labels?: Record<string, string> };
      spec?: Record<string, any>;
    } | null;
    const render = async (...set: string[]) =>
      parseAllDocuments(await helmTemplate({ namespace: NS, set })).map((d) => d.toJS() as Doc);
    const docs = await render(
      'serviceMonitor.enabled=true',
      'gateway.enabled=true',
      'networkPolicy.enabled=true',
      'networkPolicy.gatewayMetricsFrom[0].namespaceSelector.matchLabels.team=monitoring',
    );
    const monitor = docs.find((d) => d?.kind === 'ServiceMonitor' && d.metadata?.name === 'rel-byok-gateway')!;
    const service = docs.find((d) => d?.kind === 'Service' && d.metadata?.name === 'rel-byok-gateway')!;
    expect(monitor.spec!.endpoints).toEqual([{ port: 'ops', path: '/metrics', interval: '30s' }]);
    for (const [k, v] of Object.entries(monitor.spec!.selector.matchLabels as Record<string, string>))
      expect(service.metadata!.labels![k]).toBe(v);
    expect((service.spec!.ports as { name: string }[]).map((p) => p.name)).toContain('ops');
    // Prometheus may reach the ops port through the gateway's NetworkPolicy; tenants still reach only the http port.
    const policy = docs.find((d) => d?.kind === 'NetworkPolicy' && d.metadata?.name === 'rel-byok-gateway')!;
    const opsRule = (policy.spec!.ingress as { from?: unknown[]; ports: { port: number }[] }[]).find((r) =>
      r.ports.some((p) => p.port === 8081),
    )!;
    expect(opsRule.from).toContainEqual({ namespaceSelector: { matchLabels: { team: 'monitoring' } } });
    expect(
      (await render('serviceMonitor.enabled=true')).some(
        (d) => d?.kind === 'ServiceMonitor' && d.metadata?.name === 'rel-byok-gateway',
      ),
    ).toBe(false);
  });
});
