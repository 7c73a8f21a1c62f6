// Text people read never cites the product spec or the issue tracker ("rule 6", "spec 2.4", "issue 28 §1"): users
// cannot look those up. It names the routing rule in plain words and points at docs/guide/routing-rules.md. Checked
// here: the CRD descriptions (`kubectl explain`, printer columns), every string literal under src/ (CLI help and
// messages, condition and Event messages, API descriptions and errors; comments are for developers and may cite
// anything), the guide pages and the reference pages (README.md, docs/*.md, docs/contract/README.md). A figure says
// which machine it was measured on, never "this machine". The routing-rules page itself must name every rule the
// code points at.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { parseSync } from '@swc/core';
import { parseAllDocuments } from 'yaml';
import { RULES, type RuleId } from '../../../src/domain/planner.ts';
import { ROUTING_RULE_ANCHORS, ROUTING_RULES_URL, RULE_NAMES } from '../../../src/domain/routing-rules.ts';

const root = join(import.meta.dirname, '..', '..', '..');
/** "rule 6", "Rules 1-12", "spec 2.4", "issue 28", "section 1.1", "§1", "this machine", "this 2-core machine". */
const CITATION = /\b(rule|spec|issue|section)s?\s+#?\d|§\s*\d|\bthis\s+(?:[\w-]+\s+){0,2}(?:machine|VM)\b/i;

function files(dir: string, ext: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? files(p, ext) : p.endsWith(ext) ? [p] : [];
  });
}

function descriptions(node: unknown, path: string, out: [string, string][]): [string, string][] {
  if (Array.isArray(node)) node.forEach((n, i) => descriptions(n, `${path}[${i}]`, out));
  else if (node && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) {
      if (k === 'description' && typeof v === 'string') out.push([path, v]);
      else descriptions(v, `${path}.${k}`, out);
    }
  }
  return out;
}

/** Every string literal and template text in a TypeScript file (not comments). */
function literals(file: string): string[] {
  const out: string[] = [];
  const walk = (n: unknown): void => {
    if (Array.isArray(n)) return n.forEach(walk);
    if (!n || typeof n !== 'object') return;
    const node = n as { type?: string; value?: unknown; quasis?: { cooked?: string; raw: string }[] };
    if (node.type === 'StringLiteral' && typeof node.value === 'string') out.push(node.value);
    if (node.type === 'TemplateLiteral' || node.type === 'Tpl')
      out.push((node.quasis ?? []).map((q) => q.cooked ?? q.raw).join('${}'));
    for (const [k, v] of Object.entries(node)) if (k !== 'span' && v && typeof v === 'object') walk(v);
  };
  walk(parseSync(readFileSync(file, 'utf8'), { syntax: 'typescript' }));
  return out;
}

/** `file:line: text` for every citation in these files; the whole text is matched, so one wrapped over a line is found. */
function cited(paths: string[]): string[] {
  const every = new RegExp(CITATION.source, 'gi');
  return paths.flatMap((file) => {
    const text = readFileSync(file, 'utf8');
    return [...text.matchAll(every)].map((m) => {
      const line = text.slice(0, m.index).split('\n').length;
      return `${file.slice(root.length + 1)}:${line}: ${text.split('\n')[line - 1]}`;
    });
  });
}

/** Code and the comments beside it: the sources, the scripts, the image's Dockerfile, CI and the chart. */
function codeAndComments(): string[] {
  return [
    ...['src', 'test', 'bench', 'scripts', 'hack', '.ci'].flatMap((dir) =>
      ['.ts', '.mjs', '.sh', '.go', '.mod', '/run'].flatMap((ext) => files(join(root, dir), ext)),
    ),
    ...['.yaml', '.tpl', '.txt'].flatMap((ext) => files(join(root, 'charts'), ext)),
    join(root, 'Dockerfile'),
  ];
}

describe('user-facing text speaks plain words, not spec or issue numbers', () => {
  test('the regex catches what it is for', () => {
    for (const s of [
      '(rule 6)',
      'routing rules 1-12',
      'spec 2.4',
      'Issue 28 §1',
      'see §3',
      "the spec's (section 1.1)",
      'what this machine cannot show',
      'on this 2-core shared machine',
      '(this shared\n2-core VM)',
    ]) {
      expect([s, CITATION.test(s)]).toEqual([s, true]);
    }
    for (const s of [
      'the "byok-only" routing rule',
      'rule-11-model-filter',
      'spec.workspace',
      'a rule: self == oldSelf',
      '`describePayloadIssues`',
      'on a 2-core machine',
      'this host, this boot',
      'machine-readable',
      'this pod',
    ]) {
      expect([s, CITATION.test(s)]).toEqual([s, false]);
    }
  });

  test('CRD descriptions (kubectl explain) and printer column descriptions', () => {
    const found: string[] = [];
    for (const dir of ['crds', join('charts', 'byok-operator', 'crds')]) {
      for (const file of files(join(root, dir), '.yaml')) {
        for (const doc of parseAllDocuments(readFileSync(file, 'utf8'))) {
          for (const [path, text] of descriptions(doc.toJS(), '', []))
            if (CITATION.test(text)) found.push(`${dir}/${file.split('/').at(-1)}${path}: ${text}`);
        }
      }
    }
    expect(found).toEqual([]);
  });

  test('string literals under src/: CLI help and messages, condition and Event messages, API descriptions', () => {
    const found: string[] = [];
    let scanned = 0;
    for (const file of files(join(root, 'src'), '.ts')) {
      for (const text of literals(file)) {
        scanned++;
        if (CITATION.test(text)) found.push(`${file.slice(root.length + 1)}: ${text.slice(0, 160)}`);
      }
    }
    expect(found).toEqual([]);
    expect(scanned).toBeGreaterThan(2000); // the parser saw the sources, not nothing
  });

  test("the guide pages (docs/guide/*.md) and the chart's values (helm show values) and notes", () => {
    const chart = join(root, 'charts', 'byok-operator');
    expect(
      cited([
        ...files(join(root, 'docs', 'guide'), '.md'),
        join(chart, 'values.yaml'),
        join(chart, 'templates', 'NOTES.txt'),
      ]),
    ).toEqual([]);
  });

  // docs/perf/ and docs/design/ are left out: they are history and measurement records, which may name the spec's
  // rules and sections as they were measured (the tracker's issue numbers they may not: the test below).
  test('the reference pages: README.md, every docs/*.md and docs/contract/README.md', () => {
    const docs = join(root, 'docs');
    const pages = readdirSync(docs)
      .filter((f) => f.endsWith('.md'))
      .map((f) => join(docs, f));
    expect(pages.length).toBeGreaterThan(10); // the listing saw the pages, not nothing
    expect(cited([join(root, 'README.md'), ...pages, join(docs, 'contract', 'README.md')])).toEqual([]);
  });

  // Code may cite the spec ("spec 1.1 rule 3": a newcomer can open it), never the tracker: "issue 32 §2" is history a
  // newcomer cannot open. The why stays in the comment; the history and its figures go to docs/design and docs/perf,
  // which name a pass by what it did.
  test('code and its comments, the chart, the Dockerfile and the perf and design pages cite no issue numbers', () => {
    const tracker = /\bissues?[- ]#?\d/gi;
    const records = ['perf', 'design'].flatMap((dir) => files(join(root, 'docs', dir), '.md'));
    expect(records.length).toBeGreaterThan(3);
    const sources = [...codeAndComments(), ...records];
    expect(sources.length).toBeGreaterThan(500); // the listing saw the sources, not nothing
    for (const file of ['Dockerfile', '.ci/run', 'charts/byok-operator/values.yaml', 'hack/control-plane/go.mod'])
      expect(sources).toContain(join(root, file));
    const found = sources
      .filter((file) => !file.endsWith(join('schema', 'plain-words.test.ts')))
      .flatMap((file) => {
        const text = readFileSync(file, 'utf8');
        return [...text.matchAll(tracker)].map(
          (m) => `${file.slice(root.length + 1)}:${text.slice(0, m.index).split('\n').length}: ${m[0]}`,
        );
      });
    expect(found).toEqual([]);
    expect('see issue 32 §2'.match(tracker)).toEqual(['issue 3']); // the pattern finds what it is for
  });

  // A pointer is only worth its words if it opens (the same files as above): `docs/gateway.md, "Allocation and GC"`,
  // after that section moved to docs/perf, left a newcomer at a page without it. A named section is a heading that
  // starts with the words, or a paragraph led by them in bold (`**Refusals.**`), as the pages name their parts; a
  // heading's number ("1. The image") is not part of its name.
  test('every docs page code points at exists, with the section it names', () => {
    const pointer = /\b(docs\/[\w./-]*\w\.md)(?:,? \(?"([^"]+)")?/g;
    const sources = codeAndComments();
    const pages = new Map<string, string | undefined>();
    const page = (path: string) => {
      if (!pages.has(path))
        pages.set(
          path,
          statSync(join(root, path), { throwIfNoEntry: false }) && readFileSync(join(root, path), 'utf8'),
        );
      return pages.get(path);
    };
    const names = (text: string, section: string) =>
      text.split('\n').some((l) => /^#+ /.test(l) && l.replace(/^#+ (?:\d+\. )?/, '').startsWith(section)) ||
      text.includes(`**${section}`);
    let pointers = 0;
    const broken = sources
      .filter((file) => !file.endsWith(join('schema', 'plain-words.test.ts')))
      .flatMap((file) => {
        const text = readFileSync(file, 'utf8');
        return [...text.matchAll(pointer)].flatMap((m) => {
          pointers++;
          const target = page(m[1]!);
          // A section name wrapped across comment lines is read as one line.
          const section = m[2]?.replace(/\s*\n\s*(?:\/\/|\*|#)?\s*/g, ' ');
          const ok = target !== undefined && (section === undefined || names(target, section));
          return ok ? [] : [`${file.slice(root.length + 1)}:${text.slice(0, m.index).split('\n').length}: ${m[0]}`];
        });
      });
    expect(pointers).toBeGreaterThan(50); // the pattern saw the pointers, not nothing
    expect(broken).toEqual([]);
    // The check finds what it is for: a page that is not there, a section the page does not have.
    expect(page('docs/nowhere.md')).toBeUndefined();
    expect(names(page('docs/ledger.md')!, 'Refusals')).toBe(true);
    expect(names(page('docs/gateway.md')!, 'Allocation and GC')).toBe(false);
  });

  // The pages name the code they describe: a file moved or renamed left a path a reader could not open (the Account
  // gate's test, after it moved from operator/ to gateway/).
  test('every repository path and relative link on the pages (README.md, docs/) opens', () => {
    const pages = [join(root, 'README.md'), ...files(join(root, 'docs'), '.md')];
    const path = /`((?:src|test|bench|scripts|hack|charts|config|crds|docs)\/[\w./-]*\w)`/g;
    const link = /\]\(([^)\s#:]+)(?:#[^)]*)?\)/g;
    let named = 0;
    const broken = pages.flatMap((page) => {
      const text = readFileSync(page, 'utf8');
      const at = (i: number | undefined) => `${page.slice(root.length + 1)}:${text.slice(0, i).split('\n').length}`;
      return [
        ...[...text.matchAll(path)].map((m) => [m, join(root, m[1]!)] as const),
        ...[...text.matchAll(link)].map((m) => [m, join(dirname(page), m[1]!)] as const),
      ].flatMap(([m, target]) => {
        named++;
        return statSync(target, { throwIfNoEntry: false }) ? [] : [`${at(m.index)}: ${m[0]}`];
      });
    });
    expect(named).toBeGreaterThan(300); // the patterns saw the paths, not nothing
    expect(broken).toEqual([]);
  });

  test('the routing-rules page has every rule the text points at, and every name explain prints', () => {
    const page = readFileSync(join(root, 'docs', 'guide', 'routing-rules.md'), 'utf8');
    expect(ROUTING_RULES_URL.endsWith('/docs/guide/routing-rules.md')).toBe(true);
    // GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens.
    const anchors = [...page.matchAll(/^#{2,3} (.+)$/gm)].map((m) =>
      m[1]!
        .toLowerCase()
        .replace(/[^\w\s-]/g, '')
        .replace(/\s/g, '-'),
    );
    for (const anchor of Object.values(ROUTING_RULE_ANCHORS))
      expect([anchor, anchors.includes(anchor)]).toEqual([anchor, true]);
    expect(Object.keys(ROUTING_RULE_ANCHORS)).toHaveLength(12);
    // The short names the descriptions quote ('the "byok-only" routing rule') are in the page's index.
    for (const [name, anchor] of Object.entries(ROUTING_RULE_ANCHORS))
      expect([name, page.includes(`[\`${name}\`](#${anchor})`)]).toEqual([name, true]);
    for (const id of Object.keys(RULES) as RuleId[])
      expect([id, page.includes(`| ${RULE_NAMES[id]} | \`${id}\` |`)]).toEqual([id, true]);
  });
});
