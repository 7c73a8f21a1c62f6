// byokkeys (api.byok.gateway.dev/v1, kind BYOKKey): the credentials of an account namespace as a Kubernetes
// resource. The verbs are the generic handlers'; this folder gives the names, strategy, storage, table and OpenAPI.

import type { ApiState, CredentialEntry } from '../../../service/read-model.ts';
import type { ByokService } from '../../../service/service.ts';
import type { DiscoveredResource, ResourceDetails, ServedResource } from '../../handlers/resource.ts';
import { type ByokKeyObject, CATEGORIES, KIND, RESOURCE, SHORT_NAMES, SINGULAR, VERBS } from './object.ts';
import { byokKeysOpenApi } from './openapi.ts';
import { byokKeysStorage } from './storage.ts';
import { APPLY_UNSUPPORTED, byokKeysErrors, byokKeysStrategy } from './strategy.ts';
import { byokKeysTable } from './table.ts';

export const byokKeysResource: DiscoveredResource = {
  name: RESOURCE,
  singularName: SINGULAR,
  kind: KIND,
  namespaced: true,
  verbs: VERBS,
  shortNames: SHORT_NAMES,
  categories: CATEGORIES,
};

/** What discovery and the error handler need, without a runtime. */
export const byokKeysDetails: ResourceDetails = {
  names: byokKeysResource,
  openapi: byokKeysOpenApi,
  errors: byokKeysErrors,
};

export function byokKeys(deps: {
  service: ByokService;
  state: ApiState;
}): ServedResource<CredentialEntry, ByokKeyObject> {
  return {
    ...byokKeysDetails,
    strategy: byokKeysStrategy,
    storage: byokKeysStorage(deps),
    table: byokKeysTable,
    applyRefusal: APPLY_UNSUPPORTED,
  };
}
