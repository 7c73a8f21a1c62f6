import { describe, expect, test } from '@jest/globals';
import type { V1Secret } from '@kubernetes/client-node';
import { secretPayload, secretPayloadBytes, secretPayloadValue } from '../../../src/kube/secret-payload.ts';

const b64 = (bytes: Buffer) => bytes.toString('base64');

describe('secret payload', () => {
  test('text and bytes from one decode agree with the separate readers, for data and stringData', () => {
    const invalidUtf8 = Buffer.from([0x73, 0x6b, 0xff, 0x2d]);
    const secret: V1Secret = {
      data: { key: b64(Buffer.from('sk-one')), bad: b64(invalidUtf8) },
      stringData: { plain: 'sk-two' },
    };
    for (const key of ['key', 'bad', 'plain']) {
      const value = secretPayloadValue(secret, key);
      expect(value?.text).toBe(secretPayload(secret, key));
      expect(Buffer.from(value!.bytes)).toEqual(Buffer.from(secretPayloadBytes(secret, key)!));
    }
    expect(secretPayloadValue(secret, 'bad')?.text).toContain('\uFFFD');
    expect(secretPayloadValue(secret, 'missing')).toBeUndefined();
    expect(secretPayloadValue(undefined, 'key')).toBeUndefined();
  });
});
