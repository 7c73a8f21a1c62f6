// The plain API key: one line, sent as a bearer token. Most providers take only this.
import type { PayloadShapeModule } from './shape.ts';
import { plainKey } from './validation.ts';

export interface ApiKeyPayload {
  kind: 'api-key';
  /** The key with surrounding whitespace removed (a trailing newline from `kubectl create secret --from-file`). */
  apiKey: string;
}

export type ApiKeyFacts = { kind: 'api-key' };

export const plainShape: PayloadShapeModule<ApiKeyPayload, ApiKeyFacts> = {
  kinds: ['api-key'],
  takesJson: false,
  validate({ text, looksJson }, errors) {
    // No provider key starts with a bracket; this catches a JSON document pasted for a plain-key provider.
    if (looksJson) {
      errors.push({ field: '', message: 'must be a plain API key string; this provider does not take a JSON payload' });
      return null;
    }
    const key = plainKey(text, errors);
    return key === null ? null : { kind: 'api-key', apiKey: key };
  },
  labelField: () => null,
  upstream: (payload, spec) => ({ url: { chat: spec.baseUrl }, model: spec.model, auth: bearer(payload.apiKey) }),
  facts: () => ({ kind: 'api-key' }),
  secret: (payload) => ({ kind: 'api-key', apiKey: payload.apiKey }),
};

/** The `authorization: Bearer` header of a key or token. */
export function bearer(token: string) {
  return { kind: 'header', name: 'authorization', value: `Bearer ${token}` } as const;
}
