// Shared by the tests/node/*.mjs tests: start `workbench serve` on a loopback port chosen by the
// kernel, wait for it, and stop it at the end. Exits 77 (ctest's "skipped") when the npm clients
// are not installed (`cd tests/node && npm ci`).
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
export const SOURCE_DIR = process.env.WB_SOURCE_DIR || join(here, "..", "..");
export const BUILD_DIR = process.env.WB_BUILD_DIR || join(SOURCE_DIR, "build");

export function requireModules(...names) {
  for (const n of names) {
    if (!existsSync(join(here, "node_modules", n))) {
      console.log(`SKIP: tests/node/node_modules/${n} is missing (run: cd tests/node && npm ci --no-audit --no-fund)`);
      process.exit(77);
    }
  }
}

export async function startServer(args = [], { timeoutMs = 15000 } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "wb-serve-"));
  const portFile = join(dir, "port");
  const exe = join(BUILD_DIR, "workbench");
  const child = spawn(exe, [join(SOURCE_DIR, "scripts", "serve.lua"), "--port", "0", "--port-file", portFile,
    "--duration", "120", ...args], { cwd: SOURCE_DIR, stdio: ["ignore", "inherit", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d) => { stderr += d; });
  const t0 = Date.now();
  while (!existsSync(portFile)) {
    if (child.exitCode !== null) throw new Error(`workbench serve exited (${child.exitCode}): ${stderr}`);
    if (Date.now() - t0 > timeoutMs) { child.kill(); throw new Error(`workbench serve did not start: ${stderr}`); }
    await new Promise((r) => setTimeout(r, 50));
  }
  const port = Number(readFileSync(portFile, "utf8").trim());
  const base = `http://127.0.0.1:${port}`;
  return {
    port, base, child,
    stderr: () => stderr,
    async stop() {
      if (child.exitCode === null) {
        // Ctrl-C: the server closes its listener and exits normally (so ASan can check for leaks)
        const exited = new Promise((r) => child.once("exit", (code, sig) => r([code, sig])));
        child.kill("SIGINT");
        const timer = new Promise((r) => setTimeout(() => r(["timeout", null]), 15000));
        const [code, sig] = await Promise.race([exited, timer]);
        if (code === "timeout") {
          if (!process.env.WB_KEEP_HUNG) child.kill("SIGKILL");
          throw new Error(`workbench serve (pid ${child.pid}) did not exit within 15 s of Ctrl-C: ${stderr}`);
        }
        if (code !== 0) throw new Error(`workbench serve exited with ${code ?? sig} after Ctrl-C: ${stderr}`);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

let failures = 0;
let count = 0;
export async function test(name, fn) {
  count++;
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}\n     ${e && e.stack ? e.stack.split("\n").slice(0, 4).join("\n     ") : e}`);
  }
}
export function finish() {
  console.log(`${count - failures}/${count} passed`);
  process.exit(failures ? 1 : 0);
}
export function assert(cond, msg) { if (!cond) throw new Error(msg || "assertion failed"); }
export function eq(a, b, msg) {
  const sa = JSON.stringify(a), sb = JSON.stringify(b);
  if (sa !== sb) throw new Error(`${msg || "not equal"}: ${sa} !== ${sb}`);
}
export async function health(base) { return (await fetch(`${base}/health`)).json(); }
