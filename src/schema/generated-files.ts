// Every generated artifact, by repo-relative path.
import { renderCrdFiles, renderTypes } from './render.ts';

export async function generatedFiles(): Promise<Map<string, string>> {
  const files = renderCrdFiles();
  files.set('src/schema/generated/types.ts', await renderTypes());
  return files;
}
