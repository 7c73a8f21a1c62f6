// Preloaded with `node --import` by tests that check a process's module graph: appends every npm package the
// process resolves (once each) to $MODULE_TRACE_FILE.
import { appendFileSync } from 'node:fs';
import { registerHooks } from 'node:module';

const out = process.env.MODULE_TRACE_FILE;
const seen = new Set();
registerHooks({
  resolve(specifier, context, next) {
    const resolved = next(specifier, context);
    const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(resolved.url);
    if (out && m && !seen.has(m[1])) {
      seen.add(m[1]);
      appendFileSync(out, `${m[1]}\n`);
    }
    return resolved;
  },
});
