// What a resource gives the generic verb handlers, laid out as kubernetes/sample-apiserver lays out a registry: its
// names (discovery, RBAC, Status details), a strategy (how an entry of the read model becomes an object, how the
// object is selected and ordered, how its errors read), a storage (where objects are read and written), a table
// convertor (kubectl's columns) and its OpenAPI parts. The handlers in this folder serve every verb from these; a
// resource is a folder under ../registry/ that fills them in.
import type { JsonSchema } from '../../service/key-schema.ts';
import type { StatusError, StatusTarget } from '../status.ts';

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  creationTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  [k: string]: unknown;
}

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
}

/** One resource as discovery advertises it. Advertise only implemented verbs: the namespace controller and the garbage collector act on them. */
export interface DiscoveredResource {
  name: string;
  singularName: string;
  kind: string;
  namespaced: boolean;
  verbs: readonly string[];
  shortNames: readonly string[];
  categories: readonly string[];
}

/** The type of each position of a list-order key (and so of a continue token). */
export type CursorField = 'string' | 'boolean' | 'integer';
export type CursorKey = readonly (string | boolean | number)[];

export interface Strategy<E, O extends KubeObject> {
  /** The entry as a Kubernetes object; with a resourceVersion for a DELETED watch event. Never mutated: cached per entry. */
  toObject(entry: E, resourceVersion?: string): O;
  /** Field labels a fieldSelector may name, and their values on an object. */
  readonly selectableFields: readonly string[];
  fieldValues(o: O): Record<string, string | undefined>;
  /** The total list order (namespace first): a continue token carries the key of the last object served. */
  readonly listOrder: { readonly types: readonly CursorField[]; key(entry: E): CursorKey };
  /** Group, resource, kind and field names for errors. */
  readonly errors: StatusTarget;
  /** The 409 of a collection delete some of whose objects this API may not delete (nothing is deleted then). */
  collectionRefused(namespace: string, refused: readonly string[], total: number): StatusError;
}

export interface Change<E> {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  entry: E;
  /** The version delivered: for DELETED it may be the deletion's. */
  rv: string | undefined;
}

/** What a watch is fed from: the current entries, their versions and every change after. */
export interface ChangeSource<E> {
  entries(): E[];
  rvOf(entry: E): string | undefined;
  subscribe(listener: (change: Change<E>) => void): () => void;
}

export interface Storage<E> {
  /** The entries of a namespace (all namespaces when undefined) in list order within each namespace. */
  list(namespace: string | undefined): E[];
  /** The entry or a not-found error. */
  get(namespace: string, name: string): E;
  nameOf(entry: E): string;
  /** From the object a client sent (already parsed JSON, checked by nothing yet). */
  create(namespace: string, object: unknown): Promise<E>;
  /** To the full desired object (PUT, or a patch applied to the current object). */
  update(namespace: string, current: E, desired: unknown): Promise<E>;
  delete(namespace: string, current: E): Promise<void>;
  /** Why this API may not delete the entry (a collection delete then refuses as a whole), or undefined. */
  refusesDelete(namespace: string, entry: E): string | undefined;
  readonly changes: ChangeSource<E>;
}

export interface TableColumn {
  name: string;
  type: string;
  format: string;
  description: string;
  priority: number;
}

export interface TableConvertor<O> {
  readonly columns: readonly TableColumn[];
  cells(o: O): unknown[];
}

/** The resource's part of the group's OpenAPI documents (v2 when true, v3 otherwise). */
export interface OpenApiParts {
  definitions(v2: boolean): Record<string, JsonSchema>;
  paths(v2: boolean): Record<string, unknown>;
}

/** The parts of a resource that do not depend on its entry type: what discovery and the error handler need. */
export interface ResourceDetails {
  readonly names: DiscoveredResource;
  readonly openapi: OpenApiParts;
  readonly errors: StatusTarget;
}

export interface ServedResource<E extends object, O extends KubeObject> extends ResourceDetails {
  readonly strategy: Strategy<E, O>;
  readonly storage: Storage<E>;
  readonly table: TableConvertor<O>;
  /** Why server-side apply is refused (415), and where to go instead: no resource here records field ownership. */
  readonly applyRefusal: string;
}
