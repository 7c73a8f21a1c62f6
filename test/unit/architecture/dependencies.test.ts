// The dependency rules of docs/ARCHITECTURE.md, checked on the import statements of src/: every room on a level
// and every import pointing into its own room or to a lower level (the diagram, which is checked against the
// table here), a pure domain core and compiler, the formats between processes only in contract/, process rooms
// that never import each other, two API doors (REST and aggregated) over one service that never import each other,
// no import cycle between rooms nor between files, and a CLI nothing imports.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { type ModuleReference, moduleReferences } from '../../support/module-imports.ts';

const root = resolve(import.meta.dirname, '..', '..', '..');
const src = join(root, 'src');

const parsed = new Map<string, ModuleReference[]>();
/** The imports, re-exports and dynamic imports of a src-relative file, parsed once per run. */
function referencesOf(file: string): ModuleReference[] {
  let refs = parsed.get(file);
  if (!refs) {
    refs = moduleReferences(readFileSync(join(src, file), 'utf8'), file);
    parsed.set(file, refs);
  }
  return refs;
}

/** The src-relative file a relative specifier of `file` names, or the specifier itself (a package). */
const resolveSpec = (file: string, spec: string) =>
  spec.startsWith('.') ? relative(src, resolve(dirname(join(src, file)), spec)) : spec;

interface Import {
  from: string;
  /** Repo-relative folder under src/ (e.g. "domain") or the package name. */
  target: string;
  /** The specifier as written. */
  spec: string;
  /** The src-relative file a relative specifier names, or the package name. */
  file: string;
  typeOnly: boolean;
}

/**
 * The levels of docs/ARCHITECTURE.md's diagram, top to bottom. An import (type-only ones included: they are
 * dependencies too) may point into its own room or to a lower level; rooms on one level never import each other.
 */
const LEVELS: Record<string, number> = {
  // Wiring: the `byok` command. Nothing imports it.
  cli: 6,
  // The doors and the processes, and the dev/test control plane (etcd + kube-apiserver) the CLI starts.
  api: 5,
  aggregated: 5,
  operator: 5,
  gateway: 5,
  controlplane: 5,
  // What the processes share.
  service: 4,
  ledger: 4,
  sdk: 4,
  bundle: 4,
  // The compiler's second output (other data planes' objects): pure, above the compiler it reads.
  export: 4,
  // Half a level lower, because rooms above build on them: the service on the Kubernetes client, bundle/ on the
  // compiler's bucket placement (bundle Secrets are placed like the routing ConfigMaps).
  kube: 3,
  compiler: 3,
  // Resource schemas and the formats between processes.
  schema: 2,
  contract: 2,
  // Pure rules.
  domain: 1,
};

/**
 * Imports that break the levels on purpose, each with its reason (`from -> file`). The level test fails on any
 * violation not listed here and on any entry whose import is gone.
 */
const LEVEL_EXCEPTIONS: Record<string, string> = {};

/** The rooms of the long-running processes and doors: none may import another's. */
const PROCESSES = ['operator', 'gateway', 'api', 'aggregated'];

/**
 * Process-room imports that predate the rule, each with the change that removes it (`from -> file`). The rule
 * test fails on any crossing not listed here and on any entry whose import is gone.
 */
const PENDING: Record<string, string> = {};

/** Room-to-room imports that close a cycle today, each with the change that removes it (`from -> file`). */
const PENDING_CYCLE_EDGES: Record<string, string> = {};

function sourceFiles(folder = ''): string[] {
  return readdirSync(join(src, folder), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => (folder ? `${folder}/${f}` : f));
}

function importsOf(folder: string): Import[] {
  return sourceFiles(folder).flatMap((from) =>
    referencesOf(from).map(({ spec, typeOnly }) => {
      const file = resolveSpec(from, spec);
      const target = spec.startsWith('.') ? (file.split('/')[0] ?? '') : spec;
      return { from, target, spec, file, typeOnly };
    }),
  );
}

/** Room -> rooms it imports (type imports included: they are dependencies too), each edge with its imports. */
function roomGraph(): Map<string, Map<string, string[]>> {
  const rooms = readdirSync(src, { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => d.name);
  const graph = new Map<string, Map<string, string[]>>(rooms.map((r) => [r, new Map()]));
  for (const room of rooms) {
    for (const i of importsOf(room)) {
      if (!rooms.includes(i.target) || i.target === room) continue;
      const edge = `${i.from} -> ${i.file}`;
      if (edge in PENDING_CYCLE_EDGES) continue;
      const via = graph.get(room)!;
      via.set(i.target, [...(via.get(i.target) ?? []), edge]);
    }
  }
  return graph;
}

/**
 * Every cycle of an import graph (node -> node it imports -> the imports that make the edge), one per strongly
 * connected component, as `a -> b (import) -> a (import)`. A node that imports itself is a cycle too.
 */
function cyclesOf(graph: Map<string, Map<string, string[]>>): string[] {
  // Tarjan's strongly connected components.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const components: string[][] = [];
  const connect = (room: string) => {
    index.set(room, index.size);
    low.set(room, index.get(room)!);
    stack.push(room);
    for (const next of graph.get(room)!.keys()) {
      if (!index.has(next)) {
        connect(next);
        low.set(room, Math.min(low.get(room)!, low.get(next)!));
      } else if (stack.includes(next)) low.set(room, Math.min(low.get(room)!, index.get(next)!));
    }
    if (low.get(room) === index.get(room)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        component.push(member);
      } while (member !== room);
      if (component.length > 1 || graph.get(room)!.has(room)) components.push(component);
    }
  };
  for (const room of [...graph.keys()].sort()) if (!index.has(room)) connect(room);
  // One concrete cycle per component: a shortest path back to its first room, by breadth-first search.
  return components.map((component) => {
    const start = [...component].sort()[0]!;
    const back = new Map<string, string>();
    const queue = [start];
    search: while (queue.length > 0) {
      const room = queue.shift()!;
      for (const next of graph.get(room)!.keys()) {
        if (!component.includes(next) || back.has(next)) continue;
        back.set(next, room);
        if (next === start) break search;
        queue.push(next);
      }
    }
    const path = [start];
    for (let room = back.get(start)!; room !== start; room = back.get(room)!) path.unshift(room);
    path.unshift(start);
    return path.map((room, k) => (k === 0 ? room : `${room} (${graph.get(path[k - 1]!)!.get(room)![0]})`)).join(' -> ');
  });
}

/**
 * File -> files of src/ it imports, each edge with its specifiers. Type-only imports count: they are erased at run
 * time, so a cycle through one cannot break module evaluation, but it still knots two files' designs together, and
 * src/ has none today.
 */
function fileGraph(): Map<string, Map<string, string[]>> {
  const files = sourceFiles();
  const graph = new Map<string, Map<string, string[]>>(files.map((f) => [f, new Map()]));
  for (const from of files) {
    for (const { spec, typeOnly, dynamic } of referencesOf(from)) {
      const file = resolveSpec(from, spec);
      if (!graph.has(file)) continue;
      const via = graph.get(from)!;
      const how = `${dynamic ? 'import(' : typeOnly ? 'import type ' : 'import '}'${spec}'${dynamic ? ')' : ''}`;
      via.set(file, [...(via.get(file) ?? []), how]);
    }
  }
  return graph;
}

/** Every module (src-relative file or package name) a file loads at run time through static imports, transitively. */
function runtimeGraph(entry: string): Set<string> {
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const { spec, typeOnly, dynamic } of referencesOf(file)) {
      if (typeOnly || dynamic) continue;
      if (spec.startsWith('.')) visit(resolveSpec(file, spec));
      else seen.add(spec);
    }
  };
  visit(entry);
  return seen;
}

const runtime = (imports: Import[]) => imports.filter((i) => !i.typeOnly);
const targets = (imports: Import[]) => [...new Set(imports.map((i) => i.target))].sort();

describe('dependency rules', () => {
  test('every room of src/ has a level in the diagram', () => {
    const rooms = readdirSync(src, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name);
    expect(rooms.filter((r) => !(r in LEVELS)).sort()).toEqual([]);
    expect(
      Object.keys(LEVELS)
        .filter((r) => !rooms.includes(r))
        .sort(),
    ).toEqual([]);
  });

  test('every import points into its own room or to a lower level (type-only and dynamic imports included)', () => {
    const crossing = Object.keys(LEVELS).flatMap((room) =>
      importsOf(room)
        .filter((i) => i.target in LEVELS && i.target !== room && LEVELS[i.target]! >= LEVELS[room]!)
        .map((i) => `${i.from} -> ${i.file}`),
    );
    const unexplained = crossing.filter((edge) => !(edge in LEVEL_EXCEPTIONS));
    const levelOf = (edge: string) =>
      edge
        .split(' -> ')
        .map((f) => `${f.split('/')[0]} (level ${LEVELS[f.split('/')[0]!]})`)
        .join(' -> ');
    expect(unexplained.map((edge) => `${edge}   [${levelOf(edge)}]`).sort()).toEqual([]);
    // An exception is removed once its import is gone, so the list only shrinks.
    expect(Object.keys(LEVEL_EXCEPTIONS).filter((edge) => !crossing.includes(edge))).toEqual([]);
  });

  test('the domain core imports only itself and pure libraries (no I/O, no Kubernetes, no HTTP)', () => {
    expect(
      targets(runtime(importsOf('domain'))).filter((t) => !['domain', 'uuid', 'ajv', 'ajv-formats'].includes(t)),
    ).toEqual([]);
  });

  test('the compiler is pure: domain, schema types, the condition vocabulary and node hashing/compression only', () => {
    const loaded = runtime(importsOf('compiler')).filter((i) => i.file !== 'schema/conditions.ts');
    expect(
      targets(loaded).filter((t) => !['compiler', 'contract', 'domain', 'node:crypto', 'node:zlib'].includes(t)),
    ).toEqual([]);
  });

  test('the export core is pure: domain, its own room and node hashing only', () => {
    expect(
      targets(runtime(importsOf('export'))).filter((t) => !['export', 'domain', 'node:crypto'].includes(t)),
    ).toEqual([]);
  });

  test('the condition vocabulary is constants only: it imports nothing (the compiler and every door load it)', () => {
    expect(referencesOf('schema/conditions.ts')).toEqual([]);
  });

  test('the gateway SDK carries no Kubernetes client and no HTTP framework', () => {
    const heavy = targets(importsOf('sdk')).filter(
      (t) =>
        t.startsWith('@kubernetes') ||
        ['fastify', 'kube', 'operator', 'api', 'aggregated', 'service', 'node:http', 'node:https'].includes(t),
    );
    expect(heavy).toEqual([]);
  });

  test('the gateway is built only on the SDK and the domain core (no Kubernetes, operator or API server)', () => {
    const project = targets(runtime(importsOf('gateway'))).filter(
      (t) =>
        !t.includes(':') &&
        !t.includes('/') &&
        [
          'aggregated',
          'api',
          'bundle',
          'cli',
          'compiler',
          'controlplane',
          'kube',
          'operator',
          'schema',
          'service',
          'shared',
        ].includes(t),
    );
    expect(project).toEqual([]);
    expect(targets(importsOf('gateway')).filter((t) => t.startsWith('@kubernetes'))).toEqual([]);
  });

  test('the operator and the API server (both doors and the service behind them) never import each other', () => {
    const apiSide = ['api', 'aggregated', 'service'];
    expect(importsOf('operator').filter((i) => apiSide.includes(i.target))).toEqual([]);
    for (const folder of apiSide) expect(importsOf(folder).filter((i) => i.target === 'operator')).toEqual([]);
  });

  test('the two doors never import each other: REST (api/) and aggregated (aggregated/) share only service/', () => {
    expect(importsOf('api').filter((i) => i.target === 'aggregated')).toEqual([]);
    expect(importsOf('aggregated').filter((i) => i.target === 'api')).toEqual([]);
  });

  test('the service sits below both doors: it imports neither of them, nor an HTTP framework', () => {
    expect(importsOf('service').filter((i) => ['api', 'aggregated', 'cli'].includes(i.target))).toEqual([]);
    expect(
      targets(importsOf('service')).filter((t) => t.includes('fastify') || t === 'node:http' || t === 'node:https'),
    ).toEqual([]);
  });

  test('the spend ledger needs no Kubernetes and no HTTP: domain, the spend-gate port of contract/, Redis, metrics, files', () => {
    // node:os and node:crypto: the spend journal's lock names its holder (host, a random instance id).
    const allowed = [
      'ledger',
      'domain',
      'contract',
      'ioredis',
      '@redis/client',
      'prom-client',
      'pino',
      'node:fs',
      'node:path',
      'node:module',
      'node:os',
      'node:crypto',
    ];
    expect(targets(importsOf('ledger')).filter((t) => !allowed.includes(t))).toEqual([]);
  });

  test('the ledger takes the SpendGate port from contract/, never from the gateway', () => {
    expect(importsOf('ledger').filter((i) => i.target === 'gateway')).toEqual([]);
    expect(
      importsOf('ledger')
        .filter((i) => i.target === 'contract')
        .map((i) => i.spec),
    ).toContain('../contract/spend-gate.ts');
  });

  test('contract/ (the formats between processes) imports only the domain and Node built-ins', () => {
    expect(
      targets(importsOf('contract')).filter((t) => !['contract', 'domain'].includes(t) && !t.startsWith('node:')),
    ).toEqual([]);
  });

  test('the formats between processes are declared only in contract/', () => {
    const formats = [
      'RoutingIndex',
      'IndexShard',
      'IndexPart',
      'ShardDocument',
      'BundleEnvelope',
      'GatewayStatusReport',
      'CredentialCounters',
      'ProbeResult',
      'SpendGate',
      'AdmitRequest',
      'AdmitDecision',
      'FinishedRequest',
      'RecordedSpend',
      'Reservation',
    ];
    const names = formats.join('|');
    const declaration = new RegExp(
      `^\\s*(?:export\\s+)?(?:(?:interface|class)\\s+(${names})\\b|type\\s+(${names})\\b[^,;\\n]*=)`,
      'gm',
    );
    const elsewhere: string[] = [];
    for (const file of sourceFiles()) {
      if (file.startsWith('contract/')) continue;
      for (const m of readFileSync(join(src, file), 'utf8').matchAll(declaration))
        elsewhere.push(`${file}: ${m[1] ?? m[2]}`);
    }
    expect(elsewhere).toEqual([]);
  });

  test("the processes (operator, gateway, api, aggregated) never import another process's room", () => {
    const crossing = PROCESSES.flatMap((p) =>
      importsOf(p)
        .filter((i) => i.target !== p && PROCESSES.includes(i.target))
        .map((i) => `${i.from} -> ${i.file}`),
    );
    expect([...new Set(crossing)].filter((edge) => !(edge in PENDING)).sort()).toEqual([]);
    // An entry is removed once its import is gone, so the list only shrinks.
    expect(Object.keys(PENDING).filter((edge) => !crossing.includes(edge))).toEqual([]);
  });

  test('no import cycle between rooms', () => {
    expect(cyclesOf(roomGraph())).toEqual([]);
  });

  test('no import cycle between files (type-only and dynamic imports included)', () => {
    const graph = fileGraph();
    // Guard the reader: an empty graph has no cycle either.
    expect(graph.size).toBeGreaterThan(100);
    expect([...graph.values()].reduce((edges, to) => edges + to.size, 0)).toBeGreaterThan(graph.size);
    expect(cyclesOf(graph)).toEqual([]);
  });

  /** The entry points of the processes that stay up: the CLI, the operator, both API servers, the gateway. */
  const LONG_RUNNING = ['cli/main.ts', 'operator/run.ts', 'api/server.ts', 'aggregated/server.ts', 'gateway/index.ts'];

  test('the long-running processes never load @kubernetes/client-node (~81 MB of RSS)', () => {
    // Static runtime imports only: the CLI's subcommands are dynamic imports, so `main.ts operator` loads the
    // operator's graph and nothing of `dev`.
    for (const entry of LONG_RUNNING) {
      const loaded = runtimeGraph(entry);
      expect(loaded.size).toBeGreaterThan(entry === 'cli/main.ts' ? 2 : 10);
      expect([...loaded].filter((m) => m.startsWith('@kubernetes/'))).toEqual([]);
    }
  });

  test('a Redis client is loaded only where a Redis URL is given, never by a static import', () => {
    // @redis/client is ~480 modules: statically imported, an operator without a shared ledger held them all, and
    // so did every test file that imported the operator.
    for (const entry of LONG_RUNNING) {
      const loaded = [...runtimeGraph(entry)];
      expect([entry, loaded.filter((m) => m === '@redis/client' || m === 'ioredis')]).toEqual([entry, []]);
    }
    // Both are reached through the dynamic imports of ledger/open.ts and the operator's spend writer.
    expect(runtimeGraph('ledger/redis.ts').has('@redis/client')).toBe(true);
  });

  test("the gateway's process loads only the domain modules it calls, not the compiler's public ids (uuid)", () => {
    // The domain's barrel re-exports ids.ts, which loads uuid (20 modules) for the compiler's UUIDv5 ids; the
    // gateway imports its domain values from their own files, so a request never pays for them in heap.
    const loaded = runtimeGraph('gateway/index.ts');
    expect(loaded.has('domain/planner.ts')).toBe(true); // the graph was read
    expect([...loaded].filter((m) => m === 'uuid' || m === 'domain/ids.ts' || m === 'domain/index.ts')).toEqual([]);
    expect(runtimeGraph('compiler/compile.ts').has('uuid')).toBe(true);
  });

  test('the aggregated API carries no PKI: its dev certificate comes from the dev path (controlplane/pki.ts)', () => {
    expect(
      runtime(importsOf('aggregated')).filter((i) => i.target === 'controlplane' || i.target.startsWith('@peculiar/')),
    ).toEqual([]);
    expect(
      [...runtimeGraph('aggregated/server.ts')].filter(
        (m) => m.startsWith('controlplane/') || m.startsWith('@peculiar/'),
      ),
    ).toEqual([]);
  });

  test('nothing imports the CLI', () => {
    const folders = readdirSync(src, { withFileTypes: true })
      .filter((d) => d.isDirectory() && d.name !== 'cli')
      .map((d) => d.name);
    expect(folders.flatMap(importsOf).filter((i) => i.target === 'cli')).toEqual([]);
  });
});

describe('the checks themselves', () => {
  test('the import reader sees every form of import, in either quotes, and nothing inside strings or comments', () => {
    const source = [
      `import { a } from "../operator/a.ts";`,
      `import type { B } from '../kube/b.ts';`,
      `import { type C, d } from "./c.ts";`,
      `import "./side-effect.ts";`,
      `export * from "./all.ts";`,
      `export * as ns from './ns.ts';`,
      `export { e } from "./e.ts";`,
      `export type { F } from "./f.ts";`,
      `export async function load() { return import("./lazy.ts"); }`,
      `const later = () => import(\`./template.ts\`);`,
      `// import { no } from "./comment.ts";`,
      `const text = "import { no } from './string.ts'";`,
    ].join('\n');
    expect(
      moduleReferences(source).map((r) => `${r.spec}${r.typeOnly ? ' type' : ''}${r.dynamic ? ' dynamic' : ''}`),
    ).toEqual([
      '../operator/a.ts',
      '../kube/b.ts type',
      './c.ts',
      './side-effect.ts',
      './all.ts',
      './ns.ts',
      './e.ts',
      './f.ts type',
      './lazy.ts dynamic',
      './template.ts dynamic',
    ]);
  });

  test('a cycle is reported with the files and the imports that close it', () => {
    const graph = new Map<string, Map<string, string[]>>([
      ['operator/a.ts', new Map([['operator/b.ts', ["import './b.ts'"]]])],
      ['operator/b.ts', new Map([['operator/c.ts', ["import type './c.ts'"]]])],
      ['operator/c.ts', new Map([['operator/a.ts', ["import('./a.ts')"]]])],
      ['operator/d.ts', new Map([['operator/d.ts', ["import './d.ts'"]]])],
      ['operator/e.ts', new Map([['operator/a.ts', ["import './a.ts'"]]])],
    ]);
    expect(cyclesOf(graph).sort()).toEqual([
      "operator/a.ts -> operator/b.ts (import './b.ts') -> operator/c.ts (import type './c.ts') -> operator/a.ts (import('./a.ts'))",
      "operator/d.ts -> operator/d.ts (import './d.ts')",
    ]);
  });
});

describe('docs/ARCHITECTURE.md', () => {
  test('the level diagram shows exactly the levels of LEVELS', () => {
    const doc = readFileSync(join(root, 'docs', 'ARCHITECTURE.md'), 'utf8');
    const block = /## Rooms and levels[\s\S]*?```text\n([\s\S]*?)```/.exec(doc)?.[1];
    expect(block).toBeDefined();
    // `level N   room  room    description`, and continuation lines (indented) that add rooms to level N.
    const drawn: Record<string, number> = {};
    let level: number | undefined;
    for (const line of block!.split('\n')) {
      const head = /^level (\d+)\s/.exec(line);
      if (head) level = Number(head[1]);
      if (level === undefined || line.trim() === '') continue;
      const rooms = line
        .slice(head ? head[0].length : 0)
        .trim()
        .split(/\s{3,}/)[0]!
        .split(/\s+/);
      for (const room of rooms) drawn[room] = level;
    }
    const sorted = (levels: Record<string, number>) => Object.entries(levels).sort(([a], [b]) => a.localeCompare(b));
    expect(sorted(drawn)).toEqual(sorted(LEVELS));
  });
});
