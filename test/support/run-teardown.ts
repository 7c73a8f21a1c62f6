// Jest's root global teardown, after the projects' own (the control planes stop first): the run's TMPDIR goes.
import { releaseRunTemp } from './run-temp.ts';

export default function runTeardown(): void {
  releaseRunTemp();
}
