// Placeholder while the real pipeline lands; keeps the contract importable.
import type { CompilePipeline, CompilePipelineOptions } from './pipeline.ts';

export function createCompilePipeline(opts: CompilePipelineOptions): CompilePipeline {
  const dirty = new Set<string>();
  return {
    markDirty: (ns) => void dirty.add(ns),
    markAllDirty: () => opts.source.accountNamespaces().forEach((ns) => dirty.add(ns)),
    start: async () => {},
    stop: async () => {},
    flush: async () => undefined,
    onCompiled: () => () => {},
  };
}
