// Shared parts of the browser tests (dashboard.test.mjs, nvml_dashboard.test.mjs): the server
// process, checks, the headless Chromium and the hard time limit.
import { spawn } from 'node:child_process';

/// Milliseconds one step (a page condition) may take before it counts as failed.
export const STEP_MS = 30_000;

/// A running server process; `address` is set once it printed "listening http HOST:PORT".
/// `command` contains {listen}, replaced by `listen`; `env` is added to this process's.
export class ServerProcess {
  constructor(command, listen, extra = [], env = {}) {
    const argv = command.map((w) => w.replaceAll('{listen}', listen)).concat(extra);
    this.output = '';
    this.exited = null;
    this.proc = spawn(argv[0], argv.slice(1), {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...env },
    });
    this.address = new Promise((resolve, reject) => {
      const onData = (chunk) => {
        this.output += chunk.toString();
        const m = /listening http (\S+)/.exec(this.output);
        if (m) resolve(m[1]);
      };
      this.proc.stdout.on('data', onData);
      this.proc.stderr.on('data', (c) => { this.output += c.toString(); });
      this.proc.on('error', reject);
      this.proc.on('exit', (code, signal) => {
        this.exited = { code, signal };
        const how = code ?? signal;
        reject(new Error(`the server exited (${how}) before listening:\n${this.output}`));
      });
    });
  }

  /// SIGTERM, and the exit status; SIGKILL if it does not exit within 10 s.
  async stop() {
    if (this.exited) return this.exited;
    const done = new Promise((resolve) => {
      this.proc.once('exit', (code, signal) => resolve({ code, signal }));
    });
    this.proc.kill('SIGTERM');
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), 10_000);
    const r = await done;
    clearTimeout(timer);
    return r;
  }
}

export function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
  console.log(`ok - ${what}`);
}

/// Waits until the page's connection indicator is in `state`.
export function waitForState(page, state) {
  return page.waitForFunction((s) => document.getElementById('conn').dataset.state === s, state);
}

/// playwright-core's chromium, or null (and a message) when it is not installed.
export async function loadChromium() {
  try {
    const { chromium } = await import('playwright-core');
    return chromium;
  } catch (e) {
    console.error('FAILED: playwright-core is not installed; run `npm ci` in tests/browser');
    return null;
  }
}

/// Headless Chromium with its profile in `userDataDir`.
export function launchBrowser(chromium, executablePath, userDataDir) {
  return chromium.launchPersistentContext(userDataDir, {
    executablePath,
    headless: true,
    viewport: { width: 1280, height: 1000 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/// Runs `main` (which resolves to the exit status) within `limitMs`, then exits.
/// The test's outcome: each failure with its stack and, when a server ran, its output; the
/// "N passed, M failed" line ctest's PASS_REGULAR_EXPRESSION reads; the exit code.
export function report(failures, server) {
  if (failures.length) {
    for (const f of failures) console.error(`FAILED: ${f.stack || f}`);
    if (server) console.error(`server output:\n${server.output}`);
    console.log('0 passed, 1 failed');
    return 1;
  }
  console.log('1 passed, 0 failed');
  return 0;
}

export function runWithLimit(main, limitMs) {
  const hard = setTimeout(() => {
    console.error(`FAILED: the test did not finish within ${limitMs / 1000} s`);
    process.exit(1);
  }, limitMs);
  main().then((code) => {
    clearTimeout(hard);
    process.exit(code);
  }, (e) => {
    console.error(`FAILED: ${e.stack || e}`);
    process.exit(1);
  });
}
