// The subset of OpenAPI v3 / JSON Schema the CRDs use, with the Kubernetes extensions. Every node
// carries a description so `kubectl explain` documents every field.
export interface CelRule {
  rule: string;
  message: string;
  reason?: 'FieldValueInvalid' | 'FieldValueForbidden' | 'FieldValueRequired' | 'FieldValueDuplicate';
  fieldPath?: string;
}

export interface SchemaNode {
  type?: 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';
  description: string;
  properties?: Record<string, SchemaNode>;
  required?: string[];
  items?: SchemaNode;
  enum?: readonly string[];
  pattern?: string;
  format?: string;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  minimum?: number;
  maximum?: number;
  default?: unknown;
  nullable?: boolean;
  additionalProperties?: boolean | SchemaNode;
  'x-kubernetes-validations'?: CelRule[];
  'x-kubernetes-list-type'?: 'atomic' | 'set' | 'map';
  'x-kubernetes-list-map-keys'?: string[];
  'x-kubernetes-map-type'?: 'atomic' | 'granular';
  'x-kubernetes-preserve-unknown-fields'?: boolean;
}

export const str = (description: string, extra: Partial<SchemaNode> = {}): SchemaNode => ({
  type: 'string',
  description,
  ...extra,
});
export const bool = (description: string, extra: Partial<SchemaNode> = {}): SchemaNode => ({
  type: 'boolean',
  description,
  ...extra,
});
export const int = (description: string, extra: Partial<SchemaNode> = {}): SchemaNode => ({
  type: 'integer',
  description,
  ...extra,
});
export const num = (description: string, extra: Partial<SchemaNode> = {}): SchemaNode => ({
  type: 'number',
  description,
  ...extra,
});
export const arr = (description: string, items: SchemaNode, extra: Partial<SchemaNode> = {}): SchemaNode => ({
  type: 'array',
  description,
  items,
  ...extra,
});
export const obj = (
  description: string,
  properties: Record<string, SchemaNode>,
  extra: Partial<SchemaNode> = {},
): SchemaNode => ({
  type: 'object',
  description,
  properties,
  ...extra,
});
