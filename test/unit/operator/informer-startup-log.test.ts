// at start-up (and just after the CRDs are installed) the kube-apiserver answers the operator's watches
// with 429 "storage is (re)initializing" until its watch cache is ready. The informer retries and recovers; that must
// not be a warning in the operator's log. Any other list/watch failure still is.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, test } from '@jest/globals';
import pino from 'pino';
import { KubeApiError } from '../../../src/kube/client.ts';
import { SupervisedInformer, warmingUp } from '../../../src/kube/informer.ts';
import type { KubeAccess } from '../../../src/kube/kubeconfig.ts';

/** An apiserver that lists nothing and answers the first watch with `firstWatch`, then holds the watch open. */
async function fakeApiserver(firstWatch: {
  code: number;
  message: string;
  reason: string;
}): Promise<{ server: Server; access: KubeAccess }> {
  let watches = 0;
  const server = createServer((req, res) => {
    if (!req.url!.includes('watch=')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'List', apiVersion: 'v1', metadata: { resourceVersion: '1' }, items: [] }));
      return;
    }
    if (watches++ === 0) {
      res.writeHead(firstWatch.code, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', ...firstWatch }));
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write(
      JSON.stringify({
        type: 'BOOKMARK',
        object: { kind: 'ConfigMap', apiVersion: 'v1', metadata: { resourceVersion: '2' } },
      }) + '\n',
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  const access: KubeAccess = {
    getCurrentCluster: () => ({ name: 'fake', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }),
    applyToHTTPSOptions: async () => undefined,
  };
  return { server, access };
}

async function logsOf(
  firstWatch: { code: number; message: string; reason: string },
  restarts: string[] = [],
): Promise<{ level: number; msg: string }[]> {
  const lines: { level: number; msg: string }[] = [];
  const sink = new Writable({
    write: (chunk: Buffer, _enc, done) => (
      lines.push(
        ...chunk
          .toString()
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as { level: number; msg: string }),
      ),
      done()
    ),
  });
  const { server, access } = await fakeApiserver(firstWatch);
  cleanups.push(
    () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  const informer = new SupervisedInformer({
    kubeConfig: access,
    path: '/api/v1/configmaps',
    name: 'configmaps',
    logger: pino({ level: 'debug' }, sink),
    backoffInitialMs: 10,
    resyncSeconds: 0,
    onRestart: (r) => restarts.push(r),
  });
  cleanups.push(() => informer.stop());
  await informer.start();
  const deadline = Date.now() + 5000;
  while (!lines.some((l) => /retrying/.test(l.msg)) && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 10));
  return lines;
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('informer start-up log', () => {
  test('429 "storage is (re)initializing" is logged at info, in words that say it is expected', async () => {
    const restarts: string[] = [];
    const lines = await logsOf(
      { code: 429, reason: 'TooManyRequests', message: 'storage is (re)initializing' },
      restarts,
    );
    const retry = lines.find((l) => /retrying/.test(l.msg))!;
    expect(retry).toMatchObject({ level: 30, msg: 'the apiserver is still filling its watch cache; retrying' });
    expect(lines.filter((l) => l.level >= 40)).toEqual([]);
    // Not an error restart either: ByokInformerRestarts (reason=~"error|stale") must not page on a start-up.
    expect(restarts).toContain('warming');
    expect(restarts).not.toContain('error');
  });

  test('any other watch failure is still a warning', async () => {
    const restarts: string[] = [];
    const lines = await logsOf(
      { code: 500, reason: 'InternalError', message: 'etcdserver: request timed out' },
      restarts,
    );
    expect(lines.find((l) => /retrying/.test(l.msg))).toMatchObject({ level: 40, msg: 'list/watch failed; retrying' });
    expect(restarts).toContain('error');
  });

  test('only the watch cache 429 counts as warming up, not priority-and-fairness throttling', () => {
    const status = (message: string) => ({
      kind: 'Status',
      apiVersion: 'v1',
      status: 'Failure',
      reason: 'TooManyRequests',
      code: 429,
      message,
    });
    expect(warmingUp(new KubeApiError(429, status('storage is (re)initializing'), 'WATCH /api/v1/configmaps'))).toBe(
      true,
    );
    expect(
      warmingUp(new KubeApiError(429, status('too many requests, please try again later'), 'WATCH /api/v1/configmaps')),
    ).toBe(false);
    expect(warmingUp(new Error('storage is (re)initializing'))).toBe(false);
  });
});
