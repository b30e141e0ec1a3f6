// The dashboard in a real browser: headless Chromium (Debian's /usr/bin/chromium) driven by
// playwright-core loads the page from a running `gpustream serve --simulate 2`, and checks that
//   1. two GPU cards appear and their values change (live snapshots over /ws),
//   2. no absent metric is shown as 0, the probe table is filled from /api/v1/stats,
//   3. nothing was logged as a console error and no script error happened,
//   4. after the server is stopped the page says it is disconnected, and once a server is back
//      on the same port it reconnects and streams again (reconnect with backoff, resume),
//   5. with --token-flag FLAG: a server started with `FLAG TOKEN_FILE` is used through
//      /?token=TOKEN (the page passes the token on to /ws and /api/v1/stats).
// A screenshot of the page is saved (--screenshot).
//
// Usage:
//   node dashboard.test.mjs [--screenshot FILE] [--chromium PATH] [--token-flag FLAG]
//                           -- SERVER_COMMAND...
// SERVER_COMMAND must contain the word {listen}; it is replaced by 127.0.0.1:0 for the first
// start (the server prints "listening http HOST:PORT" on stdout) and by the same address and
// port for the restart. Exit status 0 when every check passed, 1 otherwise.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import {
  ServerProcess, STEP_MS, check, launchBrowser, loadChromium, report, runWithLimit,
  waitForState,
} from './harness.mjs';

const HARD_LIMIT_MS = 120_000;
const NETWORK_ERROR = /ERR_CONNECTION_REFUSED|WebSocket connection|Failed to load resource/;

function parseArgs(argv) {
  const o = { screenshot: null, chromium: '/usr/bin/chromium', tokenFlag: null, command: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') { o.command = argv.slice(i + 1); break; }
    if (a === '--screenshot') o.screenshot = argv[++i];
    else if (a === '--chromium') o.chromium = argv[++i];
    else if (a === '--token-flag') o.tokenFlag = argv[++i];
    else throw new Error(`unknown argument ${a}`);
  }
  if (!o.command.some((w) => w.includes('{listen}'))) {
    throw new Error('the server command must contain {listen}');
  }
  return o;
}

/// Text of the four tiles of every card, and its update counter.
async function readCards(page) {
  return page.$$eval('.card', (cards) => cards.map((c) => ({
    device: c.dataset.device,
    updates: Number(c.dataset.updates || 0),
    values: [...c.querySelectorAll('.tile .value')].map((v) => v.textContent),
  })));
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const chromium = await loadChromium();
  if (!chromium) return 1;
  const failures = [];
  const consoleErrors = [];
  const pageErrors = [];
  let expectNetworkErrors = false;
  let server = new ServerProcess(opts.command, '127.0.0.1:0');
  const userDataDir = mkdtempSync(join(tmpdir(), 'gpustream-chromium-'));
  let context = null;
  try {
    const address = await server.address;
    console.log(`server listening on ${address}`);
    context = await launchBrowser(chromium, opts.chromium, userDataDir);
    const page = context.pages()[0] || await context.newPage();
    page.setDefaultTimeout(STEP_MS);
    page.on('console', (msg) => {
      if (msg.type() !== 'error') return;
      // While the server is deliberately down, Chromium logs the refused connections.
      if (expectNetworkErrors && NETWORK_ERROR.test(msg.text())) return;
      consoleErrors.push(msg.text());
    });
    page.on('pageerror', (err) => pageErrors.push(String(err)));

    await page.goto(`http://${address}/`);
    check((await page.title()) === 'gpustream', 'the page is the gpustream dashboard');

    // 1. Two cards whose values change.
    await page.waitForFunction(() => document.querySelectorAll('.card').length === 2);
    await waitForState(page, 'connected');
    check(true, 'two GPU cards are shown and the page is connected');
    const first = await readCards(page);
    await page.waitForFunction((before) => {
      const cards = [...document.querySelectorAll('.card')];
      return cards.length === before.length && cards.every((c, i) => {
        const values = [...c.querySelectorAll('.tile .value')].map((v) => v.textContent);
        return Number(c.dataset.updates) >= before[i].updates + 2 &&
          values.some((v, k) => v !== before[i].values[k]);
      });
    }, first);
    const second = await readCards(page);
    check(second.every((c, i) => c.values.some((v, k) => v !== first[i].values[k])),
      `the values of both cards change (${JSON.stringify(first.map((c) => c.values))} → ` +
      `${JSON.stringify(second.map((c) => c.values))})`);

    // 2. Contents: numbers with units, absent metrics as "—" with a reason, probe health.
    for (const c of second) {
      check(/^\d+%$/.test(c.values[0]), `utilization reads as a percentage (${c.values[0]})`);
      check(/W/.test(c.values[2]) && /°C$/.test(c.values[3]), `power and temperature have units`);
    }
    const absent = await page.$$eval('.card .absent',
      (els) => els.map((e) => [e.textContent, e.title]));
    check(absent.length > 0 &&
      absent.every(([text, title]) => text === '—' && /absent|not reported/.test(title)),
      `absent metrics are shown as — with the reason (${absent.length}, ` +
      `e.g. "${absent[0]?.[1]}")`);
    await page.waitForFunction(() => document.querySelectorAll('#probes tbody tr').length > 0);
    const probes = await page.$$eval('#probes tbody tr',
      (rows) => rows.map((r) => r.cells[0].textContent + ':' + r.cells[1].textContent));
    check(probes.some((p) => p.startsWith('simulated:')),
      `the probe table lists the probes (${probes.join(', ')})`);
    const procRows = await page.$$eval('.card .procs tbody tr', (rows) => rows.length);
    check(procRows >= 2, `the process tables are filled (${procRows} rows)`);
    const body = await page.innerText('body');
    const junk = /.{0,40}(NaN|undefined|\[object).{0,40}/.exec(body);
    check(!junk, `no NaN, undefined or [object ...] on the page${junk ? ` ("${junk[0]}")` : ''}`);

    if (opts.screenshot) {
      await page.screenshot({ path: opts.screenshot, fullPage: true });
      console.log(`screenshot: ${opts.screenshot}`);
    }
    check(consoleErrors.length === 0 && pageErrors.length === 0,
      `no console errors (${JSON.stringify(consoleErrors.concat(pageErrors))})`);

    // 3. The server goes away: the page says so; a new server on the same port: it is back.
    expectNetworkErrors = true;
    const stopped = await server.stop();
    check(stopped.code === 0, `the server stopped cleanly on SIGTERM (${JSON.stringify(stopped)})`);
    await waitForState(page, 'disconnected');
    check(true, 'the page shows that it is disconnected');
    server = new ServerProcess(opts.command, address);
    await server.address;
    const before = await readCards(page);
    await waitForState(page, 'connected');
    await page.waitForFunction((b) => [...document.querySelectorAll('.card')]
      .every((c, i) => Number(c.dataset.updates) > (b[i] ? b[i].updates : 0)), before);
    check(true, 'the page reconnects by itself and streams again');
    check(pageErrors.length === 0, `no script errors (${JSON.stringify(pageErrors)})`);

    // 4. A server that wants a token: the page's ?token= reaches /ws and /api/v1/stats.
    if (opts.tokenFlag) {
      await server.stop();
      const token = 'dashboard-test-' + process.pid;
      const tokenFile = join(userDataDir, 'token');
      writeFileSync(tokenFile, token + '\n', { mode: 0o600 });
      server = new ServerProcess(opts.command, '127.0.0.1:0', [opts.tokenFlag, tokenFile]);
      const tokenAddress = await server.address;
      await page.goto(`http://${tokenAddress}/?token=${encodeURIComponent(token)}`);
      // The previous page's retries are gone with it; a refused token shows as never connecting.
      consoleErrors.length = 0;
      expectNetworkErrors = false;
      await waitForState(page, 'connected');
      await page.waitForFunction(() => document.querySelectorAll('.card').length === 2 &&
        document.querySelectorAll('#probes tbody tr').length > 0);
      check(consoleErrors.length === 0 && pageErrors.length === 0,
        'with a token: connected, cards and probe table shown, no console errors ' +
        `(${JSON.stringify(consoleErrors.concat(pageErrors))})`);
    }
  } catch (e) {
    failures.push(e);
  } finally {
    if (context) await context.close().catch(() => {});
    await server.stop().catch(() => {});
    rmSync(userDataDir, { recursive: true, force: true });
  }
  return report(failures, server);
}

runWithLimit(main, HARD_LIMIT_MS);
