// The one line every chat completion logs, in pino's line shape but written directly: pino's `info` serialises the
// object on every line, where a template plus JSON.stringify of its strings and provider_responses costs about a third
// less (docs/perf/gateway-speed.md, "Allocation and GC").
import pino, { type Logger } from 'pino';
import type { ProviderResponse } from './generations.ts';

export interface AccessLine {
  generationId: string;
  account: string;
  apiKeyHash: string;
  model: string;
  status: number;
  stream: boolean;
  streamError: string | undefined;
  providerResponses: readonly ProviderResponse[];
  durationMs: number;
  overheadMs: number;
}

export interface AccessLog {
  write(line: AccessLine): void;
}

const MESSAGE = 'chat completion';

// The rounded and shortened values both writers log.
const keyPrefix = (l: AccessLine) => l.apiKeyHash.slice(0, 12);
const durationMs = (l: AccessLine) => Math.round(l.durationMs * 10) / 10;
const overheadMs = (l: AccessLine) => Math.round(l.overheadMs * 100) / 100;

/** The line's fields as pino logs them (the same names and order as the direct writer). */
function fields(l: AccessLine): Record<string, unknown> {
  return {
    generation_id: l.generationId,
    account: l.account,
    api_key_hash: keyPrefix(l),
    model: l.model,
    status: l.status,
    stream: l.stream,
    // pino leaves undefined fields out, as the direct writer does.
    stream_error: l.streamError || undefined,
    provider_responses: l.providerResponses,
    duration_ms: durationMs(l),
    overhead_ms: overheadMs(l),
  };
}

/** Through `log.info`: any pino logger, its formatters, hooks and redaction included. */
export function pinoAccessLog(log: Logger | undefined): AccessLog {
  return { write: (l) => log?.info(fields(l), MESSAGE) };
}

/**
 * Writes pino's default line shape (`{"level":30,"time":<epoch ms>,<bindings>,...,"msg":...}`) straight to the
 * logger's destination. Only for a logger with pino's default formatters, time, message key and no mixin or hooks,
 * as createLogger builds them (test/unit/gateway/access-log.test.ts compares the two writers byte for byte).
 */
export function directAccessLog(log: Logger): AccessLog {
  const target = log as unknown as Record<symbol, unknown>;
  const chindings = target[pino.symbols.chindingsSym];
  const stream = target[pino.symbols.streamSym] as { write?: (line: string) => unknown } | undefined;
  if (typeof chindings !== 'string' || typeof stream?.write !== 'function') return pinoAccessLog(log);
  const infoLevel = log.levels.values.info!;
  const head = `{"level":${infoLevel},"time":`;
  return {
    write(l) {
      if (!log.isLevelEnabled('info')) return;
      const streamError = l.streamError ? `,"stream_error":${JSON.stringify(l.streamError)}` : '';
      stream.write!(
        `${head}${Date.now()}${chindings},"generation_id":${JSON.stringify(l.generationId)},"account":${JSON.stringify(l.account)},"api_key_hash":${JSON.stringify(keyPrefix(l))},"model":${JSON.stringify(l.model)},"status":${l.status},"stream":${l.stream}${streamError},"provider_responses":${JSON.stringify(l.providerResponses)},"duration_ms":${durationMs(l)},"overhead_ms":${overheadMs(l)},"msg":"${MESSAGE}"}\n`,
      );
    },
  };
}
