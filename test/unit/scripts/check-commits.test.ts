// The commit-message rule of scripts/check-commits.ts: examples of each finding, and a generator that attacks the
// parse with messages built from valid parts and then broken one way (subject length at and around 72, including
// multi-byte characters; area spellings; missing blank line; bodies of only whitespace; CRLF line ends; merges).
import { describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import { MAX_SUBJECT, messageProblems } from '../../../scripts/check-commits.ts';
import { propertyRuns } from '../../support/properties.ts';

/** Fixed seed: a failure names its case, and every run checks the same cases. */
const SEED = 44;
const RUNS = 5000;

describe('messageProblems', () => {
  test('area: what, a blank line and a body: no problem', () => {
    expect(messageProblems('gateway: relay SSE bytes as they come\n\nThe buffer held a whole event.\n', false)).toEqual(
      [],
    );
    expect(messageProblems('docs/perf: figures for the 3-worker run\n\nMeasured on 2 cores.', false)).toEqual([]);
    expect(messageProblems('chart test: export is off by default\n\nWhy.\n', false)).toEqual([]);
  });

  test('each finding is named', () => {
    expect(messageProblems('', false)).toEqual(['the subject is empty']);
    expect(messageProblems('Fix stuff\n\nbody', false)).toEqual([expect.stringContaining('is not `area: what`')]);
    expect(messageProblems('gateway:no space\n\nbody', false)).toEqual([
      expect.stringContaining('is not `area: what`'),
    ]);
    expect(messageProblems('gateway: relay\nbody right away', false)).toEqual(['no blank line after the subject']);
    expect(messageProblems('gateway: relay\n', false)).toEqual(['no body: say why, after a blank line']);
    expect(messageProblems('gateway: relay\n\n  \n\t\n', false)).toEqual(['no body: say why, after a blank line']);
    expect(messageProblems(`gateway: ${'x'.repeat(64)}\n\nbody`, false)).toEqual([
      'the subject has 73 characters (at most 72)',
    ]);
  });

  test("merges: git's own message passes; any other needs only a subject of at most 72 characters", () => {
    expect(messageProblems("Merge branch 'house' into main\n", true)).toEqual([]);
    expect(messageProblems(`Merge branch '${'h'.repeat(90)}'`, true)).toEqual([]);
    expect(messageProblems('Merge h-house: third-party schemas at pinned commits\n', true)).toEqual([]);
    expect(messageProblems(`Merge h-house: ${'x'.repeat(60)}`, true)).toEqual([
      'the subject has 75 characters (at most 72)',
    ]);
    // Not a merge: the merge exemption does not apply.
    expect(messageProblems("Merge branch 'house'\n", false)).toEqual([
      expect.stringContaining('is not `area: what`'),
      'no body: say why, after a blank line',
    ]);
  });

  const word = fc.stringMatching(/^[a-z0-9/._-]{1,10}$/);
  const area = fc.array(word, { minLength: 1, maxLength: 3 }).map((ws) => ws.join(' '));
  const what = fc
    .string({ unit: fc.constantFrom('a', 'Z', ' ', 'é', '→', '1', ':', '`'), minLength: 1, maxLength: 80 })
    .map((s) => `w${s}`);
  const body = fc
    .array(fc.stringMatching(/^[A-Za-z][A-Za-z .,]{0,40}$/), { minLength: 1, maxLength: 4 })
    .map((ls) => ls.join('\n'));
  const eol = fc.constantFrom('\n', '\r\n');

  test('generated: a well-formed message has a problem exactly when its subject is over 72 characters', () => {
    fc.assert(
      fc.property(area, what, body, eol, (a, w, b, nl) => {
        const subject = `${a}: ${w}`;
        const problems = messageProblems([subject, '', b, ''].join(nl), false);
        const length = [...subject].length;
        expect(problems).toEqual(
          length > MAX_SUBJECT ? [`the subject has ${length} characters (at most ${MAX_SUBJECT})`] : [],
        );
      }),
      { seed: SEED, numRuns: propertyRuns(RUNS) },
    );
  });

  test('generated: a message broken one way is refused, with that finding', () => {
    const broken = fc.constantFrom('no-blank', 'no-body', 'upper-area', 'no-colon');
    fc.assert(
      fc.property(area, what, body, eol, broken, (a, w, b, nl, how) => {
        const short = w.slice(0, 30).replaceAll(':', ';');
        const message = {
          'no-blank': [`${a}: ${short}`, b],
          'no-body': [`${a}: ${short}`, '', ''],
          'upper-area': [`${a.toUpperCase()}X: ${short}`, '', b],
          'no-colon': [`${a} ${short}`, '', b],
        }[how].join(nl);
        const problems = messageProblems(message, false);
        const expected = {
          'no-blank': 'no blank line',
          'no-body': 'no body',
          'upper-area': 'is not `area: what`',
          'no-colon': 'is not `area: what`',
        }[how];
        expect(problems.some((p) => p.includes(expected))).toBe(true);
      }),
      { seed: SEED, numRuns: propertyRuns(RUNS) },
    );
  });
});
