// The operator's own kubeconfig loader (src/kube/kubeconfig.ts): file layouts, merging, in-cluster, exec plugins.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import type { RequestOptions } from 'node:https';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { stringify } from 'yaml';
import { Kubeconfig } from '../../../src/kube/kubeconfig.ts';

const dir = () => mkdtempSync(join(tmpdir(), 'kubeconfig-'));
const b64 = (s: string) => Buffer.from(s).toString('base64');

function config(user: Record<string, unknown>, cluster: Record<string, unknown> = { server: 'https://10.0.0.1:6443' }) {
  return {
    apiVersion: 'v1',
    kind: 'Config',
    'current-context': 'main',
    contexts: [{ name: 'main', context: { cluster: 'c', user: 'u' } }],
    clusters: [{ name: 'c', cluster }],
    users: [{ name: 'u', user }],
  };
}

async function optionsOf(kc: Kubeconfig): Promise<RequestOptions & { headers: Record<string, string> }> {
  const opts: RequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
  return opts as RequestOptions & { headers: Record<string, string> };
}

describe('Kubeconfig', () => {
  test('inline data: CA, client certificate and key, TLS server name', async () => {
    const d = dir();
    const file = join(d, 'config');
    writeFileSync(
      file,
      stringify(
        config(
          { 'client-certificate-data': b64('CERT'), 'client-key-data': b64('KEY') },
          {
            server: 'https://api.example:6443',
            'certificate-authority-data': b64('CA'),
            'tls-server-name': 'kubernetes',
          },
        ),
      ),
    );
    const kc = Kubeconfig.load(file, {});
    expect(kc.getCurrentCluster()).toMatchObject({
      name: 'c',
      server: 'https://api.example:6443',
      skipTLSVerify: false,
      tlsServerName: 'kubernetes',
    });
    const opts = await optionsOf(kc);
    expect(opts.ca?.toString()).toBe('CA');
    expect([opts.cert, opts.key]).toEqual(['CERT', 'KEY']);
    expect(opts.servername).toBe('kubernetes');
    expect(opts.rejectUnauthorized).toBe(true);
    expect(opts.headers.Authorization).toBeUndefined();
  });

  test('file references resolve against the kubeconfig folder, and a token file is re-read (rotation)', async () => {
    const d = dir();
    writeFileSync(join(d, 'ca.crt'), 'CA-FILE');
    writeFileSync(join(d, 'token'), 'first\n');
    writeFileSync(
      join(d, 'config'),
      stringify(config({ tokenFile: 'token' }, { server: 'https://h:1', 'certificate-authority': 'ca.crt' })),
    );
    const kc = Kubeconfig.load(join(d, 'config'), {});
    expect((await optionsOf(kc)).ca?.toString()).toBe('CA-FILE');
    expect((await optionsOf(kc)).headers.Authorization).toBe('Bearer first');
    writeFileSync(join(d, 'token'), 'second');
    expect((await optionsOf(kc)).headers.Authorization).toBe('Bearer second');
  });

  test('insecure-skip-tls-verify, basic auth and impersonation', async () => {
    const d = dir();
    writeFileSync(
      join(d, 'config'),
      stringify(
        config(
          { username: 'u', password: 'p', as: 'alice', 'as-groups': ['g1', 'g2'] },
          { server: 'https://h:1', 'insecure-skip-tls-verify': true },
        ),
      ),
    );
    const opts = await optionsOf(Kubeconfig.load(join(d, 'config'), {}));
    expect(opts.rejectUnauthorized).toBe(false);
    expect(opts.headers.Authorization).toBe(`Basic ${b64('u:p')}`);
    expect(opts.headers['Impersonate-User']).toBe('alice');
    expect(opts.headers['Impersonate-Group']).toEqual(['g1', 'g2']);
  });

  test('$KUBECONFIG with several files merges first-wins, as kubectl does', () => {
    const d = dir();
    const first = config({ token: 't' }, { server: 'https://first:1' });
    first.clusters = [];
    writeFileSync(join(d, 'a'), stringify(first));
    const second = config({ token: 'other' }, { server: 'https://second:1' });
    second['current-context'] = 'ignored';
    writeFileSync(join(d, 'b'), stringify(second));
    const kc = Kubeconfig.load(undefined, {
      KUBECONFIG: [join(d, 'a'), join(d, 'missing'), join(d, 'b')].join(delimiter),
    });
    expect(kc.getCurrentCluster().server).toBe('https://second:1');
  });

  test('in cluster: the service host (IPv6 bracketed), the CA file and the projected token', async () => {
    const d = dir();
    writeFileSync(join(d, 'ca.crt'), 'SA-CA');
    writeFileSync(join(d, 'token'), 'sa-token');
    const kc = Kubeconfig.inCluster({ KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' }, d);
    expect(kc.getCurrentCluster().server).toBe('https://[fd00::1]:443');
    const opts = await optionsOf(kc);
    expect(opts.ca?.toString()).toBe('SA-CA');
    expect(opts.headers.Authorization).toBe('Bearer sa-token');
  });

  test('an exec plugin runs once while its credential is valid, again when it expires, with KUBERNETES_EXEC_INFO', async () => {
    const d = dir();
    const plugin = join(d, 'plugin.mjs');
    // Counts its runs, echoes the cluster it was given, expires after `ttl` ms.
    writeFileSync(
      plugin,
      `
      import { appendFileSync } from 'node:fs';
      appendFileSync(${JSON.stringify(join(d, 'runs'))}, 'x');
      const info = JSON.parse(process.env.KUBERNETES_EXEC_INFO);
      const ttl = Number(process.env.TTL_MS);
      process.stdout.write(JSON.stringify({ apiVersion: info.apiVersion, kind: 'ExecCredential',
        status: { token: 'exec-' + info.spec.cluster.server + '-' + process.argv[2], expirationTimestamp: new Date(Date.now() + ttl).toISOString() } }));
    `,
    );
    const write = (ttl: number) =>
      writeFileSync(
        join(d, 'config'),
        stringify(
          config(
            {
              exec: {
                apiVersion: 'client.authentication.k8s.io/v1',
                command: process.execPath,
                args: [plugin, 'arg'],
                env: [{ name: 'TTL_MS', value: String(ttl) }],
                provideClusterInfo: true,
                interactiveMode: 'Never',
              },
            },
            { server: 'https://h:1' },
          ),
        ),
      );
    write(3_600_000);
    const long = Kubeconfig.load(join(d, 'config'), {});
    expect((await optionsOf(long)).headers.Authorization).toBe('Bearer exec-https://h:1-arg');
    await optionsOf(long);
    expect(readFileSync(join(d, 'runs'), 'utf8')).toBe('x');
    // A credential that expires within the renewal margin is never reused.
    write(1_000);
    const short = Kubeconfig.load(join(d, 'config'), {});
    await optionsOf(short);
    await optionsOf(short);
    expect(readFileSync(join(d, 'runs'), 'utf8')).toBe('xxx');
  });

  test('a failing exec plugin is named with its exit status, never with what it printed', async () => {
    const d = dir();
    const canary = 'sk-canary-0123456789abcdef';
    writeFileSync(
      join(d, 'config'),
      stringify(
        config({
          exec: {
            command: process.execPath,
            args: [
              '-e',
              `console.error(${JSON.stringify(canary)}); console.log(${JSON.stringify(canary)}); process.exit(3)`,
            ],
          },
        }),
      ),
    );
    const err = await optionsOf(Kubeconfig.load(join(d, 'config'), {})).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(err?.message).toMatch(/exec plugin .* failed \(exit 3\)/);
    expect(JSON.stringify(err, Object.getOwnPropertyNames(err))).not.toContain(canary);
  });

  test('clear errors for what it does not do or cannot find', async () => {
    const d = dir();
    writeFileSync(join(d, 'oidc'), stringify(config({ 'auth-provider': { name: 'oidc', config: {} } })));
    await expect(optionsOf(Kubeconfig.load(join(d, 'oidc'), {}))).rejects.toThrow(
      /auth-provider "oidc".*exec credential plugin/,
    );
    const noContext = config({ token: 't' });
    noContext['current-context'] = 'elsewhere';
    writeFileSync(join(d, 'nocontext'), stringify(noContext));
    expect(() => Kubeconfig.load(join(d, 'nocontext'), {})).toThrow(/current-context "elsewhere" is not defined/);
    expect(() => Kubeconfig.load(join(d, 'absent'), {})).toThrow(/cannot read kubeconfig .*absent: ENOENT/);
    expect(() => Kubeconfig.inCluster({})).toThrow(/KUBERNETES_SERVICE_HOST/);
  });
});
