// Jest's root global setup: the run's own TMPDIR (test/support/run-temp.ts).
import { claimRunTemp } from './run-temp.ts';

export default function runTempSetup(): void {
  claimRunTemp();
}
