// Two projects: `unit` runs without a cluster; `e2e` starts a real
// kube-apiserver and etcd (see e2e/cluster) in its global setup.
const common = {
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': ['ts-jest', { useESM: true }] },
  testEnvironment: 'node',
};

export default {
  // e2e suites share one control plane and start real processes: run files one at a time
  // (make test runs two jest processes side by side instead, each with its own control plane).
  maxWorkers: 1,
  // --shard deals e2e files out by their recorded time (e2e/setup/durations.json).
  testSequencer: '<rootDir>/e2e/setup/sequencer.mjs',
  // e2e tests drive real processes; per-project testTimeout is not honoured, so it is set here.
  testTimeout: 120000,
  // Keep-alive sockets of the real API clients can outlive a suite by seconds; do not let them hold CI.
  forceExit: true,
  projects: [
    {
      ...common,
      displayName: 'unit',
      testMatch: ['<rootDir>/src/**/*.test.ts', '<rootDir>/controllers/**/*.test.ts', '<rootDir>/cmd/**/*.test.ts', '<rootDir>/cli/**/*.test.ts'],
      // Unit tests stand alone: a test that needs an emulator of e2e/fakes is named *.emulator.test.ts and runs below.
      testPathIgnorePatterns: ['/node_modules/', '\\.emulator\\.test\\.ts$'],
    },
    // The emulators' own tests, code tested against an emulator (*.emulator.test.ts beside the code) and the
    // test tooling's: no control plane needed.
    {
      ...common,
      displayName: 'emulators',
      testMatch: [
        '<rootDir>/e2e/fakes/**/*.test.ts',
        '<rootDir>/e2e/setup/**/*.test.ts',
        '<rootDir>/src/**/*.emulator.test.ts',
        '<rootDir>/controllers/**/*.emulator.test.ts',
        '<rootDir>/cmd/**/*.emulator.test.ts',
        '<rootDir>/cli/**/*.emulator.test.ts',
      ],
    },
    {
      ...common,
      displayName: 'e2e',
      testMatch: ['<rootDir>/e2e/**/*.test.ts'],
      testPathIgnorePatterns: ['/node_modules/', '<rootDir>/e2e/fakes/', '<rootDir>/e2e/setup/'],
      globalSetup: '<rootDir>/e2e/setup/global-setup.mjs',
      globalTeardown: '<rootDir>/e2e/setup/global-teardown.mjs',
    },
  ],
};
