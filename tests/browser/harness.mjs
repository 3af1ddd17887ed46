// What both browser tests share: the programs they start (each killed when the test ends, however
// it ends), a free loopback port, a started tessera-server, a headless chromium, and the run of a
// test's main() with its clean-up. A child left running would hold the test's output pipe open and
// meson would wait for it until its timeout, so a last-resort exit hook kills whatever is left.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { createInterface } from 'node:readline';
import { chromium } from 'playwright-core';

export function env(name, fallback) {
  const value = process.env[name] ?? fallback;
  if (!value) throw new Error(`${name} is not set (meson sets it)`);
  return value;
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const children = [];
process.on('exit', () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

export function start(program, args) {
  const child = spawn(program, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return child;
}

export function finished(child) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode ?? 128);
  return new Promise((resolve) => child.once('exit', (code) => resolve(code ?? 128)));
}

export async function run(program, args) {
  const child = start(program, args);
  child.stdout.resume();
  const code = await finished(child);
  assert.equal(code, 0, `${program} ${args.join(' ')} exited with ${code}`);
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

// `tessera-server run` on a free port, once it says it listens; returns the base URL.
export async function startServer(state) {
  const port = await freePort();
  const server = start(env('TESSERA_SERVER'), ['run', '--state', state, '--listen', `127.0.0.1:${port}`, '--tick', '1']);
  const firstLine = await new Promise((resolve) => createInterface({ input: server.stdout }).once('line', resolve));
  assert.match(firstLine, /listening/, `the server did not start: ${firstLine}`);
  server.stdout.resume();
  return `http://127.0.0.1:${port}`;
}

export async function waitFor(what, condition, seconds) {
  const until = Date.now() + seconds * 1000;
  for (;;) {
    const value = await condition().catch(() => undefined);
    if (value) return value;
    if (Date.now() > until) throw new Error(`timed out after ${seconds} s waiting for ${what}`);
    await sleep(500);
  }
}

let browser;

// As root (CI) chromium's sandbox cannot start; small containers have a small /dev/shm.
export async function launchBrowser() {
  browser = await chromium.launch({ executablePath: env('CHROMIUM', '/usr/bin/chromium'),
    args: ['--no-sandbox', '--disable-dev-shm-usage'] });
  return browser;
}

async function cleanUp(dir) {
  if (browser) await browser.close().catch(() => {});
  for (const child of [...children].reverse()) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const stopped = await Promise.race([finished(child), sleep(20_000).then(() => null)]);
      if (stopped === null) child.kill('SIGKILL');
    }
  }
  rmSync(dir, { recursive: true, force: true });
}

// Runs main(), cleans up and exits 0 or 1. An error that escapes a handler (a route answered as the
// browser closes) is reported and fails the test rather than killing node before the clean-up.
export async function runTest(main, dir) {
  let failed = false;
  const fail = (error) => { failed = true; console.error(error); };
  process.on('unhandledRejection', fail);
  process.on('uncaughtException', fail);
  try {
    await main();
  } catch (error) {
    fail(error);
  } finally {
    await cleanUp(dir);
  }
  process.exit(failed ? 1 : 0);
}
