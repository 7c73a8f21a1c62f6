// The gateway's metrics: bound series expose exactly what prom-client's own counters and histograms would, GenAI
// names and labels follow the OpenTelemetry conventions, and the default metrics keep their standard names.
import { describe, expect, test } from '@jest/globals';
import { Counter, Histogram, Registry } from 'prom-client';
import { BoundCounter, BoundHistogram } from '../../../src/gateway/bound-metrics.ts';
import { createGatewayMetrics } from '../../../src/gateway/metrics.ts';

/** Exposition lines without HELP/TYPE comments, sorted (series order is not part of the format). */
const lines = (text: string) =>
  text
    .split('\n')
    .filter((l) => l !== '' && !l.startsWith('#'))
    .sort();

describe('bound metrics', () => {
  test('a bound histogram exposes what a prom-client histogram does for the same observations', async () => {
    const mine = new Registry();
    const theirs = new Registry();
    const buckets = [0.1, 0.5, 1, 5];
    const bound = new BoundHistogram({
      name: 'h_seconds',
      help: 'h',
      labelNames: ['a', 'b'],
      buckets,
      registers: [mine],
    });
    const plain = new Histogram({ name: 'h_seconds', help: 'h', labelNames: ['a', 'b'], buckets, registers: [theirs] });
    const x = bound.bind({ a: 'x', b: '1' });
    const y = bound.bind({ b: '2', a: 'y"\\' });
    for (const v of [0.05, 0.1, 0.3, 2, 9, 1]) {
      x.observe(v);
      plain.observe({ a: 'x', b: '1' }, v);
    }
    y.observe(0.7);
    plain.observe({ a: 'y"\\', b: '2' }, 0.7);
    // The generic API goes to the same series.
    bound.observe({ a: 'x', b: '1' }, 0.2);
    plain.observe({ a: 'x', b: '1' }, 0.2);
    expect(lines(await mine.metrics())).toEqual(lines(await theirs.metrics()));
    expect(await mine.metrics()).toContain('# TYPE h_seconds histogram');
  });

  test('a bound counter exposes what a prom-client counter does, and refuses to go down', async () => {
    const mine = new Registry();
    const theirs = new Registry();
    const bound = new BoundCounter({ name: 'c_total', help: 'c', labelNames: ['k'], registers: [mine] });
    const plain = new Counter({ name: 'c_total', help: 'c', labelNames: ['k'], registers: [theirs] });
    const slot = bound.bind({ k: 'v' });
    slot.inc();
    slot.inc(2.5);
    bound.inc({ k: 'w' });
    plain.inc({ k: 'v' }, 3.5);
    plain.inc({ k: 'w' });
    expect(lines(await mine.metrics())).toEqual(lines(await theirs.metrics()));
    expect(() => slot.inc(-1)).toThrow(TypeError);
    expect(() => slot.inc(Number.NaN)).toThrow(TypeError);
    bound.reset();
    expect(lines(await mine.metrics())).toEqual([]);
  });

  test('an empty label value is no label (as Prometheus reads it)', async () => {
    const registry = new Registry();
    new BoundCounter({ name: 'e_total', help: 'e', labelNames: ['p', 'q'], registers: [registry] })
      .bind({ p: '', q: 'z' })
      .inc();
    expect(lines(await registry.metrics())).toEqual(['e_total{q="z"} 1']);
  });
});

describe('gateway metrics', () => {
  test('default metrics keep their standard process_* and nodejs_* names', async () => {
    const text = await createGatewayMetrics().registry.metrics();
    expect(text).toMatch(/^process_cpu_seconds_total /m);
    expect(text).toMatch(/^nodejs_eventloop_lag_seconds /m);
    expect(text).not.toContain('byok_gateway_process_');
    expect(text).not.toContain('byok_gateway_nodejs_');
  });

  test('GenAI series carry the semantic-convention names and labels, and bounded cost and refusal labels', async () => {
    const m = createGatewayMetrics({ defaultMetrics: false });
    const s = m.series('openai', 'openai/gpt-4o');
    expect(m.series('openai', 'openai/gpt-4o')).toBe(s);
    s.duration(0.3, '');
    s.duration(1.5, 429);
    s.duration(2, 'stream_broken');
    s.firstToken(0.04);
    s.perOutputToken(0.02);
    s.tokens(12, 340);
    s.cost('byok', 'list', 1_500);
    s.cost('byok', 'fee', 75);
    s.cost('byok', 'charged', 0);
    m.series('', 'openai/gpt-4o').duration(0.001, 502);
    m.answered(200);
    m.answered(200);
    m.answered(402);
    m.attempt('openai', 'byok', 'rate_limited', true);
    m.attempt('openai', 'shared', 'ok', false);
    m.overheadOf(true, 0.0003);
    m.budgetRefused('workspace', 'daily');
    m.budgetRefused('workspace', 'daily');
    const text = await m.registry.metrics();
    const genAi = 'gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="openai/gpt-4o"';
    expect(text).toContain(`gen_ai_server_request_duration_seconds_bucket{le="0.32",${genAi}} 1`);
    expect(text).toContain(`gen_ai_server_request_duration_seconds_count{${genAi},error_type="429"} 1`);
    expect(text).toContain(`gen_ai_server_request_duration_seconds_count{${genAi},error_type="stream_broken"} 1`);
    // No attempt ran: no provider label.
    expect(text).toContain(
      'gen_ai_server_request_duration_seconds_count{gen_ai_operation_name="chat",gen_ai_request_model="openai/gpt-4o",error_type="502"} 1',
    );
    expect(text).toContain(`gen_ai_server_time_to_first_token_seconds_bucket{le="0.04",${genAi}} 1`);
    expect(text).toContain(`gen_ai_server_time_per_output_token_seconds_sum{${genAi}} 0.02`);
    expect(text).toContain(`gen_ai_client_token_usage_sum{${genAi},gen_ai_token_type="input"} 12`);
    expect(text).toContain(`gen_ai_client_token_usage_bucket{le="1024",${genAi},gen_ai_token_type="output"} 1`);
    expect(text).toContain(
      'byok_gateway_cost_usd_total{type="list",provider="openai",model="openai/gpt-4o",kind="byok"} 0.0015',
    );
    expect(text).toContain(
      'byok_gateway_cost_usd_total{type="fee",provider="openai",model="openai/gpt-4o",kind="byok"} 0.000075',
    );
    expect(text).not.toContain('type="charged"');
    expect(text).toContain('byok_gateway_requests_total{status="200"} 2');
    expect(text).toContain('byok_gateway_requests_total{status="402"} 1');
    expect(text).toContain('byok_gateway_attempts_total{provider="openai",kind="byok",outcome="rate_limited"} 1');
    expect(text).toContain('byok_gateway_attempts_total{provider="openai",kind="shared",outcome="ok"} 1');
    expect(text).toContain('byok_gateway_failovers_total{provider="openai",kind="byok"} 1');
    expect(text).toContain('byok_gateway_overhead_seconds_bucket{le="0.0005",stream="true"} 1');
    expect(text).toContain('byok_gateway_budget_refusals_total{scope="workspace",interval="daily"} 2');
    // No account, key or credential labels anywhere.
    expect(text).not.toMatch(/(account|api_key|credential|workspace_id)=/);
  });
});
