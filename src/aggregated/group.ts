// The API group this door serves (api.byok.gateway.dev/v1): one group version, any number of resources in it.
export const AGG_GROUP = 'api.byok.gateway.dev';
export const AGG_VERSION = 'v1';
export const AGG_GROUP_VERSION = `${AGG_GROUP}/${AGG_VERSION}`;
export const AGG_PREFIX = `/apis/${AGG_GROUP}/${AGG_VERSION}`;
