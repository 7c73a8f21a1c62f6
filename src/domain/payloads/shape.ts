// What one payload shape owns, as the table in ../payloads.ts lists it: validation, the field its label masks, the
// upstream request it authenticates (the pure part: URL, model and which credential goes where; the gateway does the
// I/O of signing and token exchange), the non-secret facts an export routes on, and the secret material an exported
// Secret holds. A shape module imports only the domain; nothing outside it names a shape's fields.
import type { UpstreamSpec } from '../catalog.ts';
import type { EgressAllowList } from '../egress.ts';
import type { PayloadIssue } from '../errors.ts';

/** What a shape's validator is given: the trimmed text, whether it looks like JSON, and the egress exceptions. */
export interface ShapeInput {
  text: string;
  /** The text starts with `{` or `[`. */
  looksJson: boolean;
  /** Addresses and hosts an operator allows tenant URLs to use in spite of the egress policy. */
  egress: EgressAllowList;
}

/**
 * How the gateway authenticates one upstream call. `header`: the credential as one header (a bearer token or
 * Azure's `api-key`). `aws-sigv4`: the gateway signs the request (headers, and the body of a POST) with these keys.
 * `google-service-account`: the gateway exchanges the payload's service-account key for an access token at its
 * token_uri and sends it as a bearer token.
 */
export type UpstreamAuthPlan =
  | { kind: 'header'; name: string; value: string }
  | { kind: 'aws-sigv4'; service: 'bedrock'; region: string; accessKeyId: string; secretAccessKey: string }
  | { kind: 'google-service-account' };

/** Where one attempt goes and how it is authenticated, before any I/O. */
export type UpstreamPlan =
  | {
      /** `chat`: a base URL the chat-completions path is appended to; `full`: the whole URL, as the tenant gave it. */
      url: { chat: string } | { full: string };
      /** The model name sent upstream. */
      model: string;
      auth: UpstreamAuthPlan;
      /** The URL came from the tenant's payload: it goes through the egress-checked agent. */
      tenantUrl?: true;
    }
  | {
      /** Why the attempt cannot be sent with this payload and endpoint (a configuration problem, no secret in it). */
      problem: string;
    };

/** The key material an exported Secret carries, named by kind; each export target maps it to its own key names. */
export type SecretMaterial =
  | { kind: 'api-key'; apiKey: string }
  | { kind: 'aws-access-keys'; accessKeyId: string; secretAccessKey: string }
  | { kind: 'google-service-account'; document: string };

export interface PayloadShapeModule<P extends { kind: string }, F extends { kind: string }> {
  /** The parsed payload kinds this shape produces (the table routes a parsed payload back to its shape by kind). */
  readonly kinds: readonly P['kind'][];
  /** Whether the shape accepts a JSON document (a plain-key shape labels the whole text). */
  readonly takesJson: boolean;
  /** The parsed payload, or null after appending at least one issue to `errors`. */
  validate(input: ShapeInput, errors: PayloadIssue[]): P | null;
  /** The identifying field of a JSON document of this shape, which the label masks; null when there is none. */
  labelField(document: unknown): string | null;
  /** The upstream request of one attempt against a catalog endpoint. */
  upstream(payload: P, spec: UpstreamSpec, modelSlug: string): UpstreamPlan;
  /** What routing needs from the payload: its kind and non-secret fields (regions, projects, Azure resources). */
  facts(payload: P): F;
  /** The key material of an exported Secret; `part` names one entry of a payload exported as several Secrets. */
  secret(payload: P, part?: string): SecretMaterial;
}
