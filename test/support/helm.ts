// helm as the tests run it: the binary of the control-plane build (BYOK_CONTROL_PLANE_BIN), the repository's chart,
// and `helm template` for the Kubernetes version that build serves, since a render sees no cluster.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { testKubeconfigPath } from './kube.ts';

const run = promisify(execFile);
const OUTPUT_LIMIT = 64 << 20;

export const CHART_DIR = join(import.meta.dirname, '..', '..', 'charts', 'byok-operator');

export const helmBin = (): string => join(process.env.BYOK_CONTROL_PLANE_BIN ?? '', 'helm');

/** The kube-apiserver version the control-plane build made (`1.34.4`), from the build's versions.json. */
export function servedKubeVersion(): string {
  const bin = process.env.BYOK_CONTROL_PLANE_BIN;
  if (!bin) throw new Error('BYOK_CONTROL_PLANE_BIN is not set: run the chart tests through `npm test`');
  const file = join(bin, 'versions.json');
  return (JSON.parse(readFileSync(file, 'utf8')) as { kubernetes: string }).kubernetes.replace(/^v/, '');
}

export interface TemplateOptions {
  namespace: string;
  /** `rel` unless given. */
  release?: string;
  /** The repository's chart unless given. */
  chart?: string;
  /** `--set` values, in order. */
  set?: readonly string[];
  /** `--set-string` values, after the `--set` ones. */
  setString?: readonly string[];
  /** Only these templates (`--show-only`). */
  showOnly?: readonly string[];
}

// Each render is a helm process of 0.2-0.3 CPU-s; within a test file the same arguments render once.
const renders = new Map<string, Promise<string>>();

/** `helm template` with these options; the same options in one test file share one render. */
export function helmTemplate(options: TemplateOptions): Promise<string> {
  const args = [
    'template',
    options.release ?? 'rel',
    options.chart ?? CHART_DIR,
    '-n',
    options.namespace,
    '--kube-version',
    servedKubeVersion(),
    ...(options.set ?? []).flatMap((value) => ['--set', value]),
    ...(options.setString ?? []).flatMap((value) => ['--set-string', value]),
    ...(options.showOnly ?? []).flatMap((template) => ['--show-only', template]),
  ];
  const key = JSON.stringify(args);
  let render = renders.get(key);
  if (!render) {
    render = run(helmBin(), args, { encoding: 'utf8', maxBuffer: OUTPUT_LIMIT }).then((r) => r.stdout);
    renders.set(key, render);
  }
  return render;
}

/** helm against a real apiserver (install, upgrade, uninstall, `--dry-run=server`): the worker's unless told. */
export async function helm(args: readonly string[], kubeconfig: string = testKubeconfigPath()): Promise<string> {
  const { stdout } = await run(helmBin(), [...args, '--kubeconfig', kubeconfig], {
    encoding: 'utf8',
    maxBuffer: OUTPUT_LIMIT,
  });
  return stdout;
}
