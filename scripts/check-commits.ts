// Checks the messages of the commits made after a recorded baseline (.ci/commit-baseline: main's HEAD when the rule
// came in; a fresh clone in CI has no other base it can know). A commit's subject is `area: what`, at most 72
// characters, then a blank line and a body that says why. A merge needs only a subject of at most 72 characters; a
// merge with git's own message ("Merge branch 'x'") is not checked at all.
//
//   node scripts/check-commits.ts [baseline]   (default: the hash in .ci/commit-baseline; `npm run verify` runs it)
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export const MAX_SUBJECT = 72;
/** `area: what`: one or more lower-case words of [a-z0-9/._-] (e.g. `docs/perf`, `chart test`), a colon, the change. */
export const SUBJECT = /^[a-z0-9/._-]+( [a-z0-9/._-]+)*: \S/;
/** The messages git writes for a merge by itself. */
const GIT_MERGE = /^Merge (branch|branches|remote-tracking branch|commit|tag|pull request) /;

/** What is wrong with one commit message (empty when nothing is); `merge` when the commit has several parents. */
export function messageProblems(message: string, merge: boolean): string[] {
  const lines = message.replace(/\r\n/g, '\n').replace(/\n+$/, '').split('\n');
  const subject = lines[0] ?? '';
  if (merge && GIT_MERGE.test(subject)) return [];
  const problems: string[] = [];
  if (subject.trim() === '') return ['the subject is empty'];
  if ([...subject].length > MAX_SUBJECT)
    problems.push(`the subject has ${[...subject].length} characters (at most ${MAX_SUBJECT})`);
  if (merge) return problems;
  if (!SUBJECT.test(subject))
    problems.push(
      'the subject is not `area: what` (a lower-case area such as `gateway` or `docs/perf`, a colon, a space, the change)',
    );
  if (lines.length > 1 && lines[1]!.trim() !== '') problems.push('no blank line after the subject');
  if (lines.slice(1).every((l) => l.trim() === '')) problems.push('no body: say why, after a blank line');
  return problems;
}

interface Commit {
  hash: string;
  merge: boolean;
  message: string;
}

/** The commits reachable from `head` and not from `baseline`, oldest first. */
function commitsSince(repo: string, baseline: string, head: string): Commit[] | 'shallow' {
  const git = (...args: string[]) =>
    execFileSync('git', ['-C', repo, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    git('cat-file', '-e', `${baseline}^{commit}`);
  } catch {
    // A shallow clone cut after the baseline cannot tell which of its commits came before it: say so, check nothing.
    if (git('rev-parse', '--is-shallow-repository').trim() === 'true') return 'shallow';
    throw new Error(`the baseline commit ${baseline} is not in this clone`);
  }
  // Records end in NUL: hash, parents, then the raw message.
  const out = git('log', '--reverse', '--format=%H%x00%P%x00%B%x00', `${baseline}..${head}`);
  const fields = out.split('\0');
  const commits: Commit[] = [];
  for (let i = 0; i + 2 < fields.length; i += 3) {
    const hash = fields[i]!.trim();
    commits.push({ hash, merge: fields[i + 1]!.trim().split(' ').length > 1, message: fields[i + 2]! });
  }
  return commits;
}

function main(): void {
  const repo = join(import.meta.dirname, '..');
  const baseline = process.argv[2] ?? readFileSync(join(repo, '.ci', 'commit-baseline'), 'utf8').trim();
  const commits = commitsSince(repo, baseline, 'HEAD');
  if (commits === 'shallow') {
    process.stderr.write(
      `[commits] a shallow clone without the baseline ${baseline.slice(0, 12)}: nothing checked (git fetch --unshallow to check)\n`,
    );
    return;
  }
  let bad = 0;
  for (const c of commits) {
    const problems = messageProblems(c.message, c.merge);
    if (problems.length === 0) continue;
    bad++;
    process.stderr.write(
      `[commits] ${c.hash.slice(0, 12)} "${c.message.split('\n')[0]}":\n${problems.map((p) => `  - ${p}\n`).join('')}`,
    );
  }
  if (bad > 0) {
    process.stderr.write(
      `[commits] ${bad} of ${commits.length} commits after ${baseline.slice(0, 12)} break the message rule (scripts/check-commits.ts); reword them (git rebase -i, reword)\n`,
    );
    process.exit(1);
  }
  process.stderr.write(`[commits] ${commits.length} commits after ${baseline.slice(0, 12)}: messages ok\n`);
}

if (process.argv[1] === import.meta.filename) {
  try {
    main();
  } catch (err) {
    process.stderr.write(`[commits] ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
}
