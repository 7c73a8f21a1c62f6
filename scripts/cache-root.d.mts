/** The cache root of every build and download (scripts/cache-root.mjs). */
export declare function cacheRoot(): string;
