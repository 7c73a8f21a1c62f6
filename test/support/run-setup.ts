// Jest's root global setup, inherited by every worker and every process a test starts: the run's own TMPDIR
// (test/support/run-temp.ts), and the Go tools' collector setting.
import { claimRunTemp } from './run-temp.ts';

export default function runSetup(): void {
  claimRunTemp();
  // kubectl (about 440 calls a run) and helm (about 140 renders) live a fraction of a second each: collecting a
  // quarter as often saves about a fifth of their CPU. The control planes already run at this setting.
  process.env.GOGC ??= '400';
}
