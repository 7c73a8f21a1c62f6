// Counters and histograms for the request path whose series are bound once: `bind(labels)` returns a slot of plain
// numbers, and recording into it is a bucket search and a few additions. prom-client's own `labels()` children
// re-validate and re-hash their labels on every call; these are registered in a prom-client Registry like its own
// metrics and expose the same text (the registry reads `get()` at scrape time), only the numbers live here.
import type { MetricObjectWithValues, MetricType, MetricValue, MetricValueWithName, Registry } from 'prom-client';

export interface CounterSlot {
  inc(value?: number): void;
}

export interface HistogramSlot {
  observe(value: number): void;
}

type LabelSet<T extends string> = Partial<Record<T, string | number>>;

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** What the two kinds share: name, help, label names, and the series by label values. */
abstract class BoundMetric<T extends string, S extends { labels: Record<string, string | number> }> {
  readonly name: string;
  readonly help: string;
  readonly aggregator = 'sum';
  abstract readonly type: 'counter' | 'histogram';
  protected readonly series = new Map<string, S>();
  private readonly labelNames: readonly T[];

  constructor(config: { name: string; help: string; labelNames: readonly T[]; registers: readonly Registry[] }) {
    if (!METRIC_NAME.test(config.name)) throw new TypeError(`invalid metric name ${config.name}`);
    for (const l of config.labelNames)
      if (!LABEL_NAME.test(l) || l === 'le') throw new TypeError(`invalid label name ${l}`);
    this.name = config.name;
    this.help = config.help;
    this.labelNames = config.labelNames;
    // The registry's contract is name, help, type, aggregator, get() and reset(); its types only list its own classes.
    for (const r of config.registers) r.registerMetric(this as unknown as Parameters<Registry['registerMetric']>[0]);
  }

  protected slot(labels: LabelSet<T>, make: (labels: Record<string, string | number>) => S): S {
    for (const k of Object.keys(labels))
      if (!this.labelNames.includes(k as T)) throw new TypeError(`label ${k} is not a label of ${this.name}`);
    // The series key: built once per bind, never per record.
    const key = this.labelNames.map((n) => String(labels[n] ?? '')).join('\u0000');
    let s = this.series.get(key);
    if (!s) {
      s = make(clean(this.labelNames, labels));
      this.series.set(key, s);
    }
    return s;
  }

  reset(): void {
    this.series.clear();
  }

  protected exposition<V extends MetricValue<string>>(values: V[]): MetricObjectWithValues<V> {
    // `type` is prom-client's MetricType, a string at runtime.
    return {
      name: this.name,
      help: this.help,
      type: this.type as unknown as MetricType,
      aggregator: this.aggregator,
      values,
      collect: () => undefined,
    };
  }
}

class CounterSeries implements CounterSlot {
  value = 0;
  readonly labels: Record<string, string | number>;

  constructor(labels: Record<string, string | number>) {
    this.labels = labels;
  }

  inc(value = 1): void {
    if (!(value >= 0) || !Number.isFinite(value))
      throw new TypeError(`a counter only goes up by a finite amount, not ${value}`);
    this.value += value;
  }
}

export class BoundCounter<T extends string> extends BoundMetric<T, CounterSeries> {
  readonly type = 'counter';

  bind(labels: LabelSet<T>): CounterSlot {
    return this.slot(labels, (l) => new CounterSeries(l));
  }

  /** The unbound way (a lookup per call): for paths that are not per request. */
  inc(labels: LabelSet<T> = {}, value = 1): void {
    this.bind(labels).inc(value);
  }

  async get(): Promise<MetricObjectWithValues<MetricValue<T>>> {
    const values: MetricValue<T>[] = [];
    for (const s of this.series.values()) values.push({ labels: s.labels as LabelSet<T>, value: s.value });
    return this.exposition(values);
  }
}

class HistogramSeries implements HistogramSlot {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  readonly labels: Record<string, string | number>;
  private readonly bounds: Float64Array;

  constructor(labels: Record<string, string | number>, bounds: Float64Array) {
    this.labels = labels;
    this.bounds = bounds;
    this.counts = new Float64Array(bounds.length);
  }

  observe(value: number): void {
    // A metric never throws on the request path: a non-finite value is not recorded.
    if (!Number.isFinite(value)) return;
    const b = this.bounds;
    let i = 0;
    while (i < b.length && value > b[i]!) i++;
    if (i < b.length) this.counts[i]!++;
    this.sum += value;
    this.count++;
  }
}

export class BoundHistogram<T extends string> extends BoundMetric<T, HistogramSeries> {
  readonly type = 'histogram';
  private readonly bounds: Float64Array;

  constructor(config: {
    name: string;
    help: string;
    labelNames: readonly T[];
    buckets: readonly number[];
    registers: readonly Registry[];
  }) {
    super(config);
    this.bounds = Float64Array.from([...config.buckets].sort((a, b) => a - b));
  }

  bind(labels: LabelSet<T>): HistogramSlot {
    return this.slot(labels, (l) => new HistogramSeries(l, this.bounds));
  }

  /** The unbound way (a lookup per call): for paths that are not per request. */
  observe(labels: LabelSet<T>, value: number): void {
    this.bind(labels).observe(value);
  }

  async get(): Promise<MetricObjectWithValues<MetricValueWithName<T>>> {
    const values: MetricValueWithName<T>[] = [];
    const bucket = `${this.name}_bucket`;
    for (const s of this.series.values()) {
      const labels = s.labels as LabelSet<T>;
      let cumulative = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        cumulative += s.counts[i]!;
        values.push({
          labels: { le: this.bounds[i]!, ...labels } as LabelSet<T>,
          value: cumulative,
          metricName: bucket,
        });
      }
      values.push({ labels: { le: '+Inf', ...labels } as LabelSet<T>, value: s.count, metricName: bucket });
      values.push({ labels, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels, value: s.count, metricName: `${this.name}_count` });
    }
    return this.exposition(values);
  }
}

/** Labels in declaration order, without empty values: an empty label is no label in Prometheus. */
function clean(
  names: readonly string[],
  labels: Record<string, string | number | undefined>,
): Record<string, string | number> {
  const out: Record<string, string | number> = {};
  for (const k of names) {
    const v = labels[k];
    if (v !== undefined && v !== '') out[k] = v;
  }
  return out;
}
