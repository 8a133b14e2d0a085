/** Two tiers: fast unit tests of the pure core, and integration tests on a real control plane. */
const tsJest = ["ts-jest", { tsconfig: "<rootDir>/test/tsconfig.json" }];
// The local control plane's state: etcd's *.snap files would pass for obsolete Jest snapshots.
const modulePathIgnorePatterns = ["<rootDir>/.cluster/", "<rootDir>/dist/"];

module.exports = {
  // Orders integration files so that the one restarting the whole control plane runs last.
  testSequencer: "<rootDir>/test/integration/sequencer.js",
  projects: [
    {
      displayName: "unit",
      testEnvironment: "node",
      modulePathIgnorePatterns,
      testMatch: ["<rootDir>/test/unit/**/*.test.ts"],
      transform: { "^.+\\.ts$": tsJest },
    },
    {
      displayName: "integration",
      testEnvironment: "node",
      modulePathIgnorePatterns,
      testMatch: ["<rootDir>/test/integration/**/*.test.ts"],
      transform: { "^.+\\.ts$": tsJest },
      globalSetup: "<rootDir>/test/integration/global-setup.ts",
      moduleNameMapper: { "^chalk$": "<rootDir>/test/integration/chalk-stub.js" },
      slowTestThreshold: 60,
      setupFilesAfterEnv: ["<rootDir>/test/integration/setup-timeout.ts"],
    },
  ],
};
