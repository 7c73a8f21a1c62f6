// What the gateway's metrics cost per request: the recording a served streaming request does (status, attempt,
// overhead, GenAI duration, time to first token, time per output token, input and output tokens, list cost and fee),
// N times in a loop over a few (provider, model) pairs, in nanoseconds per request. For comparison the same recording
// through prom-client's own API: with label objects on every call, and with `labels()` children cached in a Map.
// Prints one JSON document.
//
//   node bench/gateway-metrics.ts [--requests 2000000]
import { Counter, Histogram, Registry } from 'prom-client';
import { createGatewayMetrics } from '../src/gateway/metrics.ts';

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const N = arg('requests', 2_000_000);
const PAIRS = [
  ['openai', 'openai/gpt-4o'],
  ['anthropic', 'anthropic/claude-sonnet-4'],
  ['groq', 'meta-llama/llama-3.3-70b'],
  ['openai', 'openai/gpt-4o-mini'],
] as const;

type Recorder = (i: number) => void;

function bound(): Recorder {
  const m = createGatewayMetrics({ defaultMetrics: false });
  return (i) => {
    const [provider, model] = PAIRS[i & 3]!;
    m.answered(200);
    m.attempt(provider, 'byok', 'ok', false);
    m.overheadOf(true, 0.0002);
    const s = m.series(provider, model);
    s.duration(0.8, '');
    s.firstToken(0.12);
    s.perOutputToken(0.015);
    s.tokens(420, 310);
    s.cost('byok', 'list', 4_250);
    s.cost('byok', 'fee', 212);
  };
}

function promClient(cached: boolean): Recorder {
  const registers = [new Registry()];
  const requests = new Counter({ name: 'r', help: 'r', labelNames: ['status'], registers });
  const attempts = new Counter({ name: 'a', help: 'a', labelNames: ['provider', 'kind', 'outcome'], registers });
  const overhead = new Histogram({
    name: 'o',
    help: 'o',
    labelNames: ['stream'],
    buckets: [0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1],
    registers,
  });
  const genAi = ['gen_ai_operation_name', 'gen_ai_provider_name', 'gen_ai_request_model'];
  const duration = new Histogram({
    name: 'd',
    help: 'd',
    labelNames: [...genAi, 'error_type'],
    buckets: [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92],
    registers,
  });
  const ttft = new Histogram({
    name: 't',
    help: 't',
    labelNames: genAi,
    buckets: [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10],
    registers,
  });
  const tpot = new Histogram({
    name: 'p',
    help: 'p',
    labelNames: genAi,
    buckets: [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5],
    registers,
  });
  const tokens = new Histogram({
    name: 'k',
    help: 'k',
    labelNames: [...genAi, 'gen_ai_token_type'],
    buckets: [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864],
    registers,
  });
  const cost = new Counter({ name: 'c', help: 'c', labelNames: ['type', 'provider', 'model', 'kind'], registers });
  if (!cached) {
    return (i) => {
      const [provider, model] = PAIRS[i & 3]!;
      const g = { gen_ai_operation_name: 'chat', gen_ai_provider_name: provider, gen_ai_request_model: model };
      requests.inc({ status: String(200) });
      attempts.inc({ provider, kind: 'byok', outcome: 'ok' });
      overhead.observe({ stream: 'true' }, 0.0002);
      duration.observe(g, 0.8);
      ttft.observe(g, 0.12);
      tpot.observe(g, 0.015);
      tokens.observe({ ...g, gen_ai_token_type: 'input' }, 420);
      tokens.observe({ ...g, gen_ai_token_type: 'output' }, 310);
      cost.inc({ type: 'list', provider, model, kind: 'byok' }, 0.00425);
      cost.inc({ type: 'fee', provider, model, kind: 'byok' }, 0.000212);
    };
  }
  // The children of one (provider, model), cached in nested Maps as the request path would.
  const children = new Map<string, Map<string, ReturnType<typeof makeChildren>>>();
  function makeChildren(provider: string, model: string) {
    return {
      attempt: attempts.labels(provider, 'byok', 'ok'),
      duration: duration.labels('chat', provider, model, ''),
      ttft: ttft.labels('chat', provider, model),
      tpot: tpot.labels('chat', provider, model),
      input: tokens.labels('chat', provider, model, 'input'),
      output: tokens.labels('chat', provider, model, 'output'),
      list: cost.labels('list', provider, model, 'byok'),
      fee: cost.labels('fee', provider, model, 'byok'),
    };
  }
  const ok = requests.labels('200');
  const streamed = overhead.labels('true');
  return (i) => {
    const [provider, model] = PAIRS[i & 3]!;
    let byModel = children.get(provider);
    if (!byModel) children.set(provider, (byModel = new Map()));
    let c = byModel.get(model);
    if (!c) byModel.set(model, (c = makeChildren(provider, model)));
    ok.inc();
    c.attempt.inc();
    streamed.observe(0.0002);
    c.duration.observe(0.8);
    c.ttft.observe(0.12);
    c.tpot.observe(0.015);
    c.input.observe(420);
    c.output.observe(310);
    c.list.inc(0.00425);
    c.fee.inc(0.000212);
  };
}

function measure(record: Recorder): number {
  for (let i = 0; i < 200_000; i++) record(i); // warm-up
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i++) record(i);
  return Number(process.hrtime.bigint() - t0) / N;
}

const result = {
  requests: N,
  nsPerRequest: {
    bound: Math.round(measure(bound())),
    promClientLabelObjects: Math.round(measure(promClient(false))),
    promClientCachedChildren: Math.round(measure(promClient(true))),
  },
};
process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
