// Builds CustomResourceDefinition objects from the resource definitions.
import type { ICustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1/CustomResourceDefinition';
import { GROUP, RESOURCES, type ResourceDefinition, VERSION } from './resources.ts';

export function crdName(resource: ResourceDefinition): string {
  return `${resource.plural}.${GROUP}`;
}

export function buildCrd(resource: ResourceDefinition): ICustomResourceDefinition {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: crdName(resource), labels: { 'app.kubernetes.io/part-of': 'byok-operator' } },
    spec: {
      group: GROUP,
      scope: 'Namespaced',
      names: {
        kind: resource.kind,
        listKind: `${resource.kind}List`,
        plural: resource.plural,
        singular: resource.singular,
        shortNames: resource.shortNames,
        categories: resource.categories,
      },
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: resource.printerColumns.map((c) => ({ ...c })),
          schema: {
            openAPIV3Schema: {
              type: 'object',
              description: resource.description,
              required: ['spec'],
              properties: {
                apiVersion: {
                  type: 'string',
                  description: 'APIVersion defines the versioned schema of this representation of an object.',
                },
                kind: {
                  type: 'string',
                  description: 'Kind is a string value representing the REST resource this object represents.',
                },
                metadata: { type: 'object' },
                spec: resource.spec as object,
                status: resource.status as object,
              },
            },
          },
        },
      ],
    },
  };
}

export function buildCrds(): ICustomResourceDefinition[] {
  return RESOURCES.map(buildCrd);
}
