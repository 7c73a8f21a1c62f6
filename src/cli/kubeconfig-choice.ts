// Which kubeconfig a user-facing command (management-key, bundle-key, explain --cluster) uses, in kubectl's order
// (--kubeconfig, $KUBECONFIG, then ~/.kube/config; in a pod, its ServiceAccount), and then the kubeconfig of a
// running `npm run dev` (its .dev/connection.json): `npm run cli -- management-key create --namespace acme` then
// works against the dev stack on a machine with no ~/.kube. The command prints which one it used.
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { SERVICE_ACCOUNT_DIR } from '../kube/kubeconfig.ts';

export interface KubeconfigChoice {
  /** A kubeconfig file; undefined = the loader's own order ($KUBECONFIG's list, the pod's ServiceAccount, or its error). */
  path: string | undefined;
  /** Where it came from, for the line the command prints. */
  source: string;
}

export interface KubeconfigChoiceInputs {
  explicit?: string | undefined;
  env: NodeJS.ProcessEnv;
  home?: string;
  /** The dev stack's connection file (`<repo>/.dev/connection.json`, or under $BYOK_DEV_DIR). */
  devConnectionFile: string;
  exists?: (path: string) => boolean;
  readText?: (path: string) => string;
}

export function chooseKubeconfig(inputs: KubeconfigChoiceInputs): KubeconfigChoice {
  const exists = inputs.exists ?? existsSync;
  const readText = inputs.readText ?? ((p: string) => readFileSync(p, 'utf8'));
  if (inputs.explicit) return { path: inputs.explicit, source: '--kubeconfig' };
  if (inputs.env.KUBECONFIG) return { path: undefined, source: `$KUBECONFIG (${inputs.env.KUBECONFIG})` };
  if (inputs.env.KUBERNETES_SERVICE_HOST && exists(join(SERVICE_ACCOUNT_DIR, 'token')))
    return { path: undefined, source: 'in-cluster ServiceAccount' };
  const home = join(inputs.home ?? homedir(), '.kube', 'config');
  if (exists(home)) return { path: home, source: '~/.kube/config' };
  if (exists(inputs.devConnectionFile)) {
    let kubeconfig: unknown;
    try {
      kubeconfig = (JSON.parse(readText(inputs.devConnectionFile)) as { kubeconfig?: unknown }).kubeconfig;
    } catch {
      kubeconfig = undefined;
    }
    if (typeof kubeconfig === 'string' && exists(kubeconfig))
      return { path: kubeconfig, source: `the dev stack (${inputs.devConnectionFile})` };
  }
  // Nothing found: the loader's error names ~/.kube/config.
  return { path: undefined, source: '~/.kube/config' };
}
