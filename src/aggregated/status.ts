// Kubernetes Status bodies for the aggregated door, and ByokService's errors mapped onto them (422 Invalid with
// causes for field errors, as the apiserver answers for built-in kinds).
import type { ApiError } from '../service/errors.ts';
import { AGG_GROUP, KIND, kubeFieldOf, kubeMessageOf, RESOURCE } from './resource.ts';

interface Cause {
  type?: string;
  field?: string;
  message: string;
}

export class StatusError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly details: Record<string, unknown> | undefined;
  constructor(code: number, reason: string, message: string, details?: Record<string, unknown>) {
    super(message);
    this.code = code;
    this.reason = reason;
    this.details = details;
  }
}

export function statusBody(code: number, reason: string, message: string, details?: Record<string, unknown>): Record<string, unknown> {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, ...(details ? { details } : {}), code };
}

export const REASONS: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  406: 'NotAcceptable',
  409: 'Conflict',
  410: 'Expired',
  413: 'RequestEntityTooLarge',
  415: 'UnsupportedMediaType',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
};

function causesOf(err: ApiError): Cause[] {
  const md = (err.metadata ?? {}) as { field?: unknown; errors?: unknown; violations?: unknown };
  const list = (Array.isArray(md.violations) ? md.violations : Array.isArray(md.errors) ? md.errors : []) as { field?: unknown; message?: unknown }[];
  if (md.field === 'key') {
    // Payload problems: the sub-field is inside the secret's document; the message never quotes the value.
    const sub = list.map((e) => `${String(e.field ?? '')}: ${String(e.message ?? '')}`);
    return [{ type: 'FieldValueInvalid', field: 'spec.key', message: sub.length > 0 ? sub.join('; ') : err.message }];
  }
  if (list.length > 0) return list.map((e) => ({ type: 'FieldValueInvalid', field: kubeFieldOf(String(e.field ?? '')), message: kubeMessageOf(String(e.message ?? '')) }));
  if (typeof md.field === 'string' && md.field !== '') return [{ type: 'FieldValueInvalid', field: kubeFieldOf(md.field), message: kubeMessageOf(err.message) }];
  return [];
}

/** ByokService's errors → Kubernetes Status. A field-level 400 becomes 422 Invalid with causes, as for built-in kinds. */
export function statusFromApiError(err: ApiError, name?: string): StatusError {
  const details = { ...(name ? { name } : {}), group: AGG_GROUP, kind: RESOURCE };
  if (err.status === 400) {
    const causes = causesOf(err);
    if (causes.length > 0) {
      return new StatusError(422, 'Invalid', `${KIND}${name ? ` "${name}"` : ''} is invalid: ${kubeMessageOf(err.message)}`, { ...details, kind: KIND, causes });
    }
    return new StatusError(400, 'BadRequest', kubeMessageOf(err.message), details);
  }
  if (err.status === 404) return new StatusError(404, 'NotFound', `${RESOURCE}.${AGG_GROUP}${name ? ` "${name}"` : ''} not found`, details);
  return new StatusError(err.status, REASONS[err.status] ?? 'Unknown', err.message, details);
}
