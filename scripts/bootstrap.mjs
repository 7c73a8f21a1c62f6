#!/usr/bin/env node
// Dependency-free bootstrap, runnable by any Node >= 18: makes sure a Node >= 22.19 is first on PATH
// (fetching the node-<os>-<arch> package from the npm registry when the system one is older), that
// node_modules matches package-lock.json, and (with --control-plane) that the Go-built kube-apiserver,
// etcd, kubectl and helm exist. Then it runs the given command with that toolchain.
//
//   node scripts/bootstrap.mjs [--control-plane] [--] <command> [args...]
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cacheRoot } from './cache-root.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const NODE_PACKAGE_VERSION = '24.21.0';
const MIN_NODE = [22, 19];

const log = (msg) => process.stderr.write(`[bootstrap] ${msg}\n`);
const fail = (msg) => {
  log(msg);
  process.exit(1);
};

function run(cmd, args, opts = {}) {
  const res = spawnSync(cmd, args, { stdio: 'inherit', cwd: root, ...opts });
  if (res.error) fail(`${cmd} failed to start: ${res.error.message}`);
  return res.status ?? 1;
}

function satisfiesMin(version) {
  const [major, minor] = version.replace(/^v/, '').split('.').map(Number);
  return major > MIN_NODE[0] || (major === MIN_NODE[0] && minor >= MIN_NODE[1]);
}

function ensureNode() {
  if (satisfiesMin(process.versions.node)) return dirname(process.execPath);
  const pkg = `node-${process.platform}-${process.arch}`;
  const prefix = join(root, 'tools', 'node');
  const binDir = join(prefix, 'node_modules', pkg, 'bin');
  const nodeBin = join(binDir, 'node');
  const current = existsSync(nodeBin) ? spawnSync(nodeBin, ['--version'], { encoding: 'utf8' }).stdout.trim() : '';
  if (current !== `v${NODE_PACKAGE_VERSION}`) {
    log(
      `system Node ${process.version} is older than ${MIN_NODE.join('.')}; fetching ${pkg}@${NODE_PACKAGE_VERSION} into tools/node`,
    );
    mkdirSync(prefix, { recursive: true });
    writeFileSync(join(prefix, 'package.json'), '{"private":true}\n');
    // Installs report on stderr: the wrapped command's stdout (a benchmark's JSON) stays its own.
    const status = run(
      'npm',
      [
        'install',
        '--prefix',
        prefix,
        '--no-save',
        '--no-package-lock',
        '--no-audit',
        '--no-fund',
        '--loglevel=error',
        `${pkg}@${NODE_PACKAGE_VERSION}`,
      ],
      { stdio: ['ignore', 2, 2] },
    );
    if (status !== 0 || !existsSync(nodeBin))
      fail(`could not install ${pkg}@${NODE_PACKAGE_VERSION} from the npm registry`);
  }
  return binDir;
}

function ensureDependencies(env) {
  const lock = join(root, 'package-lock.json');
  if (!existsSync(lock)) fail('package-lock.json is missing');
  const wanted = createHash('sha256')
    .update(readFileSync(lock))
    .update(process.platform + process.arch)
    .digest('hex');
  const stamp = join(root, 'node_modules', '.bootstrap-lock-sha256');
  if (existsSync(stamp) && readFileSync(stamp, 'utf8').trim() === wanted) return;
  // `npm install --no-save` rather than `npm ci`: it installs the locked versions too, but tolerates a
  // registry mirror that lacks other platforms' optional binaries (e.g. @swc/core-darwin-arm64).
  log('installing npm dependencies from package-lock.json');
  if (
    run('npm', ['install', '--no-save', '--no-audit', '--no-fund', '--loglevel=error'], {
      env,
      stdio: ['ignore', 2, 2],
    }) !== 0
  )
    fail('npm install failed');
  writeFileSync(stamp, `${wanted}\n`);
}

/**
 * Starts the control-plane build (hack/control-plane/build.sh: a cache hit in a second, minutes of Go on a first run)
 * and returns its binaries' directory once done. It runs beside the Node fetch and the npm install, which wait on the
 * network while Go compiles; it needs only bash and Go, none of what they install.
 */
function startControlPlaneBuild() {
  const child = spawn('bash', [join(root, 'hack', 'control-plane', 'build.sh')], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let stdout = '';
  child.stdout.setEncoding('utf8').on('data', (d) => (stdout += d));
  const done = new Promise((resolvePath) => {
    child.once('error', (err) => fail(`the control-plane build failed to start: ${err.message}`));
    child.once('close', (code) => {
      if (code !== 0) fail('building the control-plane binaries failed (see above)');
      resolvePath(stdout.trim().split('\n').pop());
    });
  });
  process.once('exit', () => child.exitCode === null && child.kill());
  return done;
}

const argv = process.argv.slice(2);
const wantControlPlane = argv[0] === '--control-plane';
if (wantControlPlane) argv.shift();
if (argv[0] === '--') argv.shift();

const controlPlane = wantControlPlane ? startControlPlaneBuild() : undefined;
const nodeDir = ensureNode();
const env = { ...process.env, PATH: [nodeDir, process.env.PATH ?? ''].join(delimiter) };
// V8's code cache for every Node process started from here (the CLI, the gateway, Jest's workers): a start then skips
// compiling and type-stripping what it compiled before, about half its CPU. Per user, beside the control plane's cache;
// Node checks each entry against its source, so an edited file is compiled afresh.
env.NODE_COMPILE_CACHE ??= join(cacheRoot(), 'node-compile-cache');
ensureDependencies(env);
if (controlPlane) {
  const binDir = await controlPlane;
  env.BYOK_CONTROL_PLANE_BIN = binDir;
  env.PATH = [nodeDir, binDir, process.env.PATH ?? ''].join(delimiter);
}
env.PATH = [join(root, 'node_modules', '.bin'), env.PATH].join(delimiter);
if (argv.length === 0) process.exit(0);
process.exit(run(argv[0], argv.slice(1), { env }));
