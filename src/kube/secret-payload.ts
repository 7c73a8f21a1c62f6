// Reading one value of a Secret, shared by the operator (cached Secrets) and `validate` (Secrets in manifests): a
// module of its own so the offline CLI does not load the Kubernetes client.
import type { V1Secret } from '@kubernetes/client-node';

/** The raw bytes of one Secret value (data is base64; stringData, rarely cached, is already text). */
export function secretPayloadBytes(secret: V1Secret | undefined, key: string): Uint8Array | undefined {
  const b64 = secret?.data?.[key];
  if (b64 !== undefined) return Buffer.from(b64, 'base64');
  const text = secret?.stringData?.[key];
  return text === undefined ? undefined : Buffer.from(text, 'utf8');
}

/** The Secret payload a credential points at, decoded; undefined when the Secret or key is absent. */
export function secretPayload(secret: V1Secret | undefined, key: string): string | undefined {
  const b64 = secret?.data?.[key];
  if (b64 !== undefined) return Buffer.from(b64, 'base64').toString('utf8');
  return secret?.stringData?.[key];
}

/**
 * The payload as text and as the bytes it was decoded from, with one base64 decode: for a reader that checks the
 * bytes (invalid UTF-8 would be decoded to U+FFFD silently) and then uses the text.
 */
export function secretPayloadValue(
  secret: V1Secret | undefined,
  key: string,
): { text: string; bytes: Uint8Array } | undefined {
  const b64 = secret?.data?.[key];
  if (b64 !== undefined) {
    const bytes = Buffer.from(b64, 'base64');
    return { text: bytes.toString('utf8'), bytes };
  }
  const text = secret?.stringData?.[key];
  return text === undefined ? undefined : { text, bytes: Buffer.from(text, 'utf8') };
}
