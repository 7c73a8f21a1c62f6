// The e2e's own calls to the kube-apiserver, in process (a kubectl process costs a few hundred milliseconds on a busy
// machine, which would blur the delivery figures): a request, and a watch that resolves when an event matches.
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { parse } from 'yaml';

export interface ApiObject {
  metadata: { name: string; namespace?: string; generation?: number; resourceVersion?: string };
  status?: {
    observedGeneration?: number;
    conditions?: { type: string; status: string; observedGeneration?: number; reason?: string; message?: string }[];
  };
}

export interface Api {
  call<T = ApiObject>(method: string, path: string, body?: unknown, contentType?: string): Promise<T>;
  /** Resolves with the first object (and when it arrived) for which `done` holds, watching from `resourceVersion`. */
  watchUntil(
    listPath: string,
    name: string,
    resourceVersion: string,
    done: (o: ApiObject) => boolean,
    timeoutMs: number,
  ): Promise<{ object: ApiObject; at: number }>;
}

interface Kubeconfig {
  clusters: { cluster: { server: string; 'certificate-authority-data': string } }[];
  users: { user: { 'client-certificate-data': string; 'client-key-data': string } }[];
}

export function adminApi(kubeconfigPath: string): Api {
  const kc = parse(readFileSync(kubeconfigPath, 'utf8')) as Kubeconfig;
  const b64 = (s: string) => Buffer.from(s, 'base64');
  const server = new URL(kc.clusters[0]!.cluster.server);
  const agent = new Agent({
    keepAlive: true,
    ca: b64(kc.clusters[0]!.cluster['certificate-authority-data']),
    cert: b64(kc.users[0]!.user['client-certificate-data']),
    key: b64(kc.users[0]!.user['client-key-data']),
  });
  const opts = (method: string, path: string, headers: Record<string, string>) => ({
    agent,
    method,
    host: server.hostname,
    port: server.port,
    path,
    headers,
  });

  const call = <T>(method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<T> =>
    new Promise((resolve, reject) => {
      const payload = body === undefined ? undefined : JSON.stringify(body);
      const req = request(
        opts(method, path, { accept: 'application/json', ...(payload ? { 'content-type': contentType } : {}) }),
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            if ((res.statusCode ?? 0) >= 300)
              return reject(new Error(`${method} ${path}: ${res.statusCode} ${text.slice(0, 300)}`));
            resolve(JSON.parse(text) as T);
          });
        },
      );
      req.on('error', reject);
      req.end(payload);
    });

  const watchUntil = (
    listPath: string,
    name: string,
    resourceVersion: string,
    done: (o: ApiObject) => boolean,
    timeoutMs: number,
  ) =>
    new Promise<{ object: ApiObject; at: number }>((resolve, reject) => {
      const query = `?watch=true&allowWatchBookmarks=false&resourceVersion=${resourceVersion}&fieldSelector=${encodeURIComponent(`metadata.name=${name}`)}&timeoutSeconds=${Math.ceil(timeoutMs / 1000)}`;
      let last: ApiObject | undefined;
      const req = request(opts('GET', listPath + query, { accept: 'application/json' }), (res) => {
        if (res.statusCode !== 200) return reject(new Error(`watch ${listPath}: ${res.statusCode}`));
        let buf = '';
        res.on('data', (c: Buffer) => {
          buf += c.toString('utf8');
          for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
            const line = buf.slice(0, nl);
            buf = buf.slice(nl + 1);
            const event = JSON.parse(line) as { type: string; object: ApiObject };
            if (event.type === 'ERROR') return req.destroy(new Error(`watch ${listPath}: ${line.slice(0, 300)}`));
            last = event.object;
            if (done(event.object)) {
              resolve({ object: event.object, at: Date.now() });
              req.destroy();
              return;
            }
          }
        });
        res.on('end', () =>
          reject(
            new Error(
              `watch ${listPath}/${name}: not within ${timeoutMs / 1000} s; last conditions ${JSON.stringify(last?.status?.conditions ?? [])}`,
            ),
          ),
        );
      });
      req.on('error', (e) => reject(e));
      req.end();
    });

  return { call, watchUntil };
}

/** The object's condition `type` is True and speaks of `generation` or a later one. */
export function conditionTrueFor(o: ApiObject, type: string, generation: number): boolean {
  const c = o.status?.conditions?.find((x) => x.type === type);
  return c?.status === 'True' && (c.observedGeneration ?? o.status?.observedGeneration ?? 0) >= generation;
}
