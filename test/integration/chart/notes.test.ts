// The chart's NOTES commands find what the operator actually writes: the routing objects written by the real
// compile pipeline are listed by the command NOTES prints (helm install --dry-run=server renders NOTES).
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, test } from '@jest/globals';
import pino from 'pino';
import { INDEX_NAME } from '../../../src/contract/routing.ts';
import { createCompilePipeline } from '../../../src/operator/compile/pipeline.ts';
import { createTestNamespace, kubectl, testKubeConfig, testKubeconfigPath } from '../../support/kube.ts';

const run = promisify(execFile);
const chart = join(import.meta.dirname, '..', '..', '..', 'charts', 'byok-operator');

describe('chart NOTES', () => {
  test('the configmap command lists the compiled routing objects', async () => {
    const ns = await createTestNamespace('notes');
    const pipeline = createCompilePipeline({
      kubeConfig: testKubeConfig(), routingNamespace: ns, logger: pino({ level: 'silent' }),
      source: { accountNamespaces: () => [], snapshot: () => { throw new Error('no accounts'); } },
    });
    await pipeline.start();
    await pipeline.stop();
    const { stdout } = await run(join(process.env.BYOK_CONTROL_PLANE_BIN ?? '', 'helm'),
      // A release name of its own: cluster-scoped objects of other tests' releases must not collide.
      ['install', `n${ns.slice(-8)}`, chart, '-n', ns, '--dry-run=server', '--set', 'aggregatedApi.enabled=false', '--kubeconfig', testKubeconfigPath()], { encoding: 'utf8', maxBuffer: 64 << 20 });
    const notes = stdout.slice(stdout.indexOf('NOTES:'));
    const line = notes.split('\n').find((l) => l.trim().startsWith('kubectl get configmap'));
    expect(line).toBeDefined();
    const args = line!.replace(/#.*$/, '').trim().split(/\s+/).slice(1);
    const listed = await kubectl(...args, '-o', 'name');
    expect(listed.trim().split('\n')).toContain(`configmap/${INDEX_NAME}`);
  });
});
