// Reads Kubernetes manifests (multi-document YAML or JSON) from files and folders.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join } from 'node:path';
import { parseAllDocuments } from 'yaml';

export interface LoadedManifest {
  file: string;
  index: number;
  object: unknown;
}

export function manifestFiles(path: string): string[] {
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path, { recursive: true, encoding: 'utf8' })
    .filter((f) => ['.yaml', '.yml', '.json'].includes(extname(f)))
    .map((f) => join(path, f))
    .filter((f) => statSync(f).isFile())
    .sort();
}

export function loadManifests(path: string): { manifests: LoadedManifest[]; parseErrors: string[] } {
  const manifests: LoadedManifest[] = [];
  const parseErrors: string[] = [];
  for (const file of manifestFiles(path)) {
    parseAllDocuments(readFileSync(file, 'utf8')).forEach((doc, index) => {
      if (doc.errors.length > 0) {
        parseErrors.push(`${file}#${index}: ${doc.errors[0]?.message ?? 'invalid YAML'}`);
        return;
      }
      const object: unknown = doc.toJS();
      if (object !== null && object !== undefined) manifests.push({ file, index, object });
    });
  }
  return { manifests, parseErrors };
}
