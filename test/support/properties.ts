// How many cases a property-based test generates. The full suite (`npm test`, CI) runs every property at its full
// count; `npm run verify`, the check before a push, sets BYOK_QUICK_PROPERTIES=1 and runs a tenth of each (at least
// 20), so it stays under a minute while every test file still runs.
const QUICK = process.env.BYOK_QUICK_PROPERTIES === '1';

export function propertyRuns(full: number): number {
  return QUICK ? Math.min(full, Math.max(20, Math.ceil(full / 10))) : full;
}
