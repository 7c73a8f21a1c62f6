// Discovery and OpenAPI of the aggregated group: what the kube-aggregator and kubectl read to learn which resources
// exist, their verbs and their schema. Built from the details each served resource hands in, so a new resource adds
// an entry, not a route.
import { createHash } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { yamlSafeJson } from '../domain/text.ts';
import type { JsonSchema } from '../service/key-schema.ts';
import { access } from './access.ts';
import { AGG_GROUP, AGG_GROUP_VERSION, AGG_PREFIX, AGG_VERSION } from './group.ts';
import type { DiscoveredResource, ResourceDetails } from './handlers/resource.ts';

export type { DiscoveredResource } from './handlers/resource.ts';

export const DISCOVERY_V2_TYPE = 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList';

export function discoveryDocuments(resources: readonly DiscoveredResource[]) {
  const resourceList = {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion: AGG_GROUP_VERSION,
    resources: resources.map((r) => ({
      name: r.name,
      singularName: r.singularName,
      namespaced: r.namespaced,
      kind: r.kind,
      verbs: r.verbs,
      shortNames: r.shortNames,
      categories: r.categories,
    })),
  };
  const apiGroup = {
    kind: 'APIGroup',
    apiVersion: 'v1',
    name: AGG_GROUP,
    versions: [{ groupVersion: AGG_GROUP_VERSION, version: AGG_VERSION }],
    preferredVersion: { groupVersion: AGG_GROUP_VERSION, version: AGG_VERSION },
  };
  const apiGroupList = { kind: 'APIGroupList', apiVersion: 'v1', groups: [apiGroup] };
  const aggregatedDiscovery = {
    kind: 'APIGroupDiscoveryList',
    apiVersion: 'apidiscovery.k8s.io/v2',
    metadata: {},
    items: [
      {
        metadata: { name: AGG_GROUP },
        versions: [
          {
            version: AGG_VERSION,
            freshness: 'Current',
            resources: resources.map((r) => ({
              resource: r.name,
              responseKind: { group: AGG_GROUP, version: AGG_VERSION, kind: r.kind },
              scope: r.namespaced ? 'Namespaced' : 'Cluster',
              singularResource: r.singularName,
              verbs: r.verbs,
              shortNames: r.shortNames,
              categories: r.categories,
            })),
          },
        ],
      },
    ],
  };
  return { resourceList, apiGroup, apiGroupList, aggregatedDiscovery };
}

const INFO = { title: 'byok-operator aggregated API', version: AGG_VERSION };

/** The group's OpenAPI v2 (Swagger) document: every resource's paths and definitions. */
export function openApiV2(resources: readonly ResourceDetails[]): JsonSchema {
  return {
    swagger: '2.0',
    info: INFO,
    paths: Object.assign({}, ...resources.map((r) => r.openapi.paths(true))) as Record<string, unknown>,
    definitions: Object.assign({}, ...resources.map((r) => r.openapi.definitions(true))) as Record<string, JsonSchema>,
  };
}

/** The group version's OpenAPI v3 document. */
export function openApiV3(resources: readonly ResourceDetails[]): JsonSchema {
  return {
    openapi: '3.0.0',
    info: INFO,
    paths: Object.assign({}, ...resources.map((r) => r.openapi.paths(false))) as Record<string, unknown>,
    components: {
      schemas: Object.assign({}, ...resources.map((r) => r.openapi.definitions(false))) as Record<string, JsonSchema>,
    },
  };
}

/** Routes for /apis, the group, the group version and the OpenAPI v2/v3 documents. Any authenticated user may read them. */
export function registerDiscovery(app: FastifyInstance, resources: readonly ResourceDetails[]): void {
  const { resourceList, apiGroup, apiGroupList, aggregatedDiscovery } = discoveryDocuments(
    resources.map((r) => r.names),
  );
  // The kube-apiserver parses downloaded OpenAPI documents with a YAML reader, which refuses the raw U+2028 and
  // noncharacters of the text-hygiene patterns: one such character makes the cluster's merged OpenAPI answer 503.
  const openapiV2 = yamlSafeJson(openApiV2(resources));
  const openapiV3 = yamlSafeJson(openApiV3(resources));
  const seen = access({ kind: 'discovery' });
  const openapiV3Hash = createHash('sha512').update(openapiV3).digest('hex').slice(0, 32).toUpperCase();

  app.get('/apis', seen, async (req, reply) => {
    const accept = req.headers.accept ?? '';
    if (/as=APIGroupDiscoveryList/.test(accept) && /v=v2(?![a-z0-9])/.test(accept))
      return reply.type(DISCOVERY_V2_TYPE).send(aggregatedDiscovery);
    return reply.type('application/json').send(apiGroupList);
  });
  app.get(`/apis/${AGG_GROUP}`, seen, async (_req, reply) => reply.type('application/json').send(apiGroup));
  app.get(AGG_PREFIX, seen, async (_req, reply) => reply.type('application/json').send(resourceList));

  app.get('/openapi/v2', seen, async (_req, reply) => reply.type('application/json').send(openapiV2));
  app.get('/openapi/v3', seen, async (_req, reply) =>
    reply.type('application/json').send({
      paths: {
        [`apis/${AGG_GROUP}/${AGG_VERSION}`]: {
          serverRelativeURL: `/openapi/v3/apis/${AGG_GROUP}/${AGG_VERSION}?hash=${openapiV3Hash}`,
        },
      },
    }),
  );
  app.get(`/openapi/v3/apis/${AGG_GROUP}/${AGG_VERSION}`, seen, async (_req, reply) =>
    reply.type('application/json').send(openapiV3),
  );
}
