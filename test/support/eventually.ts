/**
 * Polls `probe` until it holds or `timeoutMs` passes; resolves to whether it did. The bound is
 * generous: a condition that holds returns at once, and a busy machine must not fail the test.
 */
export const eventually = async (probe: () => Promise<boolean>, timeoutMs = 10_000, intervalMs = 25): Promise<boolean> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await probe()) return true
    if (Date.now() > deadline) return false
    await new Promise((resolve) => setTimeout(resolve, intervalMs))
  }
}
