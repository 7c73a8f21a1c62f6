// The runtime flags the image ships, read from the Dockerfile so that benchmarks run what users run.
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const dockerfile = readFileSync(
  join(resolve(dirname(fileURLToPath(import.meta.url)), '..', '..'), 'Dockerfile'),
  'utf8',
);

/** The value of `ENV <name>=...` in the Dockerfile, if it sets one. */
export function dockerfileEnv(name: string): string | undefined {
  const m = new RegExp(`^ENV ${name}=(?:"([^"]*)"|(\\S+))`, 'm').exec(dockerfile);
  return m ? (m[1] ?? m[2]!) : undefined;
}

function imageEnv(name: string): string {
  const value = dockerfileEnv(name);
  if (value === undefined) throw new Error(`the Dockerfile sets no ${name}`);
  return value;
}

export const GATEWAY_NODE_OPTIONS = imageEnv('BYOK_GATEWAY_NODE_OPTIONS');
export const OPERATOR_NODE_OPTIONS = imageEnv('BYOK_OPERATOR_NODE_OPTIONS');
/** The allocator settings every process of the image gets (LD_PRELOAD is set by the caller where jemalloc exists). */
export const IMAGE_ENV: Record<string, string> = {
  MALLOC_CONF: imageEnv('MALLOC_CONF'),
  MALLOC_ARENA_MAX: imageEnv('MALLOC_ARENA_MAX'),
};
