// kubectl's columns for byokkeys (the server-side Table): the same words as `kubectl get byok` for the same facts.
import { routingRule } from '../../../domain/routing-rules.ts';
import type { TableColumn, TableConvertor } from '../../handlers/resource.ts';
import { type ByokKeyObject, CREDENTIAL_ANNOTATION, GLOBAL_WORKSPACE, WORKSPACE_LABEL } from './object.ts';

export const TABLE_COLUMNS = [
  { name: 'ID', type: 'string', format: 'name', description: 'The credential id (metadata.name).', priority: 0 },
  {
    name: 'Credential',
    type: 'string',
    format: '',
    description: 'The backing BYOKCredential (kubectl get byok <name>).',
    priority: 0,
  },
  { name: 'Provider', type: 'string', format: '', description: 'Upstream provider slug.', priority: 0 },
  { name: 'Label', type: 'string', format: '', description: 'Masked snippet of the key.', priority: 0 },
  {
    name: 'Workspace',
    type: 'string',
    format: '',
    description: 'Workspace name, or GLOBAL (usable in every workspace of the account), as in kubectl get byok.',
    priority: 0,
  },
  {
    name: 'Fallback',
    type: 'boolean',
    format: '',
    description: `true: the fallback section, tried after shared capacity; false: prioritized, as in kubectl get byok (${routingRule('sections')}).`,
    priority: 0,
  },
  { name: 'Order', type: 'integer', format: '', description: 'sort_order within the provider.', priority: 0 },
  { name: 'Disabled', type: 'boolean', format: '', description: 'Whether the credential is disabled.', priority: 0 },
  {
    name: 'Ready',
    type: 'string',
    format: '',
    description:
      'The Ready condition: True, False, or Unknown while the operator has not reconciled the current generation (status.ready).',
    priority: 0,
  },
  {
    name: 'Reason',
    type: 'string',
    format: '',
    description: 'Why Ready has its status, e.g. PayloadInvalid, KeyNotFound, Reconciling (status.reason).',
    priority: 0,
  },
  {
    name: 'Upstream',
    type: 'string',
    format: '',
    description:
      'UpstreamHealthy reason from the gateways: Serving, Unauthorized, RateLimited, UpstreamErrors, Unused (status.upstream).',
    priority: 0,
  },
  { name: 'Age', type: 'string', format: '', description: 'Time since creation.', priority: 0 },
  {
    name: 'Last Used',
    type: 'string',
    format: '',
    description: 'Time since a gateway last used the credential upstream (status.lastUsedTime).',
    priority: 1,
  },
  {
    name: 'Delivered',
    type: 'string',
    format: '',
    description: 'Every gateway pod has loaded the current version (status.delivered).',
    priority: 1,
  },
  {
    name: 'Version',
    type: 'string',
    format: '',
    description:
      "The credential's current sealed version, the one delivered to gateway pods (status.deliveredVersion).",
    priority: 1,
  },
];

/** A tri-state as kubectl shows conditions. */
const tri = (v: unknown): string => (v === true ? 'True' : v === false ? 'False' : 'Unknown');
const text = (v: unknown): string => (typeof v === 'string' && v !== '' ? v : '<none>');

/** Like kubectl's short durations: 45s, 12m, 5h, 3d, 2y. */
export function humanAge(fromIso: string, now = Date.now()): string {
  const t = Date.parse(fromIso);
  if (Number.isNaN(t)) return '<unknown>';
  const s = Math.max(0, Math.floor((now - t) / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 10) return `${m}m${s % 60 === 0 ? '' : `${s % 60}s`}`;
  if (m < 180) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h`;
  const d = Math.floor(h / 24);
  return d < 365 * 2 ? `${d}d` : `${Math.floor(d / 365)}y`;
}

export function tableCells(o: ByokKeyObject, now = Date.now()): unknown[] {
  const s = o.spec;
  const st = o.status ?? {};
  return [
    o.metadata.name,
    o.metadata.annotations?.[CREDENTIAL_ANNOTATION] ?? '<none>',
    s.provider,
    st.label,
    o.metadata.labels?.[WORKSPACE_LABEL] ?? GLOBAL_WORKSPACE,
    s.isFallback === true,
    s.sortOrder,
    s.disabled,
    tri(st.ready),
    text(st.reason),
    text(st.upstream),
    humanAge(String(o.metadata.creationTimestamp ?? ''), now),
    typeof st.lastUsedTime === 'string' ? humanAge(st.lastUsedTime, now) : '<none>',
    tri(st.delivered),
    text(st.deliveredVersion),
  ];
}

export const byokKeysTable: TableConvertor<ByokKeyObject> = {
  columns: TABLE_COLUMNS as readonly TableColumn[],
  cells: (o) => tableCells(o),
};
