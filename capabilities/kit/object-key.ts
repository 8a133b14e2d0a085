/**
 * `namespace/name`: how the queues, the caches and the own-write records key an object. One
 * definition, because a write recorded under one key must be recognised under the same key.
 */
export const objectKey = (namespace: string, name: string) => `${namespace}/${name}`;
