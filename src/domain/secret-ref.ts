// Where a BYOKCredential's payload sits in its Secret (spec.secretRef): the named key, else the CRD's default.

/** The data key read when spec.secretRef names none (the CRD schema's default). */
export const DEFAULT_SECRET_KEY = 'key';

/** The Secret data key that holds the credential's payload. */
export function secretRefKey(ref: { readonly key?: string | undefined }): string {
  return ref.key ?? DEFAULT_SECRET_KEY;
}
