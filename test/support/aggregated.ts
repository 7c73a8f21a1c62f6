// The aggregated door as the kube-aggregator reaches it: over TLS with the front-proxy client certificate of the
// test control plane and the x-remote-* identity headers.
import { readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';

/** A request to the aggregated server as the kube-aggregator sends it, for a user in system:masters. */
export function asAggregator(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  user = 'doors-admin',
): Promise<{ status: number; json: Record<string, unknown>; headers: Record<string, unknown> }> {
  const workDir = process.env.BYOK_TEST_WORKDIR ?? '';
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      `${base}${path}`,
      {
        method,
        rejectUnauthorized: false,
        cert: readFileSync(join(workDir, 'front-proxy-client.crt')),
        key: readFileSync(join(workDir, 'front-proxy-client.key')),
        headers: {
          'x-remote-user': user,
          'x-remote-group': 'system:masters',
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        // Health probes answer text/plain; everything else here is JSON.
        const json = () =>
          String(res.headers['content-type']).startsWith('application/json')
            ? (JSON.parse(text) as Record<string, unknown>)
            : { text };
        res.on('end', () => resolve({ status: res.statusCode ?? 0, json: json(), headers: res.headers }));
      },
    );
    req.on('error', reject);
    req.end(body !== undefined ? JSON.stringify(body) : undefined);
  });
}
