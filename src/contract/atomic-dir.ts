// Writes a directory exactly as kubelet's AtomicWriter does for ConfigMap/Secret volumes: the payload goes into a
// fresh `..<timestamp>` directory, `..data_tmp` is symlinked to it and renamed over `..data`, and every visible
// file is a symlink `<name> -> ..data/<name>`. The previous generation is removed afterwards. It is the layout
// the SDK reads (load.ts resolves `..data` once per load), written by the dev projector and by the gateway's
// delivery stream client (src/gateway/delivery-stream.ts). Node built-ins only.
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';

let counter = 0;

export function kubeletWrite(dir: string, files: Record<string, Buffer | string>): string {
  mkdirSync(dir, { recursive: true });
  let previous: string | undefined;
  try {
    previous = readlinkSync(join(dir, '..data'));
  } catch {
    previous = undefined;
  }
  const ts = `..${new Date().toISOString().replace(/[:.]/g, '_')}.${process.pid}${counter++}`;
  mkdirSync(join(dir, ts));
  for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, ts, name), content);
  const tmp = join(dir, '..data_tmp');
  if (existsSync(tmp)) unlinkSync(tmp);
  symlinkSync(ts, tmp);
  renameSync(tmp, join(dir, '..data'));
  // Visible names: add links for new files, remove links for files no longer in the payload.
  for (const name of Object.keys(files)) {
    const link = join(dir, name);
    if (!existsSync(link)) symlinkSync(join('..data', name), link);
  }
  for (const name of readdirSync(dir)) {
    if (name.startsWith('..') || name in files) continue;
    if (lstatSync(join(dir, name)).isSymbolicLink()) unlinkSync(join(dir, name));
  }
  if (previous) rmSync(join(dir, previous), { recursive: true, force: true });
  return ts;
}
