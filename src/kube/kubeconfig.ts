// A small kubeconfig loader for the long-running processes (operator, API server, gateway helpers). It does what
// they need, reading a kubeconfig or the in-cluster service account and producing TLS and auth options, without
// loading @kubernetes/client-node, whose module graph alone is a large share of the operator's memory before the
// first object (figures in docs/operator.md). Tests and dev tools that want
// client-node's generated clients keep using its KubeConfig, which satisfies the same KubeAccess interface.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import type { RequestOptions } from 'node:https';
import { homedir } from 'node:os';
import { delimiter, dirname, isAbsolute, join, resolve } from 'node:path';
import { parse } from 'yaml';

/** The cluster fields the HTTP client reads (the shape client-node's Cluster has too). */
export interface KubeCluster {
  readonly name: string;
  readonly server: string;
  readonly caData?: string | undefined;
  readonly caFile?: string | undefined;
  readonly skipTLSVerify: boolean;
  readonly tlsServerName?: string | undefined;
}

/**
 * What the Kubernetes edge needs from a kubeconfig: where the apiserver is, and fresh TLS/auth options for a
 * request. Both our Kubeconfig and client-node's KubeConfig satisfy it.
 */
export interface KubeAccess {
  getCurrentCluster(): KubeCluster | null;
  applyToHTTPSOptions(opts: RequestOptions): Promise<void>;
}

interface ExecConfig {
  apiVersion?: string;
  command: string;
  args?: string[];
  env?: { name: string; value: string }[];
  provideClusterInfo?: boolean;
}

interface UserConfig {
  token?: string;
  tokenFile?: string;
  username?: string;
  password?: string;
  certData?: string;
  certFile?: string;
  keyData?: string;
  keyFile?: string;
  exec?: ExecConfig;
  authProvider?: string;
  impersonate?: string;
  impersonateGroups?: string[];
}

interface ExecCredential {
  token?: string;
  clientCertificateData?: string;
  clientKeyData?: string;
  /** ms since the epoch; absent = valid for this process's lifetime. */
  expiresAt?: number;
}

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

type Yaml = Record<string, unknown>;
const asRecord = (v: unknown): Yaml => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Yaml) : {});
const asString = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
const named = (list: unknown): Yaml[] =>
  Array.isArray(list) ? list.map(asRecord).filter((e) => typeof e.name === 'string') : [];

/** One loaded kubeconfig: the current context's cluster and user, nothing else. */
export class Kubeconfig implements KubeAccess {
  private readonly cluster: KubeCluster;
  private readonly user: UserConfig;
  private execCache: ExecCredential | undefined;

  private constructor(cluster: KubeCluster, user: UserConfig) {
    this.cluster = cluster;
    this.user = user;
  }

  /**
   * Explicit path, then $KUBECONFIG (several files joined by the path delimiter, merged first-wins as kubectl
   * does), then the in-cluster service account, then ~/.kube/config.
   */
  static load(path?: string, env: NodeJS.ProcessEnv = process.env): Kubeconfig {
    if (path) return Kubeconfig.fromFiles([path], undefined);
    const fromEnv = (env.KUBECONFIG ?? '').split(delimiter).filter((p) => p !== '');
    if (fromEnv.length > 0)
      return Kubeconfig.fromFiles(
        fromEnv.filter((p) => existsSync(p)),
        fromEnv.join(delimiter),
      );
    if (env.KUBERNETES_SERVICE_HOST && existsSync(join(SERVICE_ACCOUNT_DIR, 'token'))) return Kubeconfig.inCluster(env);
    return Kubeconfig.fromFiles([join(homedir(), '.kube', 'config')], undefined);
  }

  /** The pod's service account: token re-read on every refresh (projected tokens rotate), the cluster CA file. */
  static inCluster(env: NodeJS.ProcessEnv = process.env, dir = SERVICE_ACCOUNT_DIR): Kubeconfig {
    const host = env.KUBERNETES_SERVICE_HOST;
    const port = env.KUBERNETES_SERVICE_PORT ?? '443';
    if (!host) throw new Error('not running in a cluster: KUBERNETES_SERVICE_HOST is not set');
    const server = `https://${host.includes(':') ? `[${host}]` : host}:${port}`;
    return new Kubeconfig(
      { name: 'inCluster', server, caFile: join(dir, 'ca.crt'), skipTLSVerify: false },
      { tokenFile: join(dir, 'token') },
    );
  }

  static fromString(text: string, baseDir: string = process.cwd()): Kubeconfig {
    return Kubeconfig.fromDocuments([{ doc: asRecord(parse(text)), baseDir }], 'kubeconfig text');
  }

  private static fromFiles(paths: string[], what: string | undefined): Kubeconfig {
    if (paths.length === 0) throw new Error(`no kubeconfig file found (KUBECONFIG=${what ?? ''})`);
    const docs = paths.map((p) => {
      const file = resolve(p);
      let text: string;
      try {
        text = readFileSync(file, 'utf8');
      } catch (err) {
        throw new Error(`cannot read kubeconfig ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, {
          cause: err,
        });
      }
      return { doc: asRecord(parse(text)), baseDir: dirname(file) };
    });
    return Kubeconfig.fromDocuments(docs, what ?? resolve(paths[0]!));
  }

  /** Merges like kubectl: the first file that sets current-context, and the first definition of each name, win. */
  private static fromDocuments(docs: { doc: Yaml; baseDir: string }[], what: string): Kubeconfig {
    const clusters = new Map<string, { entry: Yaml; baseDir: string }>();
    const users = new Map<string, { entry: Yaml; baseDir: string }>();
    const contexts = new Map<string, Yaml>();
    let current: string | undefined;
    for (const { doc, baseDir } of docs) {
      current ??= asString(doc['current-context']);
      for (const c of named(doc.clusters))
        if (!clusters.has(c.name as string)) clusters.set(c.name as string, { entry: asRecord(c.cluster), baseDir });
      for (const u of named(doc.users))
        if (!users.has(u.name as string)) users.set(u.name as string, { entry: asRecord(u.user), baseDir });
      for (const x of named(doc.contexts))
        if (!contexts.has(x.name as string)) contexts.set(x.name as string, asRecord(x.context));
    }
    if (!current) throw new Error(`kubeconfig ${what} has no current-context`);
    const context = contexts.get(current);
    if (!context) throw new Error(`kubeconfig ${what}: current-context "${current}" is not defined`);
    const clusterName = asString(context.cluster);
    const found = clusterName ? clusters.get(clusterName) : undefined;
    if (!clusterName || !found) throw new Error(`kubeconfig ${what}: context "${current}" names no defined cluster`);
    const server = asString(found.entry.server);
    if (!server) throw new Error(`kubeconfig ${what}: cluster "${clusterName}" has no server`);
    const fileIn = (base: string, v: unknown) => {
      const p = asString(v);
      return p === undefined ? undefined : isAbsolute(p) ? p : join(base, p);
    };
    const cluster: KubeCluster = {
      name: clusterName,
      server,
      caData: asString(found.entry['certificate-authority-data']),
      caFile: fileIn(found.baseDir, found.entry['certificate-authority']),
      skipTLSVerify: found.entry['insecure-skip-tls-verify'] === true,
      tlsServerName: asString(found.entry['tls-server-name']),
    };
    const userName = asString(context.user);
    const u = userName ? users.get(userName) : undefined;
    const e = u?.entry ?? {};
    const base = u?.baseDir ?? process.cwd();
    const exec = asRecord(e.exec);
    const user: UserConfig = {
      token: asString(e.token),
      tokenFile: fileIn(base, e.tokenFile),
      username: asString(e.username),
      password: asString(e.password),
      certData: asString(e['client-certificate-data']),
      certFile: fileIn(base, e['client-certificate']),
      keyData: asString(e['client-key-data']),
      keyFile: fileIn(base, e['client-key']),
      exec: asString(exec.command)
        ? {
            apiVersion: asString(exec.apiVersion),
            command: asString(exec.command)!,
            args: Array.isArray(exec.args) ? exec.args.map(String) : [],
            env: named(exec.env).map((v) => ({ name: v.name as string, value: String(v.value ?? '') })),
            provideClusterInfo: exec.provideClusterInfo === true,
          }
        : undefined,
      authProvider: asString(asRecord(e['auth-provider']).name),
      impersonate: asString(e.as),
      impersonateGroups: Array.isArray(e['as-groups']) ? e['as-groups'].map(String) : undefined,
    };
    return new Kubeconfig(cluster, user);
  }

  getCurrentCluster(): KubeCluster {
    return this.cluster;
  }

  /** TLS material and auth headers for one request; files are re-read each call so rotated ones are used. */
  async applyToHTTPSOptions(opts: RequestOptions): Promise<void> {
    const c = this.cluster;
    const u = this.user;
    if (u.authProvider) {
      throw new Error(
        `kubeconfig user uses auth-provider "${u.authProvider}", which byok-operator does not support: use an exec credential plugin (for example kubelogin) instead`,
      );
    }
    if (c.caData) opts.ca = Buffer.from(c.caData, 'base64');
    else if (c.caFile) opts.ca = readFileSync(c.caFile);
    opts.rejectUnauthorized = !c.skipTLSVerify;
    if (c.tlsServerName) opts.servername = c.tlsServerName;
    const headers: Record<string, string | string[]> = { ...(opts.headers as Record<string, string> | undefined) };
    const exec = u.exec ? this.execCredential(u.exec) : undefined;
    const cert =
      exec?.clientCertificateData ??
      (u.certData
        ? Buffer.from(u.certData, 'base64').toString()
        : u.certFile
          ? readFileSync(u.certFile, 'utf8')
          : undefined);
    const key =
      exec?.clientKeyData ??
      (u.keyData
        ? Buffer.from(u.keyData, 'base64').toString()
        : u.keyFile
          ? readFileSync(u.keyFile, 'utf8')
          : undefined);
    if (cert && key) {
      opts.cert = cert;
      opts.key = key;
    }
    const token = exec?.token ?? u.token ?? (u.tokenFile ? readFileSync(u.tokenFile, 'utf8').trim() : undefined);
    if (token) headers.Authorization = `Bearer ${token}`;
    else if (u.username !== undefined && u.password !== undefined)
      headers.Authorization = `Basic ${Buffer.from(`${u.username}:${u.password}`).toString('base64')}`;
    if (u.impersonate) headers['Impersonate-User'] = u.impersonate;
    if (u.impersonateGroups?.length) headers['Impersonate-Group'] = u.impersonateGroups;
    opts.headers = headers;
  }

  /** Runs the exec plugin (client.authentication.k8s.io) when there is no unexpired credential from it. */
  private execCredential(exec: ExecConfig): ExecCredential {
    const cached = this.execCache;
    // Renew a little early so a request never goes out with a credential that expires on the way.
    if (cached && (cached.expiresAt === undefined || cached.expiresAt - Date.now() > 10_000)) return cached;
    const apiVersion = exec.apiVersion ?? 'client.authentication.k8s.io/v1';
    const spec: Record<string, unknown> = { interactive: false };
    if (exec.provideClusterInfo) {
      spec.cluster = {
        server: this.cluster.server,
        ...(this.cluster.tlsServerName ? { 'tls-server-name': this.cluster.tlsServerName } : {}),
        'insecure-skip-tls-verify': this.cluster.skipTLSVerify,
        ...(this.cluster.caData
          ? { 'certificate-authority-data': this.cluster.caData }
          : this.cluster.caFile
            ? { 'certificate-authority-data': readFileSync(this.cluster.caFile).toString('base64') }
            : {}),
      };
    }
    let stdout: string;
    try {
      stdout = execFileSync(exec.command, exec.args ?? [], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
        timeout: 60_000,
        env: {
          ...process.env,
          ...Object.fromEntries((exec.env ?? []).map((v) => [v.name, v.value])),
          KUBERNETES_EXEC_INFO: JSON.stringify({ apiVersion, kind: 'ExecCredential', spec }),
        },
      });
    } catch (err) {
      // The plugin's stderr may echo credentials; only its exit status goes into the error.
      const status = (err as { status?: number | null }).status;
      throw new Error(
        `kubeconfig exec plugin ${exec.command} failed${status !== undefined && status !== null ? ` (exit ${status})` : ''}`,
      );
    }
    let status: Yaml;
    try {
      status = asRecord(asRecord(JSON.parse(stdout)).status);
    } catch {
      throw new Error(`kubeconfig exec plugin ${exec.command} printed no ExecCredential JSON`);
    }
    const expiry = asString(status.expirationTimestamp);
    const credential: ExecCredential = {
      token: asString(status.token),
      clientCertificateData: asString(status.clientCertificateData),
      clientKeyData: asString(status.clientKeyData),
      ...(expiry ? { expiresAt: Date.parse(expiry) } : {}),
    };
    if (!credential.token && !(credential.clientCertificateData && credential.clientKeyData)) {
      throw new Error(
        `kubeconfig exec plugin ${exec.command} returned neither a token nor a client certificate and key`,
      );
    }
    this.execCache = credential;
    return credential;
  }
}

/** Explicit path, then $KUBECONFIG, then in-cluster service account, then ~/.kube/config. */
export function loadKubeConfig(path?: string): Kubeconfig {
  return Kubeconfig.load(path);
}
