// The dashboard's activity row in a real browser: headless Chromium (playwright-core) loads the
// page from `gpustream serve --probes amd --amd-source sysfs` over a generated sysfs tree of
// three amdgpu cards whose binary gpu_metrics tables are packed here from the kernel's layouts
// (kgd_pp_interface.h): a Navi board's 1.3 table (graphics 97 %, memory controller 41 %), an
// APU's 2.1 table (graphics 1250 hundredths of a percent, no memory controller figure) and a card
// without the file. It checks that
//   1. the Navi card shows the row "activity" with graphics 97 % and DRAM 41 %, and nothing of
//      the NVIDIA-only figures (SM, tensor, FP...);
//   2. the APU card shows graphics 13 % (12.5 rounded) and no DRAM;
//   3. the card without gpu_metrics has no activity row at all;
//   4. no console or script errors, no NaN/undefined on the page.
//
// Usage:
//   node amd_dashboard.test.mjs [--screenshot FILE] [--chromium PATH] -- SERVER_COMMAND...
// SERVER_COMMAND must contain {listen} (replaced by 127.0.0.1:0) and {root} (replaced by the
// generated tree: {root}/sys, {root}/proc, {root}/dev).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

import {
  ServerProcess, STEP_MS, check, launchBrowser, loadChromium, report, runWithLimit,
  waitForState,
} from './harness.mjs';

const HARD_LIMIT_MS = 120_000;

function parseArgs(argv) {
  const o = { screenshot: null, chromium: '/usr/bin/chromium', command: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') { o.command = argv.slice(i + 1); break; }
    if (a === '--screenshot') o.screenshot = argv[++i];
    else if (a === '--chromium') o.chromium = argv[++i];
    else throw new Error(`unknown argument ${a}`);
  }
  if (!o.command.some((w) => w.includes('{listen}')) ||
      !o.command.some((w) => w.includes('{root}'))) {
    throw new Error('the server command must contain {listen} and {root}');
  }
  return o;
}

/// A gpu_metrics table: `size` bytes of 0x7F (a misplaced read finds 0x7F7F, beyond any
/// percentage), the header, and the activity figures at their offsets.
function table(format, content, size, fields) {
  const b = Buffer.alloc(size, 0x7f);
  b.writeUInt16LE(size, 0);
  b.writeUInt8(format, 2);
  b.writeUInt8(content, 3);
  for (const [offset, value] of fields) b.writeUInt16LE(value, offset);
  return b;
}

function writeTree(root) {
  const put = (rel, data) => {
    const path = join(root, rel);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, data);
  };
  const cards = [
    // gpu_metrics_v1_3: average_gfx_activity at 16, average_umc_activity at 18 (%).
    ['0000:03:00.0', '0x73bf', table(1, 3, 120, [[16, 97], [18, 41], [20, 0]])],
    // gpu_metrics_v2_1: average_gfx_activity at 28 (1/100 %), average_mm_activity at 30.
    ['0000:c4:00.0', '0x15bf', table(2, 1, 120, [[28, 1250], [30, 300]])],
    ['0000:05:00.0', '0x744c', null],
  ];
  cards.forEach(([bus, id, metrics], i) => {
    const dev = `sys/class/drm/card${i}/device/`;
    put(dev + 'vendor', '0x1002\n');
    put(dev + 'device', id + '\n');
    put(dev + 'uevent', `DRIVER=amdgpu\nPCI_CLASS=30000\nPCI_SLOT_NAME=${bus}\n`);
    put(dev + 'power/runtime_status', 'active\n');
    put(dev + 'gpu_busy_percent', '37\n');
    put(dev + 'mem_info_vram_total', '17163091968\n');
    put(dev + 'mem_info_vram_used', '1073741824\n');
    if (metrics) put(dev + 'gpu_metrics', metrics);
  });
  mkdirSync(join(root, 'proc'), { recursive: true });
  mkdirSync(join(root, 'dev/dri'), { recursive: true });
}

function readCards(page) {
  return page.$$eval('.card', (cards) => cards.map((c) => ({
    device: c.dataset.device,
    details: Object.fromEntries([...c.querySelectorAll('.details dt')]
      .map((dt) => [dt.textContent, dt.nextElementSibling.textContent])),
  })));
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const chromium = await loadChromium();
  if (!chromium) return 1;
  const failures = [];
  const consoleErrors = [];
  const pageErrors = [];
  const dir = mkdtempSync(join(tmpdir(), 'gpustream-amd-browser-'));
  writeTree(dir);
  const command = opts.command.map((w) => w.replaceAll('{root}', dir));
  const server = new ServerProcess(command, '127.0.0.1:0');
  let context = null;
  try {
    const address = await server.address;
    console.log(`server listening on ${address}`);
    context = await launchBrowser(chromium, opts.chromium, join(dir, 'chromium'));
    const page = context.pages()[0] || await context.newPage();
    page.setDefaultTimeout(STEP_MS);
    page.on('console', (msg) => { if (msg.type() === 'error') consoleErrors.push(msg.text()); });
    page.on('pageerror', (err) => pageErrors.push(String(err)));

    await page.goto(`http://${address}/`);
    await waitForState(page, 'connected');
    await page.waitForFunction(() => {
      const cards = [...document.querySelectorAll('.card')];
      return cards.length === 3 && cards.every((c) => Number(c.dataset.updates || 0) >= 1);
    });
    const cards = await readCards(page);
    const byId = Object.fromEntries(cards.map((c) => [c.device, c.details]));
    const navi = byId['amd:0000:03:00.0'] || {};
    const apu = byId['amd:0000:c4:00.0'] || {};
    const none = byId['amd:0000:05:00.0'] || {};

    // 1.-3. The activity rows.
    check(navi.activity === 'graphics 97 %  ·  DRAM 41 %',
      `the Navi card's activity row: graphics 97 %, DRAM 41 % ("${navi.activity}")`);
    check(apu.activity === 'graphics 13 %',
      `the APU card's activity row: graphics 13 %, no DRAM ("${apu.activity}")`);
    check(!('activity' in none) && Object.keys(none).length > 0,
      `the card without gpu_metrics has no activity row (${Object.keys(none).join(', ')})`);

    // 4. Nothing broken.
    const body = await page.innerText('body');
    const junk = /.{0,40}(NaN|undefined|\[object).{0,40}/.exec(body);
    check(!junk, `no NaN, undefined or [object ...] on the page${junk ? ` ("${junk[0]}")` : ''}`);
    if (opts.screenshot) {
      await page.screenshot({ path: opts.screenshot, fullPage: true });
      console.log(`screenshot: ${opts.screenshot}`);
    }
    check(consoleErrors.length === 0 && pageErrors.length === 0,
      `no console errors (${JSON.stringify(consoleErrors.concat(pageErrors))})`);
    const stopped = await server.stop();
    check(stopped.code === 0, `the server stopped cleanly on SIGTERM (${JSON.stringify(stopped)})`);
  } catch (e) {
    failures.push(e);
  } finally {
    if (context) await context.close().catch(() => {});
    await server.stop().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
  return report(failures, server);
}

runWithLimit(main, HARD_LIMIT_MS);
