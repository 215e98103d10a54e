/** Polls `probe` until it holds or `timeoutMs` passes; resolves to whether it did. */
export const eventually = async (probe: () => Promise<boolean>, timeoutMs = 2_000, intervalMs = 25): Promise<boolean> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await probe()) return true
    if (Date.now() > deadline) return false
    await new Promise((resolve) => setTimeout(resolve, intervalMs))
  }
}
