// Every generated artifact, by repo-relative path.
import { renderCrdFiles, renderTypes } from './render.ts';

export async function generatedFiles(): Promise<Map<string, string>> {
  const crds = renderCrdFiles();
  const files = new Map(crds);
  // The Helm chart ships the same CRDs in its crds/ folder (installed before templates, never templated).
  for (const [path, content] of crds) files.set(`charts/byok-operator/${path}`, content);
  files.set('src/schema/generated/types.ts', await renderTypes());
  return files;
}
