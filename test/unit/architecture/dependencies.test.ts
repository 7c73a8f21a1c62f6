// The dependency rules of ARCHITECTURE.md, checked on the import statements of src/: a pure domain core and
// compiler, an operator and an API server that never import each other, and a CLI nothing imports.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, test } from '@jest/globals';

const src = resolve(import.meta.dirname, '..', '..', '..', 'src');

/** An import or re-export statement: group 2 marks `type`, group 3 or 4 is the specifier. */
const IMPORT_RE = /^(import|export)(\s+type)?[^'";]*?from\s+'([^']+)'|^import\s+'([^']+)'/gm;

interface Import {
  from: string;
  /** Repo-relative folder under src/ (e.g. "domain") or the package name. */
  target: string;
  typeOnly: boolean;
}

function importsOf(folder: string): Import[] {
  const out: Import[] = [];
  const dir = join(src, folder);
  for (const file of readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'))) {
    const text = readFileSync(join(dir, file), 'utf8');
    for (const m of text.matchAll(IMPORT_RE)) {
      const spec = m[3] ?? m[4] ?? '';
      const target = spec.startsWith('.') ? relative(src, resolve(dirname(join(dir, file)), spec)).split('/')[0] ?? '' : spec;
      out.push({ from: `${folder}/${file}`, target, typeOnly: Boolean(m[2]) });
    }
  }
  return out;
}

/** Every module (src-relative file or package name) a file loads at run time, transitively. */
function runtimeGraph(entry: string): Set<string> {
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = readFileSync(join(src, file), 'utf8');
    for (const m of text.matchAll(IMPORT_RE)) {
      if (m[2]) continue;
      const spec = m[3] ?? m[4] ?? '';
      if (spec.startsWith('.')) visit(relative(src, resolve(dirname(join(src, file)), spec)));
      else seen.add(spec);
    }
  };
  visit(entry);
  return seen;
}

const runtime = (imports: Import[]) => imports.filter((i) => !i.typeOnly);
const targets = (imports: Import[]) => [...new Set(imports.map((i) => i.target))].sort();

describe('dependency rules', () => {
  test('the domain core imports only itself and pure libraries (no I/O, no Kubernetes, no HTTP)', () => {
    expect(targets(runtime(importsOf('domain'))).filter((t) => !['domain', 'uuid', 'ajv', 'ajv-formats'].includes(t))).toEqual([]);
  });

  test('the compiler is pure: domain, schema types and node hashing/compression only', () => {
    expect(targets(runtime(importsOf('compiler'))).filter((t) => !['compiler', 'domain', 'node:crypto', 'node:zlib'].includes(t))).toEqual([]);
  });

  test('the gateway SDK carries no Kubernetes client and no HTTP framework', () => {
    const heavy = targets(importsOf('sdk')).filter((t) => t.startsWith('@kubernetes') || ['fastify', 'kube', 'operator', 'api', 'node:http', 'node:https'].includes(t));
    expect(heavy).toEqual([]);
  });

  test('the gateway is built only on the SDK and the domain core (no Kubernetes, operator or API server)', () => {
    const project = targets(runtime(importsOf('gateway'))).filter((t) => !t.includes(':') && !t.includes('/') && ['api', 'bundle', 'cli', 'compiler', 'controlplane', 'kube', 'operator', 'schema', 'shared'].includes(t));
    expect(project).toEqual([]);
    expect(targets(importsOf('gateway')).filter((t) => t.startsWith('@kubernetes'))).toEqual([]);
  });

  test('the operator and the API server never import each other', () => {
    expect(importsOf('operator').filter((i) => i.target === 'api')).toEqual([]);
    expect(importsOf('api').filter((i) => i.target === 'operator')).toEqual([]);
  });

  test('the spend ledger needs no Kubernetes and no HTTP: domain, the gateway contract, Redis, metrics, files', () => {
    const allowed = ['ledger', 'domain', 'gateway', 'ioredis', 'prom-client', 'pino', 'node:fs', 'node:path'];
    expect(targets(importsOf('ledger')).filter((t) => !allowed.includes(t))).toEqual([]);
    // From the gateway only the SpendGate contract (types), never its request path.
    expect(importsOf('ledger').filter((i) => i.target === 'gateway' && !i.typeOnly)).toEqual([]);
  });

  test('the long-running processes never load @kubernetes/client-node (~81 MB of RSS; issue 11)', () => {
    // Static runtime imports only: the CLI's subcommands are dynamic imports, so `main.ts operator` loads the
    // operator's graph and nothing of `dev`.
    for (const entry of ['cli/main.ts', 'operator/run.ts', 'api/server.ts', 'aggregated/server.ts', 'gateway/index.ts']) {
      const loaded = runtimeGraph(entry);
      expect(loaded.size).toBeGreaterThan(entry === 'cli/main.ts' ? 2 : 10);
      expect([...loaded].filter((m) => m.startsWith('@kubernetes/'))).toEqual([]);
    }
  });

  test('the aggregated API carries no PKI: its dev certificate comes from the dev path (controlplane/pki.ts)', () => {
    expect(runtime(importsOf('aggregated')).filter((i) => i.target === 'controlplane' || i.target.startsWith('@peculiar/'))).toEqual([]);
    expect([...runtimeGraph('aggregated/server.ts')].filter((m) => m.startsWith('controlplane/') || m.startsWith('@peculiar/'))).toEqual([]);
  });

  test('nothing imports the CLI', () => {
    const folders = readdirSync(src, { withFileTypes: true }).filter((d) => d.isDirectory() && d.name !== 'cli').map((d) => d.name);
    expect(folders.flatMap(importsOf).filter((i) => i.target === 'cli')).toEqual([]);
  });
});
