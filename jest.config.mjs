// Two projects: `unit` needs nothing; `integration` starts one real kube-apiserver + etcd for the whole run.
import { availableParallelism } from 'node:os';
import { clientNodeBundle } from './test/support/client-node-bundle.mjs';

const transform = {
  '^.+\\.ts$': ['@swc/jest', {
    jsc: { parser: { syntax: 'typescript' }, target: 'es2024' },
    module: { type: 'es6' },
    sourceMaps: 'inline',
  }],
};
const bundle = clientNodeBundle();
const common = {
  transform,
  // One file instead of ~1,060 modules per test file (test/support/client-node-bundle.mjs).
  ...(bundle ? { moduleNameMapper: { '^@kubernetes/client-node$': bundle } } : {}),
  extensionsToTreatAsEsm: ['.ts'],
  testEnvironment: 'node',
  moduleFileExtensions: ['ts', 'js', 'mjs', 'json'],
  // Each file's CPU, for `npm run bench:suite` only: other runs do not load it.
  ...(process.env.BYOK_TEST_FILE_COST ? { setupFilesAfterEnv: ['<rootDir>/test/support/file-cost.ts'] } : {}),
};

export default {
  // testTimeout is a global option in Jest (ignored inside projects); integration tests need the room.
  testTimeout: 60_000,
  // Jest's default is one worker fewer than the cores, which on 2 cores runs every file in one process while the
  // other core idles (the main process only collects results). `--maxWorkers` on the command line still wins.
  maxWorkers: Math.max(2, availableParallelism() - 1),
  // How long a worker has to exit once the run ends before Jest kills it and warns "failed to exit gracefully".
  // Jest's 500 ms is an idle machine's figure: under a load average of 7 on 2 cores a worker whose last file had
  // closed everything still missed it (a probe on SIGTERM never ran: the worker had no turn, not a handle open).
  workerGracefulExitTimeout: 5_000,
  reporters: ['default', '<rootDir>/test/support/summary-reporter.mjs'],
  // The run's own TMPDIR, removed at its end: what tests and the processes they start write there goes with it.
  // Jest runs the projects' global setup first, so the control planes' directories stay outside (they remove
  // their own), and this teardown runs after theirs.
  globalSetup: '<rootDir>/test/support/run-setup.ts',
  globalTeardown: '<rootDir>/test/support/run-teardown.ts',
  projects: [
    { ...common, displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.test.ts'] },
    {
      ...common,
      displayName: 'integration',
      testMatch: ['<rootDir>/test/integration/**/*.test.ts'],
      globalSetup: '<rootDir>/test/support/control-planes-setup.ts',
      setupFiles: ['<rootDir>/test/support/worker-control-plane.ts'],
      globalTeardown: '<rootDir>/test/support/control-planes-teardown.ts',
    },
  ],
};
