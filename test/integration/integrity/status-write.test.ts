// A status write that keeps failing surfaces as a Warning Event on the object (StatusWriteFailed), not only as a
// log line. The apiserver itself refuses the writes: a ValidatingAdmissionPolicy (built into kube-apiserver)
// denies status writes of credentials labelled for it in this test's namespace only.
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { EventsV1Api } from '@kubernetes/client-node';
import { createApplier } from '../../../src/kube/apply.ts';
import { KubeApiError } from '../../../src/kube/client.ts';
import { GROUP } from '../../../src/schema/resources.ts';
import { credential, withLabels, withSecret } from '../../support/builders.ts';
import { crApi, createTestNamespace, kubectl, testKubeConfig } from '../../support/kube.ts';
import { type CapturedOperator, createSecret, resource, startTestOperator } from '../../support/operator.ts';
import { createAccountNamespace } from '../../support/tenant.ts';
import { until } from '../../support/until.ts';

const kc = testKubeConfig();
const DENY_LABEL = 'integrity.test/deny-status';

describe('status writes that keep failing', () => {
  let ns = '';
  let routing = '';
  let run: CapturedOperator;
  let policy = '';

  beforeAll(async () => {
    [ns, routing] = await Promise.all([
      createAccountNamespace('integ-status'),
      createTestNamespace('integ-status-routing'),
    ]);
    policy = `integrity-deny-status-${ns}`;
    const objects = {
      apiVersion: 'v1',
      kind: 'List',
      items: [
        {
          apiVersion: 'admissionregistration.k8s.io/v1',
          kind: 'ValidatingAdmissionPolicy',
          metadata: { name: policy },
          spec: {
            failurePolicy: 'Fail',
            matchConstraints: {
              resourceRules: [
                {
                  apiGroups: [GROUP],
                  apiVersions: ['*'],
                  operations: ['CREATE', 'UPDATE'],
                  resources: ['byokcredentials/status'],
                },
              ],
            },
            validations: [
              {
                expression: `!has(object.metadata.labels) || !('${DENY_LABEL}' in object.metadata.labels)`,
                message: 'status writes are denied by the integrity test',
                reason: 'Invalid',
              },
            ],
          },
        },
        {
          apiVersion: 'admissionregistration.k8s.io/v1',
          kind: 'ValidatingAdmissionPolicyBinding',
          metadata: { name: policy },
          spec: {
            policyName: policy,
            validationActions: ['Deny'],
            matchResources: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } } },
          },
        },
      ],
    };
    const file = join(tmpdir(), `${policy}.json`);
    await writeFile(file, JSON.stringify(objects));
    await kubectl('apply', '--validate=false', '-f', file);
    // A new policy takes a moment to be enforced: wait until a labelled probe's status write is refused.
    await crApi('byokcredentials', ns).create(
      credential('probe', withLabels({ [DENY_LABEL]: 'true' }), withSecret('none')),
    );
    const probe = createApplier(kc, { fieldManager: 'integrity-test' });
    await until(
      'the admission policy to be enforced',
      async () => {
        try {
          await probe.applyStatus('BYOKCredential', ns, 'probe', { observedGeneration: 1 });
          return false;
        } catch (err) {
          return err instanceof KubeApiError && err.status === 422;
        }
      },
      30_000,
      200,
    );
    await crApi('byokcredentials', ns).delete('probe');
    run = await startTestOperator(kc, { routingNamespace: routing, watchNamespaces: [ns] });
  });
  afterAll(async () => {
    await run?.op.stop();
    await kubectl('delete', 'validatingadmissionpolicybinding,validatingadmissionpolicy', policy, '--ignore-not-found');
  });

  test('after repeated refusals the credential gets a StatusWriteFailed Warning Event; once writable, its status lands', async () => {
    await createSecret(kc, ns, 'k', 'sk-status-0123456789abcdef');
    await crApi('byokcredentials', ns).create(
      credential('denied', withLabels({ [DENY_LABEL]: 'true' }), withSecret('k')),
    );
    const events = kc.makeApiClient(EventsV1Api);
    const event = await until(
      'a StatusWriteFailed Warning Event',
      async () =>
        (await events.listNamespacedEvent({ namespace: ns })).items.find(
          (e) => e.regarding?.name === 'denied' && e.type === 'Warning' && e.reason === 'StatusWriteFailed',
        ),
      30_000,
    );
    expect(event.note).toMatch(/could not write this object's status \d+ times in a row \(422 Invalid\)/);
    expect(event.note).not.toContain('sk-status');
    expect(((await crApi('byokcredentials', ns).get('denied')) as { status?: unknown }).status).toBeUndefined();
    expect(run.logs.some((l) => l.includes('reconcile failed'))).toBe(true);

    // Lift the refusal: the status is written and the credential is Ready.
    await resource('byokcredentials', ns).update('denied', (o) => {
      (o as { metadata: { labels?: Record<string, string> } }).metadata.labels = {};
      // A spec change too: it bumps the generation, so the reconcile runs now instead of at the next backoff.
      o.spec = { ...o.spec, displayName: 'writable again' };
    });
    await resource('byokcredentials', ns).waitReady('denied', 'True', undefined, 30_000);
  });
});
