// The export report: per account and per credential, every semantic of ours the target keeps, approximates or
// drops, the derived Secrets the in-cluster controller would write, the target limits hit, and the object counts.
import type { ExportReport, SemanticNote, Treatment } from './types.ts';

const WIDTH: Record<Treatment, string> = {
  kept: 'kept        ',
  approximated: 'approximated',
  dropped: 'dropped     ',
};
const line = (indent: string, n: SemanticNote) => `${indent}${WIDTH[n.treatment]}  ${n.semantic}: ${n.detail}`;

export function formatReport(report: ExportReport): string {
  const credentials = report.accounts.reduce((sum, a) => sum + a.credentials.length, 0);
  const perAccount = report.totalObjects - report.sharedObjects;
  const out = [
    `export to ${report.target} (${report.mode}): ${report.accounts.length} account(s), ${credentials} credential(s), ${report.totalObjects} object(s): ${perAccount} per account, ${report.sharedObjects} shared`,
  ];
  out.push(report.limits.length === 0 ? 'target limits: none hit' : 'target limits:');
  for (const l of report.limits) out.push(`  ${l}`);
  if (report.conflicts.length > 0)
    out.push('name conflicts (refused, not written):', ...report.conflicts.map((c) => `  ${c}`));
  out.push('derived Secrets (the in-cluster controller writes them; this export never does):');
  for (const s of report.derivedSecrets)
    out.push(`  ${s.name}  keys: ${s.keys.join(', ') || '(none)'}  from ${s.source}`);
  for (const a of report.accounts) {
    out.push(`account ${a.namespace}: ${a.models.length} model(s), ${a.objects} object(s)`);
    for (const n of a.notes) out.push(line('  ', n));
    for (const c of a.credentials) {
      const secrets = c.derivedSecrets.map((s) => s.name);
      out.push(
        `  credential ${c.name} (${c.provider})${secrets.length > 0 ? `, Secret${secrets.length > 1 ? 's' : ''} ${secrets.join(', ')}` : ''}`,
      );
      for (const n of c.notes) out.push(line('    ', n));
    }
  }
  return `${out.join('\n')}\n`;
}
