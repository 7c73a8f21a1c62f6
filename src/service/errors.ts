// One error shape for every non-2xx response: {"error": {"code": <status>, "message": "...", "metadata": {...}|null}}.
// Messages are written here or taken from the domain's fixed vocabulary; none is built from request data that
// could contain a secret.

export type ErrorMetadata = Record<string, unknown> | null;

export class ApiError extends Error {
  readonly status: number;
  readonly metadata: ErrorMetadata;
  readonly headers: Record<string, string>;

  constructor(status: number, message: string, metadata: ErrorMetadata = null, headers: Record<string, string> = {}) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.metadata = metadata;
    this.headers = headers;
  }
}

export interface ErrorBody {
  error: { code: number; message: string; metadata: ErrorMetadata };
}

export function errorBody(status: number, message: string, metadata: ErrorMetadata = null): ErrorBody {
  return { error: { code: status, message, metadata } };
}

export const badRequest = (message: string, metadata: ErrorMetadata = null) => new ApiError(400, message, metadata);
export const notFound = (message = 'BYOK credential not found') => new ApiError(404, message);

export const MESSAGES = {
  missingAuth: 'No auth credentials found: send Authorization: Bearer <management key>',
  invalidAuth: 'Invalid management key',
  notManagementKey: 'Only management keys can perform this operation',
  notFound: 'BYOK credential not found',
  routeNotFound: 'Route not found',
  gitManaged:
    'This credential is managed by Git (GitOps): it is not labelled app.kubernetes.io/managed-by=byok-api. Change it in its Git repository instead.',
  conflict: 'The credential was changed concurrently; retry the request',
  rateLimited: 'Rate limit exceeded for this key; retry later',
  internal: 'Internal server error',
  unsupportedMediaType: 'Unsupported Content-Type: send application/json',
  tooLarge: 'Request body is too large',
  malformedJson: 'Malformed JSON body',
  emptyBody: 'A JSON body is required',
  defaultWorkspaceMissing: 'The account has no default workspace (it was deleted): pass workspace_id',
  unknownWorkspace: 'workspace_id does not match a workspace of this account',
  backendUnavailable:
    'The Kubernetes API is unavailable; retry after the Retry-After delay (a create retried with the same Idempotency-Key is not duplicated)',
  quotaExceeded:
    'The account has reached its credential limit (Account spec.limits.maxCredentials); delete a credential or raise the limit',
  badIdempotencyKey: 'Idempotency-Key must be 1 to 255 printable ASCII characters',
  idempotencyMismatch:
    'This Idempotency-Key was already used for a different request body (or names an existing credential created without it); use a new key',
  idempotencyExpired: 'This Idempotency-Key was used longer ago than the replay window; use a new key',
  uriTooLong: 'Request line or headers too large',
  badRequestFraming: 'Malformed HTTP request',
  requestTimeout: 'Request timed out',
} as const;
