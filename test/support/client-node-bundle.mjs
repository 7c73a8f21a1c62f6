// @kubernetes/client-node as one file, for Jest only. Jest evaluates a test file's imports afresh in each file's
// module registry, and client-node is about 1,060 modules: importing it cost a file about 0.5 CPU-s, and about 55
// files import it. Bundled and minified by esbuild (names kept, so errors and classes read the same), the same code
// costs about 0.18 CPU-s. Built once per client-node and esbuild version into the user's cache; production code and
// every process a test starts load the package as installed.
import { existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);
/** Bump when the build options below change. */
const RECIPE = 1;

const versionOf = (pkg) => JSON.parse(readFileSync(require.resolve(`${pkg}/package.json`), 'utf8')).version;

/** The bundle's path, built if missing; undefined (Jest then loads the package as installed) when esbuild cannot. */
export function clientNodeBundle() {
  const cache =
    process.env.BYOK_CACHE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'byok-operator');
  let out;
  try {
    out = join(
      cache,
      'jest',
      `client-node-${versionOf('@kubernetes/client-node')}-esbuild-${versionOf('esbuild')}-${RECIPE}.mjs`,
    );
    if (existsSync(out)) return out;
    mkdirSync(dirname(out), { recursive: true });
    const partial = `${out}.${process.pid}.partial`;
    require('esbuild').buildSync({
      entryPoints: [require.resolve('@kubernetes/client-node')],
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node24',
      minify: true,
      keepNames: true,
      legalComments: 'none',
      logLevel: 'error',
      outfile: partial,
      // CommonJS dependencies inside call require() for Node's built-ins.
      banner: {
        js: "import { createRequire as __byokRequire } from 'node:module'; const require = __byokRequire(import.meta.url);",
      },
    });
    renameSync(partial, out);
    return out;
  } catch (err) {
    process.stderr.write(
      `[jest] @kubernetes/client-node is loaded unbundled (slower): ${err instanceof Error ? err.message : err}\n`,
    );
    return undefined;
  }
}
