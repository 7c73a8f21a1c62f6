// Counters and histograms for the request path whose series are bound once: `bind(labels)` returns a slot of plain
// numbers, and recording into it is a bucket search and a few additions. prom-client's own `labels()` children
// re-validate and re-hash their labels on every call (about 10x the cost); these keep its registry, exposition and
// names, and only replace where the numbers live (`get()`, which the registry reads at scrape time).
import { Counter, Histogram, type IncreaseDataWithExemplar, type LabelValues, type ObserveDataWithExemplar, type MetricObjectWithValues, type MetricType, type MetricValue, type MetricValueWithName, type Registry } from 'prom-client';

export interface CounterSlot {
  inc(value?: number): void;
}

export interface HistogramSlot {
  observe(value: number): void;
}

/** The series key of a label set: built once per bind, never per record. */
const keyOf = (names: readonly string[], labels: Record<string, string | number | undefined>) => names.map((n) => String(labels[n] ?? '')).join('\u0000');

class CounterSeries implements CounterSlot {
  value = 0;
  readonly labels: Record<string, string | number>;

  constructor(labels: Record<string, string | number>) {
    this.labels = labels;
  }

  inc(value = 1): void {
    if (!(value >= 0) || !Number.isFinite(value)) throw new TypeError(`a counter only goes up by a finite amount, not ${value}`);
    this.value += value;
  }
}

/** A counter recorded through bound slots (the plain `inc(labels)` still works, by way of a lookup). */
export class BoundCounter<T extends string> extends Counter<T> {
  private readonly names: readonly T[];
  private readonly meta: { name: string; help: string };
  private readonly series = new Map<string, CounterSeries>();

  constructor(config: { name: string; help: string; labelNames: readonly T[]; registers: Registry[] }) {
    super({ name: config.name, help: config.help, labelNames: config.labelNames, registers: config.registers });
    this.names = config.labelNames;
    this.meta = { name: config.name, help: config.help };
  }

  bind(labels: LabelValues<T>): CounterSlot {
    const key = keyOf(this.names, labels);
    let s = this.series.get(key);
    if (!s) {
      s = new CounterSeries(clean(labels));
      this.series.set(key, s);
    }
    return s;
  }

  override inc(labels?: LabelValues<T> | number | IncreaseDataWithExemplar<T>, value?: number): void {
    if (typeof labels === 'number' || labels === undefined) this.bind({}).inc(labels ?? 1);
    else if (withExemplar(labels)) throw new TypeError('exemplars are not recorded');
    else this.bind(labels).inc(value ?? 1);
  }

  override reset(): void {
    this.series.clear();
  }

  override async get(): Promise<MetricObjectWithValues<MetricValue<T>>> {
    const values: MetricValue<T>[] = [];
    for (const s of this.series.values()) values.push({ labels: s.labels as LabelValues<T>, value: s.value });
    return exposition(this.meta, 'counter', values);
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
    if (!Number.isFinite(value)) return;
    const b = this.bounds;
    let i = 0;
    while (i < b.length && value > b[i]!) i++;
    if (i < b.length) this.counts[i]!++;
    this.sum += value;
    this.count++;
  }
}

/** A histogram recorded through bound slots (the plain `observe(labels, v)` still works, by way of a lookup). */
export class BoundHistogram<T extends string> extends Histogram<T> {
  private readonly names: readonly T[];
  private readonly meta: { name: string; help: string };
  private readonly bounds: Float64Array;
  private readonly series = new Map<string, HistogramSeries>();

  constructor(config: { name: string; help: string; labelNames: readonly T[]; buckets: readonly number[]; registers: Registry[] }) {
    super({ name: config.name, help: config.help, labelNames: config.labelNames, buckets: [...config.buckets], registers: config.registers });
    this.names = config.labelNames;
    this.meta = { name: config.name, help: config.help };
    this.bounds = Float64Array.from(config.buckets);
  }

  bind(labels: LabelValues<T>): HistogramSlot {
    const key = keyOf(this.names, labels);
    let s = this.series.get(key);
    if (!s) {
      s = new HistogramSeries(clean(labels), this.bounds);
      this.series.set(key, s);
    }
    return s;
  }

  override observe(labels: LabelValues<T> | number | ObserveDataWithExemplar<T>, value?: number): void {
    if (typeof labels === 'number') this.bind({}).observe(labels);
    else if (withExemplar(labels)) throw new TypeError('exemplars are not recorded');
    else this.bind(labels).observe(value ?? 0);
  }

  override reset(): void {
    this.series.clear();
  }

  override async get(): Promise<MetricObjectWithValues<MetricValueWithName<T>>> {
    const values: MetricValueWithName<T>[] = [];
    const { name } = this.meta;
    const bucket = `${name}_bucket`;
    for (const s of this.series.values()) {
      const labels = s.labels as LabelValues<T>;
      let cumulative = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        cumulative += s.counts[i]!;
        values.push({ labels: { ...labels, le: this.bounds[i]! } as LabelValues<T>, value: cumulative, metricName: bucket });
      }
      values.push({ labels: { ...labels, le: '+Inf' } as LabelValues<T>, value: s.count, metricName: bucket });
      values.push({ labels, value: s.sum, metricName: `${name}_sum` });
      values.push({ labels, value: s.count, metricName: `${name}_count` });
    }
    return exposition(this.meta, 'histogram', values);
  }
}

function withExemplar<T extends string>(x: LabelValues<T> | IncreaseDataWithExemplar<T> | ObserveDataWithExemplar<T>): x is IncreaseDataWithExemplar<T> | ObserveDataWithExemplar<T> {
  return 'exemplarLabels' in x;
}

/** What the registry reads at scrape time (prom-client's MetricObjectWithValues; `type` is its string at runtime). */
function exposition<V extends MetricValue<string>>(meta: { name: string; help: string }, type: 'counter' | 'histogram', values: V[]): MetricObjectWithValues<V> {
  return { name: meta.name, help: meta.help, type: type as unknown as MetricType, aggregator: 'sum', values, collect: () => undefined };
}

/** Labels without empty values: an empty label is no label in Prometheus, so it is left out of the exposition. */
function clean(labels: Record<string, string | number | undefined>): Record<string, string | number> {
  const out: Record<string, string | number> = {};
  for (const [k, v] of Object.entries(labels)) if (v !== undefined && v !== '') out[k] = v;
  return out;
}
