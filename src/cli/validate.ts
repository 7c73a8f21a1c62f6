// `byok-operator validate <path>`: offline checks for GitOps CI, with the CRDs' own schemas and CEL rules.
import { validateManifest } from '../schema/validators.ts';
import { loadManifests } from './manifests.ts';

export interface ValidationReport {
  checked: number;
  problems: string[];
}

export function validatePath(path: string): ValidationReport {
  const { manifests, parseErrors } = loadManifests(path);
  const problems = [...parseErrors];
  let checked = 0;
  for (const { file, index, object } of manifests) {
    const verdict = validateManifest(object);
    if (!verdict) continue;
    checked++;
    for (const p of verdict.problems) problems.push(`${file}#${index} ${verdict.kind}/${verdict.name}: ${p.path}: ${p.message}`);
  }
  return { checked, problems };
}
