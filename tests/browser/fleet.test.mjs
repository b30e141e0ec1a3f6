// The /fleet page at 1,000 nodes in a real browser. A real `nats-server -js` on loopback, a real
// `gpustream fleet` subscribed to it, and one publisher process (gpustream_fleet_publisher) that
// encodes 1,000 nodes' snapshots (8 GPUs each, 1 Hz) with the real bus encoder. Headless
// Chromium (Debian's, driven by playwright-core) loads /fleet and checks that
//   1. the summary counts 1,000 nodes up and the table shows one page of 100 rows (10 pages),
//   2. paging moves to rows 101-200, the filter narrows to one node, sorting by a column orders
//      the rows and sorting the node column twice reverses it,
//   3. a click on a node opens its GPUs (8 rows) and processes,
//   4. a node whose publisher stops shows as stale (summary and row), and its drill-down shows
//      the values withheld, not old numbers,
//   5. no console error and no script error happened.
// The page load and filter times are printed ("timing: ..."), not asserted (docs/benchmarks.md).
//
// Usage:
//   node fleet.test.mjs --nats-server PATH --publisher PATH [--nodes 1000] [--chromium PATH]
//                       [--screenshot FILE] -- GPUSTREAM_FLEET_COMMAND... (with {listen} and
//                       {nats}, replaced by 127.0.0.1:0 and the NATS server's URL)
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import {
  ServerProcess, STEP_MS, check, launchBrowser, loadChromium, report, runWithLimit,
} from './harness.mjs';

const HARD_LIMIT_MS = 170_000;

function parseArgs(argv) {
  const o = {
    chromium: '/usr/bin/chromium', screenshot: null, natsServer: '/usr/sbin/nats-server',
    publisher: null, nodes: 1000, command: [],
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') { o.command = argv.slice(i + 1); break; }
    if (a === '--chromium') o.chromium = argv[++i];
    else if (a === '--screenshot') o.screenshot = argv[++i];
    else if (a === '--nats-server') o.natsServer = argv[++i];
    else if (a === '--publisher') o.publisher = argv[++i];
    else if (a === '--nodes') o.nodes = Number(argv[++i]);
    else throw new Error(`unknown argument ${a}`);
  }
  if (!o.publisher) throw new Error('--publisher is required');
  return o;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function waitForPort(port, proc, limitMs) {
  const deadline = Date.now() + limitMs;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`nats-server exited (${proc.exitCode})`);
    const ok = await new Promise((resolve) => {
      const c = connect(port, '127.0.0.1');
      c.once('connect', () => { c.destroy(); resolve(true); });
      c.once('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`port ${port} did not open`);
}

async function getJson(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return { body: await r.json(), bytes: Number(r.headers.get('content-length') || 0) };
}

async function waitUntil(what, predicate, limitMs = STEP_MS) {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const v = await predicate();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/// The page's visible rows: node name, state and the other cells' text.
function readRows(page) {
  return page.$$eval('#rows tr', (rows) => rows.map((r) => [...r.children].map((c) => c.textContent)));
}

/// Runs `action` in the page (synchronous handlers re-render at once) and returns its ms.
function timeInPage(page, action, arg) {
  return page.evaluate(([src, a]) => {
    const fn = new Function('a', src);  // eslint-disable-line no-new-func
    const t0 = performance.now();
    fn(a);
    return performance.now() - t0;
  }, [action, arg]);
}

const FILTER = `const f=document.getElementById('filter');f.value=a;f.dispatchEvent(new Event('input'));`;

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const chromium = await loadChromium();
  if (!chromium) return 1;
  const failures = [];
  const consoleErrors = [];
  const pageErrors = [];
  const timings = [];
  const store = mkdtempSync(join(tmpdir(), 'gpustream-fleet-js-'));
  const userDataDir = mkdtempSync(join(tmpdir(), 'gpustream-chromium-'));
  const natsPort = await freePort();
  const nats = spawn(opts.natsServer, ['-a', '127.0.0.1', '-p', String(natsPort), '-js', '-sd', store],
    { stdio: 'ignore' });
  const natsUrl = `nats://127.0.0.1:${natsPort}`;
  let fleet = null;
  let publisher = null;
  let context = null;
  try {
    await waitForPort(natsPort, nats, 20_000);
    fleet = new ServerProcess(opts.command.map((w) => w.replaceAll('{nats}', natsUrl)), '127.0.0.1:0');
    const address = await fleet.address;
    console.log(`fleet listening on ${address}, NATS at ${natsUrl}`);
    publisher = spawn(opts.publisher, ['--nats', natsUrl, '--nodes', String(opts.nodes)],
      { stdio: ['pipe', 'pipe', 'inherit'] });
    let publisherOut = '';
    publisher.stdout.on('data', (c) => { publisherOut += c.toString(); });
    const base = `http://${address}`;
    const t0 = Date.now();
    await waitUntil(`${opts.nodes} nodes up in /api/v1/nodes`, async () =>
      (await getJson(`${base}/api/v1/nodes`)).body.up === opts.nodes, 60_000);
    timings.push(`${opts.nodes} nodes up in /api/v1/nodes ${Date.now() - t0} ms after the publisher started`);
    const nodesDoc = await getJson(`${base}/api/v1/nodes`);
    timings.push(`/api/v1/nodes ${nodesDoc.bytes} bytes for ${opts.nodes} nodes`);
    const metrics = await (await fetch(`${base}/metrics`)).text();
    const gauge = (name) => Number((new RegExp(`^${name} (\\S+)$`, 'm').exec(metrics) || [])[1]);
    const streams = gauge('gpustream_fleet_bus_streams');
    const stateBytes = gauge('gpustream_fleet_bus_state_bytes');
    check(streams === opts.nodes, `/metrics: the bus decoder keeps ${opts.nodes} streams (${streams})`);
    timings.push(`bus decoder state ${stateBytes} bytes, ${Math.round(stateBytes / streams)} per 8-GPU stream; ` +
      `latest cache ${gauge('gpustream_fleet_latest_bytes')} bytes`);

    context = await launchBrowser(chromium, opts.chromium, userDataDir);
    const page = context.pages()[0] || await context.newPage();
    page.setDefaultTimeout(STEP_MS);
    page.on('console', (msg) => { if (msg.type() === 'error') consoleErrors.push(msg.text()); });
    page.on('pageerror', (err) => pageErrors.push(String(err)));

    // 1. Load: summary and the first page.
    const tLoad = Date.now();
    await page.goto(`${base}/fleet`);
    await page.waitForFunction((n) =>
      document.getElementById('counts').textContent.includes(`${n} up`) &&
      document.querySelectorAll('#rows tr').length === 100, opts.nodes);
    timings.push(`page load to ${opts.nodes} nodes summarized and 100 rows shown: ${Date.now() - tLoad} ms`);
    check((await page.title()) === 'gpustream fleet', 'the page is the fleet dashboard');
    const counts = await page.textContent('#counts');
    check(counts.includes(`${opts.nodes} up`) && counts.includes('0 stale') && counts.includes('0 gone'),
      `the summary counts ${opts.nodes} nodes up (${counts})`);
    const pages = Math.ceil(opts.nodes / 100);
    check((await page.textContent('#page')) === `1/${pages} (${opts.nodes})`,
      `one page of 100 rows out of ${pages}`);
    let rows = await readRows(page);
    check(rows.length === 100 && rows[0][0] === 'node-0001' && rows[99][0] === 'node-0100',
      'the first page holds node-0001 … node-0100, sorted by name');
    check(rows.every((r) => r[1] === 'up' && r[3] === '8'), 'each row: up, 8 GPUs');

    // 2. Paging, filter, sort.
    await page.click('#next');
    rows = await readRows(page);
    check((await page.textContent('#page')) === `2/${pages} (${opts.nodes})` &&
      rows[0][0] === 'node-0101' && rows.length === 100, 'the next page holds node-0101 …');
    await page.click('#prev');
    const filterMs = await timeInPage(page, FILTER, 'node-0777');
    timings.push(`filter ${opts.nodes} → 1 node and render: ${filterMs.toFixed(1)} ms`);
    rows = await readRows(page);
    check(rows.length === 1 && rows[0][0] === 'node-0777', 'the filter narrows to one node');
    check((await page.textContent('#page')) === '1/1 (1)', 'the pager counts the one match');
    const clearMs = await timeInPage(page, FILTER, '');
    timings.push(`clear the filter (render 100 of ${opts.nodes}): ${clearMs.toFixed(1)} ms`);
    const sortMs = await timeInPage(page,
      `document.querySelector('th[data-k="utilization_percent_mean"]').click();`, null);
    timings.push(`sort ${opts.nodes} nodes by utilization and render: ${sortMs.toFixed(1)} ms`);
    rows = await readRows(page);
    const utils = rows.map((r) => Number(r[4].trim().split(/\s+/).pop()));
    check(utils.every((u) => Number.isFinite(u)) && utils.every((u, i) => i === 0 || utils[i - 1] <= u),
      `sorting by utilization orders the rows (${utils[0]} … ${utils[99]})`);
    await page.click('th[data-k="node"]');
    await page.click('th[data-k="node"]');
    rows = await readRows(page);
    check(rows[0][0] === `node-${String(opts.nodes).padStart(4, '0')}`,
      `the node column sorted twice is reversed (${rows[0][0]} first)`);
    await page.click('th[data-k="node"]');

    // 3. Drill-down.
    await timeInPage(page, FILTER, 'node-0777');
    await page.click('#rows tr.node');
    await page.waitForFunction(() => !document.getElementById('detail').hidden &&
      document.querySelectorAll('#detail table tr').length === 9);
    const detail = await page.textContent('#detail');
    check(detail.includes('node-0777') && detail.includes('sim-777-7'),
      'a click opens the node: its 8 GPUs');
    // The process rows can render a moment after the GPU rows (a later snapshot of the node):
    // wait for them, boundedly, rather than reading once.
    const processes = await page.waitForFunction(
      () => document.getElementById('detail').textContent.includes('train.py'), null,
      { timeout: 10000 }).then(() => true, () => false);
    check(processes, 'and their processes');
    await page.click('#close');

    // 4. A node that stops publishing goes stale.
    publisher.stdin.write('stop node-0042\n');
    await timeInPage(page, FILTER, 'node-0042');
    const tStale = Date.now();
    await page.waitForFunction(() => {
      const r = document.querySelector('#rows tr.node');
      return r && r.children[1].textContent === 'stale';
    });
    timings.push(`a stopped node shown stale after ${Date.now() - tStale} ms (--stale 3, refresh 2 s)`);
    const staleCounts = await page.textContent('#counts');
    check(staleCounts.includes(`${opts.nodes - 1} up`) && staleCounts.includes('1 stale'),
      `the summary counts it (${staleCounts})`);
    rows = await readRows(page);
    check(rows[0][4] === '–' && rows[0][5] === '–', 'its row withholds utilization and memory');
    await page.click('#rows tr.node');
    await page.waitForFunction(() => document.getElementById('detail').textContent.includes('node_stale'));
    const staleDetail = await page.textContent('#detail');
    check(staleDetail.includes('node_stale') && staleDetail.includes('stale'),
      'its drill-down says node_stale and shows each value as stale, not a number');
    const ok = publisherOut.includes(`published ${opts.nodes}`);
    check(ok, 'the publisher published every node in a round');

    if (opts.screenshot) {
      await timeInPage(page, FILTER, '');
      await page.screenshot({ path: opts.screenshot, fullPage: false });
      console.log(`screenshot: ${opts.screenshot}`);
    }
    check(consoleErrors.length === 0, `no console error (${consoleErrors.join(' | ')})`);
    check(pageErrors.length === 0, `no script error (${pageErrors.join(' | ')})`);
  } catch (e) {
    failures.push(e);
  } finally {
    for (const t of timings) console.log(`timing: ${t}`);
    if (context) await context.close().catch(() => {});
    if (publisher) {
      publisher.stdin.end('quit\n');
      publisher.kill('SIGTERM');
    }
    if (fleet) {
      const r = await fleet.stop();
      if (r.code !== 0) failures.push(new Error(`gpustream fleet exited ${r.code ?? r.signal}:\n${fleet.output}`));
    }
    nats.kill('SIGTERM');
    rmSync(userDataDir, { recursive: true, force: true });
    rmSync(store, { recursive: true, force: true });
  }
  return report(failures, null);
}

runWithLimit(main, HARD_LIMIT_MS);
