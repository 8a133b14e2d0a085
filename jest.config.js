/** Two tiers: fast unit tests of the pure core, and integration tests on a real control plane. */
const tsJest = ["ts-jest", { tsconfig: "<rootDir>/test/tsconfig.json" }];

module.exports = {
  // Orders integration files so that the one restarting the whole control plane runs last.
  testSequencer: "<rootDir>/test/integration/sequencer.js",
  projects: [
    {
      displayName: "unit",
      testEnvironment: "node",
      testMatch: ["<rootDir>/test/unit/**/*.test.ts"],
      transform: { "^.+\\.ts$": tsJest },
    },
    {
      displayName: "integration",
      testEnvironment: "node",
      testMatch: ["<rootDir>/test/integration/**/*.test.ts"],
      transform: { "^.+\\.ts$": tsJest },
      globalSetup: "<rootDir>/test/integration/global-setup.ts",
      slowTestThreshold: 60,
      setupFilesAfterEnv: ["<rootDir>/test/integration/setup-timeout.ts"],
    },
  ],
};
