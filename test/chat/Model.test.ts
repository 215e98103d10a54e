/**
 * The Model service against the local Messages API stand-in, through the real SDK: what becomes of
 * the HTTP request behind a reply's stream when the stream ends, and when it is let go.
 */
import { Effect, Fiber, Layer, Stream } from "effect"
import { afterAll, beforeAll, expect, it, vi } from "vitest"
import { ModelLive } from "../../src/layers/Integrations.ts"
import { Model } from "../../src/services/Model.ts"
import { PlinthConfig } from "../../src/services/PlinthConfig.ts"
import { type FakeAnthropic, startFakeAnthropic } from "../support/FakeAnthropic.ts"
import { testEnv } from "../support/services.ts"
import { eventually } from "./helpers.ts"

let fake: FakeAnthropic
let model: Layer.Layer<Model>
beforeAll(async () => {
  fake = await startFakeAnthropic()
  model = ModelLive.pipe(
    Layer.provide(PlinthConfig.layer),
    Layer.provide(testEnv({ ANTHROPIC_API_KEY: "sk-test", ANTHROPIC_BASE_URL: fake.url })),
    Layer.orDie
  )
})
afterAll(() => fake?.close())

const reply = Effect.gen(function*() {
  const service = yield* Model
  return service.reply({ system: "You help.", messages: [{ role: "user", content: "Hi" }], tools: [] })
})

it("a reply read to its end is not aborted; one let go on the way is, and the model's server sees it go", async () => {
  const aborts = vi.spyOn(AbortController.prototype, "abort")
  try {
    fake.script({ kind: "reply", blocks: [{ type: "text", text: "Hello there" }] })
    const events = await Effect.runPromise(Effect.flatMap(reply, Stream.runCollect).pipe(Effect.provide(model)))
    expect(events.map((event) => event._tag === "Text" ? event.text : "").join("")).toBe("Hello there")
    expect(aborts).not.toHaveBeenCalled()
    expect(await eventually(async () => fake.open() === 0 ? true : undefined)).toBe(true)

    fake.script({ kind: "hang" })
    const fiber = Effect.runFork(Effect.flatMap(reply, Stream.runDrain).pipe(Effect.provide(model)))
    // The request is at the model's server before it is let go.
    expect(await eventually(async () => fake.open() === 1 ? true : undefined)).toBe(true)
    await Effect.runPromise(Fiber.interrupt(fiber))
    expect(aborts).toHaveBeenCalled()
    expect(await eventually(async () => fake.open() === 0 ? true : undefined)).toBe(true)
  } finally {
    aborts.mockRestore()
  }
})
