// Delivery metrics: Accounts counted by their Delivered condition, and the wait of the oldest undelivered one.
import { describe, expect, test } from '@jest/globals';
import { Registry } from 'prom-client';
import { registerAccountDelivery } from '../../../src/operator/delivery-metrics.ts';

const delivered = (status: string, reason: string, lastTransitionTime: string) => ({
  status: {
    conditions: [
      { type: 'Ready', status: 'True' },
      { type: 'Delivered', status, reason, lastTransitionTime },
    ],
  },
});

describe('account delivery metrics', () => {
  test('counts by status and reason; the lag is the oldest Delivered=False wait, 0 when all are delivered', async () => {
    const registry = new Registry();
    const now = Date.parse('2026-11-25T12:00:00Z');
    let accounts: object[] = [
      delivered('True', 'Delivered', '2026-11-25T10:00:00Z'),
      delivered('False', 'Pending', '2026-11-25T11:58:00Z'),
      delivered('False', 'Pending', '2026-11-25T11:50:00Z'),
      delivered('Unknown', 'NoGateways', '2026-11-25T09:00:00Z'),
      // No status token, no Delivered condition: not counted.
      { status: { conditions: [{ type: 'Ready', status: 'True' }] } },
      {},
    ];
    registerAccountDelivery(
      registry,
      () => accounts,
      () => now,
    );
    const text = await registry.metrics();
    expect(text).toContain('byok_account_delivery{status="True",reason="Delivered"} 1');
    expect(text).toContain('byok_account_delivery{status="False",reason="Pending"} 2');
    expect(text).toContain('byok_account_delivery{status="Unknown",reason="NoGateways"} 1');
    expect(text).toContain('byok_account_delivery_lag_seconds 600');
    accounts = [delivered('True', 'Delivered', '2026-11-25T10:00:00Z')];
    const after = await registry.metrics();
    expect(after).not.toContain('reason="Pending"');
    expect(after).toContain('byok_account_delivery_lag_seconds 0');
  });
});
