// docs/export.md shows what the command prints for its example: every golden block is compared with the output of
// `byok-operator export` (runExport, the command without the process around it), so the page cannot drift.
import { readFileSync } from 'node:fs';
import { describe, expect, test } from '@jest/globals';
import { DOC, refreshGolden } from '../../../hack/export/golden.ts';

describe('docs/export.md', () => {
  test('every golden block equals the command output (refresh: node hack/export/golden.ts)', async () => {
    const doc = readFileSync(DOC, 'utf8');
    expect((doc.match(/<!-- export: /g) ?? []).length).toBe(5);
    expect(await refreshGolden(doc)).toBe(doc);
  });

  test('the blocks hold output, and a changed block is seen', async () => {
    const doc = readFileSync(DOC, 'utf8');
    expect(doc).toContain('kind: AIGatewayRoute');
    expect(doc).toContain('kind: AgentgatewayBackend');
    expect(doc).toContain('virtualModels:');
    expect(doc).toMatch(/export to envoy-ai-gateway \(static\): 1 account\(s\), 3 credential\(s\)/);
    const tampered = doc.replace('priority: 1', 'priority: 7');
    expect(await refreshGolden(tampered)).not.toBe(tampered);
  });
});
