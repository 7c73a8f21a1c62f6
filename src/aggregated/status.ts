// Kubernetes Status bodies for the aggregated door, and ByokService's errors mapped onto them (422 Invalid with
// causes for field errors, as the apiserver answers for built-in kinds). Each resource hands in its names and how
// the service's field names read on its objects (StatusTarget): nothing here knows a resource.
import { ApiError } from '../service/errors.ts';

interface Cause {
  type?: string;
  field?: string;
  message: string;
}

/** What a Status about one resource names: its group, resource and kind, and its fields as a client sees them. */
export interface StatusTarget {
  readonly group: string;
  /** The plural resource name (`byokkeys`). */
  readonly resource: string;
  readonly kind: string;
  /** A field name of ByokService's messages (`allowed_models[2]`) → the object's path (`spec.allowedModels[2]`). */
  fieldOf(serviceField: string): string;
  /** The same renaming inside a message. */
  messageOf(message: string): string;
}

export interface FieldCause {
  field: string;
  message: string;
}

/** A body that cannot become a request of the service (unknown field, wrong kind): 422 Invalid with these causes. */
export class InvalidObject extends Error {
  readonly causes: FieldCause[];
  constructor(causes: FieldCause[]) {
    super(causes.map((c) => `${c.field}: ${c.message}`).join('; '));
    this.name = 'InvalidObject';
    this.causes = causes;
  }
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

export function statusBody(
  code: number,
  reason: string,
  message: string,
  details?: Record<string, unknown>,
): Record<string, unknown> {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    ...(details ? { details } : {}),
    code,
  };
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

function causesOf(err: ApiError, target: StatusTarget): Cause[] {
  const md = (err.metadata ?? {}) as { field?: unknown; errors?: unknown; violations?: unknown };
  const list = (Array.isArray(md.violations) ? md.violations : Array.isArray(md.errors) ? md.errors : []) as {
    field?: unknown;
    message?: unknown;
  }[];
  if (md.field === 'key') {
    // Payload problems: the sub-field is inside the secret's document; the message never quotes the value.
    const sub = list.map((e) => `${String(e.field ?? '')}: ${String(e.message ?? '')}`);
    return [
      {
        type: 'FieldValueInvalid',
        field: target.fieldOf('key'),
        message: sub.length > 0 ? sub.join('; ') : err.message,
      },
    ];
  }
  if (list.length > 0)
    return list.map((e) => ({
      type: 'FieldValueInvalid',
      field: target.fieldOf(String(e.field ?? '')),
      message: target.messageOf(String(e.message ?? '')),
    }));
  if (typeof md.field === 'string' && md.field !== '')
    return [{ type: 'FieldValueInvalid', field: target.fieldOf(md.field), message: target.messageOf(err.message) }];
  return [];
}

/** ByokService's errors → Kubernetes Status. A field-level 400 becomes 422 Invalid with causes, as for built-in kinds. */
export function statusFromApiError(err: ApiError, target: StatusTarget, name?: string): StatusError {
  const details = { ...(name ? { name } : {}), group: target.group, kind: target.resource };
  if (err.status === 400) {
    const causes = causesOf(err, target);
    if (causes.length > 0) {
      return new StatusError(
        422,
        'Invalid',
        `${target.kind}${name ? ` "${name}"` : ''} is invalid: ${target.messageOf(err.message)}`,
        { ...details, kind: target.kind, causes },
      );
    }
    return new StatusError(400, 'BadRequest', target.messageOf(err.message), details);
  }
  if (err.status === 404)
    return new StatusError(
      404,
      'NotFound',
      `${target.resource}.${target.group}${name ? ` "${name}"` : ''} not found`,
      details,
    );
  return new StatusError(err.status, REASONS[err.status] ?? 'Unknown', err.message, details);
}

/** An InvalidObject as 422 Invalid, a service error as its Status; anything else is thrown on unchanged. */
export function statusOf(err: unknown, target: StatusTarget, name?: string): unknown {
  if (err instanceof InvalidObject) {
    return new StatusError(422, 'Invalid', `${target.kind}${name ? ` "${name}"` : ''} is invalid: ${err.message}`, {
      ...(name ? { name } : {}),
      group: target.group,
      kind: target.kind,
      causes: err.causes.map((c) => ({ type: 'FieldValueInvalid', field: c.field, message: c.message })),
    });
  }
  if (err instanceof ApiError) return statusFromApiError(err, target, name);
  return err;
}
