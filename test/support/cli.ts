/** Runs the real `plinth` command in a child process, as an operator would. */
import { type ChildProcess, spawn } from "node:child_process"
import { readFileSync } from "node:fs"

export const CLI_SOURCE = "src/cli/main.ts"
export const CLI_BUILT = "dist/src/cli/main.js"

/** The V8 flags Plinth runs with, as its `#!` line gives them (`#!/usr/bin/env -S node <flags>`). */
export const PLINTH_NODE_FLAGS: ReadonlyArray<string> = readFileSync(CLI_SOURCE, "utf8").split("\n")[0]!.split(" ").slice(3)

export interface PlinthProcess {
  readonly child: ChildProcess
  readonly stdout: () => string
  readonly stderr: () => string
  /** Resolves with the exit code (or 128 + signal number). */
  readonly exited: Promise<number>
  /** Resolves once stdout has matched `pattern`; rejects if the process exits or time runs out first. */
  readonly waitFor: (pattern: RegExp, timeoutMs?: number) => Promise<RegExpMatchArray>
}

const signals: Record<string, number> = { SIGINT: 2, SIGKILL: 9, SIGTERM: 15 }

/**
 * V8 without background threads: Node 24 can deadlock at exit when a background compile task
 * waits for a garbage collection the exiting main thread will never run (nodejs/node#54918; seen
 * here once, a `plinth start` failing at start-up that never exited). The suite starts dozens of
 * short-lived `plinth` processes, each exiting while it still compiles.
 */
const NODE_FLAGS = ["--single-threaded"]

export const runPlinth = (
  args: ReadonlyArray<string>,
  env: Record<string, string>,
  entry = CLI_SOURCE,
  nodeFlags: ReadonlyArray<string> = []
): PlinthProcess => {
  const child = spawn(process.execPath, [...NODE_FLAGS, ...nodeFlags, entry, ...args], {
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let out = ""
  let err = ""
  child.stdout!.on("data", (chunk: Buffer) => (out += chunk.toString("utf8")))
  child.stderr!.on("data", (chunk: Buffer) => (err += chunk.toString("utf8")))
  const exited = new Promise<number>((resolve) =>
    child.on("exit", (code, signal) => resolve(code ?? 128 + (signal ? signals[signal] ?? 0 : 0)))
  )
  const waitFor = (pattern: RegExp, timeoutMs = 60_000) =>
    new Promise<RegExpMatchArray>((resolve, reject) => {
      const check = () => {
        const match = out.match(pattern)
        if (match) {
          cleanup()
          resolve(match)
        }
      }
      const timer = setTimeout(() => {
        cleanup()
        reject(new Error(`timed out waiting for ${pattern}\nstdout: ${out}\nstderr: ${err}`))
      }, timeoutMs)
      const onExit = () => {
        check()
        cleanup()
        reject(new Error(`exited before ${pattern}\nstdout: ${out}\nstderr: ${err}`))
      }
      const cleanup = () => {
        clearTimeout(timer)
        child.stdout!.off("data", check)
        child.off("exit", onExit)
      }
      child.stdout!.on("data", check)
      child.on("exit", onExit)
      check()
    })
  return { child, stdout: () => out, stderr: () => err, exited, waitFor }
}
