// Test harness for the REST API: seeds accounts (namespaces) in the shared test apiserver, runs one API server
// per test file scoped to its namespaces, records every HTTP exchange for the contract test and the canary
// checks, and captures every log line.

import { Writable } from 'node:stream';
import { expect } from '@jest/globals';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { pino } from 'pino';
import { type ApiServer, type RateLimitOptions, startApiServer } from '../../src/api/server.ts';
import type { EgressAllowList } from '../../src/domain/egress.ts';
import { publicId } from '../../src/domain/ids.ts';
import type { BYOKCredential } from '../../src/schema/generated/types.ts';
import { GROUP, VERSION } from '../../src/schema/resources.ts';
import { createManagementKey, sha256Hex } from '../../src/service/management-keys.ts';
import type { BYOKKey } from '../../src/service/mapping.ts';
import { crApi, createTestNamespace, customObjects, testKubeConfig } from './kube.ts';
import { createAccountNamespace } from './tenant.ts';

const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (
  ajv: Ajv2020,
) => Ajv2020;

export const API_VERSION = 'byok.gateway.dev/v1alpha1';

export interface Exchange {
  method: string;
  path: string;
  status: number;
  contentType: string | null;
  text: string;
  headers: Record<string, string>;
}

export interface Account {
  namespace: string;
  managementKey: string;
  /** A live gateway API key of this account (not a management key) and its hash. */
  gatewayKey: string;
  gatewayKeyHash: string;
  /** Hashes of a disabled and an expired key of this account (not live). */
  disabledKeyHash: string;
  expiredKeyHash: string;
  defaultWorkspace: string;
  defaultWorkspaceId: string;
  otherWorkspace: string;
  otherWorkspaceId: string;
}

/** A tenant namespace for the REST door; `account: false` leaves out its Account (the operator then routes nothing). */
export async function seedAccount(prefix: string, opts: { account?: boolean } = {}): Promise<Account> {
  const namespace = opts.account === false ? await createTestNamespace(prefix) : await createAccountNamespace(prefix);
  const ws = crApi('workspaces', namespace);
  await ws.create({
    apiVersion: API_VERSION,
    kind: 'Workspace',
    metadata: { name: 'main' },
    spec: { default: true, displayName: 'Main' },
  });
  await ws.create({
    apiVersion: API_VERSION,
    kind: 'Workspace',
    metadata: { name: 'team-b' },
    spec: { displayName: 'Team B' },
  });
  const keys = crApi('gatewayapikeys', namespace);
  const gatewayKey = `sk-gw-${namespace}-live`;
  const disabledKeyHash = sha256Hex(`sk-gw-${namespace}-disabled`);
  const expiredKeyHash = sha256Hex(`sk-gw-${namespace}-expired`);
  await keys.create({
    apiVersion: API_VERSION,
    kind: 'GatewayAPIKey',
    metadata: { name: 'live' },
    spec: { hash: sha256Hex(gatewayKey) },
  });
  await keys.create({
    apiVersion: API_VERSION,
    kind: 'GatewayAPIKey',
    metadata: { name: 'disabled' },
    spec: { hash: disabledKeyHash, disabled: true },
  });
  await keys.create({
    apiVersion: API_VERSION,
    kind: 'GatewayAPIKey',
    metadata: { name: 'expired' },
    spec: { hash: expiredKeyHash, expiresAt: '2020-01-01T00:00:00Z' },
  });
  const { key } = await createManagementKey(testKubeConfig(), namespace, { description: 'integration test' });
  return {
    namespace,
    managementKey: key,
    gatewayKey,
    gatewayKeyHash: sha256Hex(gatewayKey),
    disabledKeyHash,
    expiredKeyHash,
    defaultWorkspace: 'main',
    defaultWorkspaceId: publicId('Workspace', namespace, 'main'),
    otherWorkspace: 'team-b',
    otherWorkspaceId: publicId('Workspace', namespace, 'team-b'),
  };
}

export interface ErrorShape {
  code: number;
  message: string;
  metadata: Record<string, unknown> | null;
}

export interface Reply {
  status: number;
  body: { data?: BYOKKey | BYOKKey[]; total_count?: number; deleted?: boolean; error?: ErrorShape } | undefined;
  text: string;
  headers: Headers;
}

export interface CallOptions {
  key?: string | null;
  body?: unknown;
  rawBody?: string;
  contentType?: string | null;
  headers?: Record<string, string>;
}

/** The BYOKKey of a single-object response. */
export function one(r: Reply): BYOKKey {
  const d = r.body?.data;
  if (!d || Array.isArray(d)) throw new Error(`expected {data: BYOKKey}, got ${r.status} ${r.text}`);
  return d;
}

/** The page of a list response. */
export function many(r: Reply): BYOKKey[] {
  const d = r.body?.data;
  if (!Array.isArray(d)) throw new Error(`expected {data: BYOKKey[]}, got ${r.status} ${r.text}`);
  return d;
}

export function err(r: Reply): ErrorShape {
  const e = r.body?.error;
  if (!e) throw new Error(`expected an error body, got ${r.status} ${r.text}`);
  return e;
}

export interface Harness {
  server: ApiServer;
  base: string;
  exchanges: Exchange[];
  logLines: string[];
  call(method: string, path: string, opts?: CallOptions): Promise<Reply>;
  close(): Promise<void>;
}

export async function startHarness(
  namespaces: string[],
  opts: {
    gitopsGuard?: boolean;
    rateLimit?: RateLimitOptions | false;
    defaultMaxCredentials?: number;
    egress?: EgressAllowList;
  } = {},
): Promise<Harness> {
  const logLines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      logLines.push(chunk.toString('utf8'));
      cb();
    },
  });
  // trace level: every line the server could ever write is captured and checked for secrets.
  const logger = pino({ level: 'trace' }, sink);
  const server = await startApiServer({
    kubeConfig: testKubeConfig(),
    watchNamespaces: namespaces,
    logger,
    rateLimit: opts.rateLimit ?? { max: 100_000, timeWindowMs: 60_000 },
    ...(opts.gitopsGuard !== undefined ? { gitopsGuard: opts.gitopsGuard } : {}),
    ...(opts.defaultMaxCredentials !== undefined ? { defaultMaxCredentials: opts.defaultMaxCredentials } : {}),
    ...(opts.egress ? { egress: opts.egress } : {}),
  });
  const exchanges: Exchange[] = [];
  const base = server.url;
  return {
    server,
    base,
    exchanges,
    logLines,
    async call(method, path, o = {}) {
      const headers: Record<string, string> = { ...o.headers };
      if (o.key) headers.authorization = `Bearer ${o.key}`;
      let body: string | undefined;
      if (o.rawBody !== undefined) body = o.rawBody;
      else if (o.body !== undefined) body = JSON.stringify(o.body);
      if (body !== undefined && o.contentType !== null) headers['content-type'] = o.contentType ?? 'application/json';
      const res = await fetch(base + path, { method, headers, ...(body !== undefined ? { body } : {}) });
      const text = await res.text();
      const h: Record<string, string> = {};
      res.headers.forEach((v, k) => (h[k] = v));
      exchanges.push({
        method,
        path,
        status: res.status,
        contentType: res.headers.get('content-type'),
        text,
        headers: h,
      });
      let parsed: unknown;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        parsed = undefined;
      }
      return { status: res.status, body: parsed as Reply['body'], text, headers: res.headers };
    },
    close: () => server.close(),
  };
}

// ---- contract: every response validates against the served OpenAPI document ----

interface OpenApiDoc {
  paths: Record<
    string,
    Record<string, { responses: Record<string, { content?: Record<string, { schema: object }> }> }>
  >;
  components: { schemas: Record<string, object> };
}

export async function contractValidator(base: string): Promise<(ex: Exchange) => string[]> {
  const res = await fetch(`${base}/openapi.json`);
  expect(res.status).toBe(200);
  const doc = (await res.json()) as OpenApiDoc & { openapi: string };
  expect(doc.openapi).toBe('3.1.0');
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  ajv.addSchema({ $id: 'openapi', components: doc.components });
  const cache = new Map<string, ValidateFunction>();
  const templates = Object.keys(doc.paths).map((t) => ({ t, re: new RegExp(`^${t.replace(/\{[^}]+\}/g, '[^/]+')}$`) }));
  return (ex) => {
    const path = ex.path.split('?')[0] ?? '';
    if (path === '/openapi.json') return [];
    const problems: string[] = [];
    if (ex.method === 'HEAD') return [];
    if (!ex.contentType?.startsWith('application/json'))
      problems.push(`${ex.method} ${ex.path} → ${ex.status}: content-type ${ex.contentType}`);
    const tpl = templates.find((x) => x.re.test(path))?.t;
    const op = tpl ? doc.paths[tpl]?.[ex.method.toLowerCase()] : undefined;
    const response = op?.responses[String(ex.status)] ?? op?.responses.default;
    let schema: object | undefined = response?.content?.['application/json']?.schema;
    // Unknown routes and methods are not operations: their bodies must still be the error shape.
    if (!schema) {
      if (ex.status < 400) problems.push(`${ex.method} ${ex.path} → ${ex.status}: not documented`);
      schema = { $ref: '#/components/schemas/ErrorResponse' };
    }
    const key = JSON.stringify(schema);
    let validate = cache.get(key);
    if (!validate) {
      validate = ajv.compile({ $ref: `openapi${(schema as { $ref: string }).$ref}` });
      cache.set(key, validate);
    }
    let body: unknown;
    try {
      body = JSON.parse(ex.text);
    } catch {
      problems.push(`${ex.method} ${ex.path} → ${ex.status}: body is not JSON`);
      return problems;
    }
    if (!validate(body)) problems.push(`${ex.method} ${ex.path} → ${ex.status}: ${ajv.errorsText(validate.errors)}`);
    if (ex.status >= 400) {
      const code = (body as { error?: { code?: unknown } }).error?.code;
      if (code !== ex.status) problems.push(`${ex.method} ${ex.path} → ${ex.status}: error.code is ${String(code)}`);
    }
    return problems;
  };
}

export async function expectContract(h: Harness): Promise<void> {
  const check = await contractValidator(h.base);
  const problems = h.exchanges.flatMap(check);
  expect(problems).toEqual([]);
  expect(h.exchanges.length).toBeGreaterThan(0);
}

/** The BYOKCredential object behind a public id, read straight from the apiserver. */
export async function credentialObject(namespace: string, id: string): Promise<BYOKCredential | undefined> {
  const list = (await customObjects().listNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace,
    plural: 'byokcredentials',
  })) as { items: BYOKCredential[] };
  return list.items.find((c) => publicId('BYOKCredential', namespace, c.metadata.name ?? '') === id);
}
