// Where BYOKKeys live (sample-apiserver's storage): the read model for reads and watch, ByokService for writes, so
// this door and the REST door share one cache and one write path. Every write goes through the strategy's mapping.
import { ApiError } from '../../../service/errors.ts';
import type { ApiState, CredentialEntry } from '../../../service/read-model.ts';
import type { ByokService } from '../../../service/service.ts';
import type { ChangeSource, Storage } from '../../handlers/resource.ts';
import { InvalidObject } from '../../status.ts';
import { createRequestFrom, updateRequestFrom } from './strategy.ts';

export function byokKeysStorage(deps: { service: ByokService; state: ApiState }): Storage<CredentialEntry> {
  const { service, state } = deps;
  return {
    list: (namespace) => state.allCredentials(namespace),
    get: (namespace, name) => service.get(namespace, name),
    nameOf: (e) => e.key.id,
    create: async (namespace, object) => {
      const { body, sortOrder } = createRequestFrom(object, namespace);
      // Checked before anything is written, so a bad sortOrder refuses the whole create.
      if (
        sortOrder !== undefined &&
        (typeof sortOrder !== 'number' || !Number.isInteger(sortOrder) || sortOrder < 0 || sortOrder > 1_000_000)
      ) {
        throw new InvalidObject([{ field: 'spec.sortOrder', message: 'must be an integer between 0 and 1000000' }]);
      }
      const created = await service.create(namespace, body);
      // spec.sortOrder is not a REST create field: an update right after the create applies it.
      return typeof sortOrder === 'number' && sortOrder !== created.key.sort_order
        ? service.update(namespace, created.key.id, { sort_order: sortOrder })
        : created;
    },
    update: (namespace, current, desired) =>
      service.update(namespace, current.key.id, updateRequestFrom(desired, current, namespace)),
    delete: (namespace, current) => service.delete(namespace, current.key.id),
    refusesDelete: (namespace, e) => {
      try {
        service.deletable(namespace, e.key.id);
        return undefined;
      } catch (err) {
        // 409: the GitOps guard (not created through this API); anything else is an error of its own.
        if (err instanceof ApiError && err.status === 409) return err.message;
        throw err;
      }
    },
    changes: credentialChanges(state),
  };
}

/** What a watch of byokkeys is fed from: the read model's credentials and its change notifications. */
export function credentialChanges(state: ApiState): ChangeSource<CredentialEntry> {
  return {
    entries: () => state.allCredentials(),
    rvOf: (e) => e.obj.metadata.resourceVersion,
    subscribe: (listener) =>
      state.onCredentialChange((c) => listener({ type: c.type, entry: c.entry, rv: c.obj.metadata.resourceVersion })),
  };
}
