import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/globalSetup.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Two cores: one worker per core keeps PostgreSQL, the services and the tests from starving each other.
    maxWorkers: 2,
    reporters: process.env.CI === "true" ? ["default", ["json", { outputFile: ".test-results/vitest.json" }]] : ["default"]
  }
})
