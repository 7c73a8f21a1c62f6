// Per-command help and exit statuses: `<command> --help` prints that command's own page (exit 0), and a usage
// error exits with the status the page names (2), printing the page on stderr.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { COMMAND_HELP, EXIT, USAGE } from '../../../src/cli/help.ts';

const main = join(import.meta.dirname, '..', '..', '..', 'src', 'cli', 'main.ts');
const cli = (...args: string[]) =>
  spawnSync(process.execPath, [main, ...args], {
    encoding: 'utf8',
    env: { ...process.env, KUBECONFIG: '/nonexistent' },
  });

describe('CLI help', () => {
  test.each(Object.keys(COMMAND_HELP))('%s --help prints its own page with its exit statuses', (command) => {
    const r = cli(command, '--help');
    expect(r.status).toBe(EXIT.ok);
    expect(r.stdout).toBe(COMMAND_HELP[command]);
    expect(r.stdout).toMatch(/^usage: byok-operator /);
    expect(r.stdout).toMatch(/exit status: 0 .*; 1 .*; 2 usage error/s);
  });

  test('--help, help and help <command>', () => {
    expect(cli('--help').stdout).toBe(USAGE);
    expect(cli('help').stdout).toBe(USAGE);
    expect(cli('help', 'gateway-key').stdout).toBe(COMMAND_HELP['gateway-key']);
    expect(USAGE).toContain('byok-operator <command> --help');
    // Every command of the overview has a page.
    for (const c of [
      'run',
      'operator',
      'api',
      'dev',
      'gateway',
      'validate',
      'explain',
      'management-key',
      'gateway-key',
      'bundle-key',
    ])
      expect(USAGE).toContain(c);
  });

  test.each([
    [
      'an unknown option',
      ['gateway-key', 'create', '--namespace', 'x', '--bogus'],
      'gateway-key',
      /Unknown option '--bogus'/,
    ],
    [
      'an option of another command',
      ['validate', '--namespace', 'x', 'config/samples'],
      'validate',
      /Unknown option '--namespace'/,
    ],
    ['a missing required option', ['gateway-key', 'create'], 'gateway-key', /gateway-key create needs --namespace/],
    ['a missing subcommand', ['management-key', '--namespace', 'x'], 'management-key', /usage: management-key create/],
    ['a missing argument', ['explain', '--config-dir', '/tmp'], 'explain', /explain needs --request/],
    ['a missing value', ['validate', 'config/samples', '-o'], 'validate', /argument missing|requires/i],
    // Redis without a spend journal loses what it queued through an outage when killed: said, not silently allowed.
    [
      'Redis without a spend journal',
      ['gateway', '--ledger-redis-url', 'redis://127.0.0.1:1', '--config-dir', '/tmp'],
      'gateway',
      /--ledger-redis-url needs --ledger-journal <dir>.*--ledger-journal none to run without one/,
    ],
    [
      'a spend journal without Redis',
      ['gateway', '--ledger-journal', '/tmp/j', '--config-dir', '/tmp'],
      'gateway',
      /--ledger-journal needs --ledger-redis-url/,
    ],
  ])('%s exits 2 (as the page says) with the message and the page on stderr', (_what, args, command, message) => {
    const r = cli(...args);
    expect(r.status).toBe(EXIT.usage);
    expect(COMMAND_HELP[command]).toContain(`${EXIT.usage} usage error`);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(message);
    expect(r.stderr.endsWith(COMMAND_HELP[command]!)).toBe(true);
  });

  test('an unknown command exits 2 with the overview', () => {
    const r = cli('frobnicate');
    expect(r.status).toBe(EXIT.usage);
    expect(r.stderr).toContain('unknown command frobnicate');
    expect(r.stderr.endsWith(USAGE)).toBe(true);
  });
});
