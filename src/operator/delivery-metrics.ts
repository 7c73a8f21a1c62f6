// Delivery to gateway pods as metrics, counted from the informer cache at scrape time (like byok_credential_ready):
// how many Accounts have each Delivered status and reason, and for how long the oldest undelivered one has waited.
// Counts and one maximum, never one series per account, so cardinality stays at the handful of reasons. Every
// replica reports the same numbers: aggregate with max.
import { Gauge, type Registry } from 'prom-client';

interface WithConditions {
  status?: { conditions?: readonly { type: string; status: string; reason?: string; lastTransitionTime?: string }[] };
}

export function registerAccountDelivery(
  registry: Registry,
  accounts: () => Iterable<WithConditions>,
  clock: () => number = Date.now,
): void {
  const read = () => {
    const counts = new Map<string, { status: string; reason: string; n: number }>();
    let lagMs = 0;
    const now = clock();
    for (const a of accounts()) {
      const delivered = a.status?.conditions?.find((c) => c.type === 'Delivered');
      // No Delivered condition: the operator is not polling gateways (no status token), nothing to count.
      if (!delivered) continue;
      const key = `${delivered.status}\n${delivered.reason ?? ''}`;
      const entry = counts.get(key) ?? { status: delivered.status, reason: delivered.reason ?? '', n: 0 };
      entry.n++;
      counts.set(key, entry);
      if (delivered.status === 'False' && delivered.lastTransitionTime) {
        const since = Date.parse(delivered.lastTransitionTime);
        if (Number.isFinite(since)) lagMs = Math.max(lagMs, now - since);
      }
    }
    return { counts, lagMs };
  };
  new Gauge({
    name: 'byok_account_delivery',
    help: 'Accounts by Delivered condition status and reason (counts from the cache): whether every gateway pod has loaded their current credentials.',
    labelNames: ['status', 'reason'],
    registers: [registry],
    collect() {
      this.reset();
      for (const { status, reason, n } of read().counts.values()) this.set({ status, reason }, n);
    },
  });
  new Gauge({
    name: 'byok_account_delivery_lag_seconds',
    help: 'How long the oldest Account with Delivered=False has waited for every gateway pod to load its current credentials (0 when none waits).',
    registers: [registry],
    collect() {
      this.set(read().lagMs / 1000);
    },
  });
}
