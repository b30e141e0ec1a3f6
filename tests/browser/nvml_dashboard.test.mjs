// The dashboard over the fake NVML in a real browser: headless Chromium (playwright-core) loads
// the page from `gpustream serve --probes nvidia --nvml-library FAKE` whose fake
// libnvidia-ml.so.1 (tests/fakes/nvml) has two GPUs: GPU 0 in MIG mode with two instances
// (3g.20gb, 1g.5gb) and PCIe/ECC counters, GPU 1 without MIG. It checks that
//   1. four cards are shown in the order GPU 0, its two MIG instances (marked as such, with
//      their parent), GPU 1;
//   2. each MIG card names its profile and GPU/compute instance ids and shows the instance's own
//      memory (used, of total), and no PCIe/ECC rows (those are not per instance);
//   3. GPU 0's card has the PCIe row (generation, width, rx/tx rates) and the ECC rows with the
//      scenario's counts;
//   4. an Xid fired in the server's fake NVML (through its event_trigger file, written once the
//      page is up) appears in GPU 0's event list, in no other card's, and is still listed after
//      a reload (then from /api/v1/events);
//   5. no console or script errors, no NaN/undefined on the page.
// Every wait is for a condition on the page, with a timeout (STEP_MS).
//
// Usage:
//   node nvml_dashboard.test.mjs [--screenshot FILE] [--chromium PATH] -- SERVER_COMMAND...
// SERVER_COMMAND must contain {listen} (replaced by 127.0.0.1:0) and load the fake NVML; the
// test writes the scenario and passes it through GPUSTREAM_FAKE_NVML_SCENARIO.
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import {
  ServerProcess, STEP_MS, check, launchBrowser, loadChromium, report, runWithLimit,
  waitForState,
} from './harness.mjs';

const HARD_LIMIT_MS = 120_000;
const GPU0 = 'GPU-aaaaaaaa-1111-2222-3333-444444444444';
const GPU1 = 'GPU-bbbbbbbb-1111-2222-3333-444444444444';
const MIG0 = 'MIG-11111111-2222-3333-4444-555555555555';
const MIG1 = 'MIG-66666666-2222-3333-4444-555555555555';
const GiB = 1024 ** 3;

function scenario(trigger) {
  return [
    'devices=2',
    `event_trigger=${trigger}`,
    `device.0.uuid=${GPU0}`,
    'device.0.name=NVIDIA A100-SXM4-40GB',
    `device.0.memory_total=${40 * GiB}`,
    `device.0.memory_used=${3 * GiB}`,
    'device.0.mig_mode=1',
    `device.0.mig.0.uuid=${MIG0}`,
    'device.0.mig.0.gi=1',
    'device.0.mig.0.ci=0',
    'device.0.mig.0.profile=3g.20gb',
    `device.0.mig.0.memory_total=${20 * GiB}`,
    `device.0.mig.0.memory_used=${1 * GiB}`,
    `device.0.mig.1.uuid=${MIG1}`,
    'device.0.mig.1.gi=5',
    'device.0.mig.1.ci=2',
    'device.0.mig.1.profile=1g.5gb',
    `device.0.mig.1.memory_total=${5 * GiB}`,
    `device.0.mig.1.memory_used=${2 * GiB}`,
    'device.0.pcie_gen=4',
    'device.0.pcie_gen_max=4',
    'device.0.pcie_width=8',
    'device.0.pcie_width_max=16',
    'device.0.pcie_rx_kb=2048',  // KB/s of 1024 bytes: 2.0 MiB/s
    'device.0.pcie_tx_kb=1024',
    'device.0.ecc_corrected_volatile=3',
    'device.0.ecc_uncorrected_volatile=1',
    'device.0.ecc_corrected_aggregate=12',
    'device.0.ecc_uncorrected_aggregate=2',
    `device.1.uuid=${GPU1}`,
    'device.1.name=NVIDIA L4',
    '',
  ].join('\n');
}

function parseArgs(argv) {
  const o = { screenshot: null, chromium: '/usr/bin/chromium', command: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') { o.command = argv.slice(i + 1); break; }
    if (a === '--screenshot') o.screenshot = argv[++i];
    else if (a === '--chromium') o.chromium = argv[++i];
    else throw new Error(`unknown argument ${a}`);
  }
  if (!o.command.some((w) => w.includes('{listen}'))) {
    throw new Error('the server command must contain {listen}');
  }
  return o;
}

/// What the page shows of every card, in page order.
function readCards(page) {
  return page.$$eval('.card', (cards) => cards.map((c) => ({
    device: c.dataset.device,
    parent: c.dataset.parent || null,
    mig: c.classList.contains('mig-instance'),
    name: c.querySelector('.name').textContent,
    sub: c.querySelector('.sub').textContent,
    badges: [...c.querySelectorAll('.badges .badge')].map((b) => b.textContent),
    memory: c.querySelector('.tile[data-metric="memory"] .value').textContent,
    memoryExtra: c.querySelector('.tile[data-metric="memory"] .value .extra')?.textContent ?? '',
    details: Object.fromEntries([...c.querySelectorAll('.details dt')]
      .map((dt) => [dt.textContent, dt.nextElementSibling.textContent])),
    events: [...c.querySelectorAll('.events .event')]
      .map((e) => ({ text: e.textContent, cls: e.className })),
  })));
}

/// Waits until the card of `device` lists an event whose text contains `text`.
function waitForEvent(page, device, text) {
  return page.waitForFunction(([d, t]) => {
    const card = document.querySelector(`.card[data-device="${d}"]`);
    return card && [...card.querySelectorAll('.events .event')]
      .some((e) => e.textContent.includes(t));
  }, [device, text]);
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const chromium = await loadChromium();
  if (!chromium) return 1;
  const failures = [];
  const consoleErrors = [];
  const pageErrors = [];
  const dir = mkdtempSync(join(tmpdir(), 'gpustream-nvml-browser-'));
  const trigger = join(dir, 'event-trigger');
  const scenarioFile = join(dir, 'scenario.txt');
  writeFileSync(scenarioFile, scenario(trigger));
  const server = new ServerProcess(opts.command, '127.0.0.1:0', [],
    { GPUSTREAM_FAKE_NVML_SCENARIO: scenarioFile });
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
    // Every card has had a snapshot, and the PCIe rates (NVML's own window) are in.
    await page.waitForFunction(() => {
      const cards = [...document.querySelectorAll('.card')];
      return cards.length === 4 && cards.every((c) => Number(c.dataset.updates || 0) >= 1) &&
        [...cards[0].querySelectorAll('.details dt')].some((dt) => dt.textContent === 'pcie');
    });
    const cards = await readCards(page);

    // 1. Order and parentage.
    check(JSON.stringify(cards.map((c) => c.device)) === JSON.stringify([GPU0, MIG0, MIG1, GPU1]),
      `the cards are GPU 0, its two MIG instances, GPU 1 (${cards.map((c) => c.device)})`);
    const [gpu0, mig0, mig1, gpu1] = cards;
    check(!gpu0.mig && !gpu1.mig && gpu0.parent === null && gpu1.parent === null,
      'the physical GPUs are not marked as MIG instances');
    check(mig0.mig && mig1.mig && mig0.parent === GPU0 && mig1.parent === GPU0,
      `both MIG cards are marked as instances of ${GPU0}`);
    check(mig0.sub.includes(`MIG instance of ${GPU0}`) && mig1.sub.includes(`MIG instance of ${GPU0}`),
      `the MIG cards say whose instance they are ("${mig0.sub}")`);

    // 2. The MIG cards: profile, ids, their own memory, no device-wide rows.
    check(mig0.name.includes('3g.20gb') && mig0.badges.includes('MIG 3g.20gb · GI 1 · CI 0'),
      `MIG 0 shows profile 3g.20gb, GI 1, CI 0 ("${mig0.name}", ${JSON.stringify(mig0.badges)})`);
    check(mig1.name.includes('1g.5gb') && mig1.badges.includes('MIG 1g.5gb · GI 5 · CI 2'),
      `MIG 1 shows profile 1g.5gb, GI 5, CI 2 ("${mig1.name}", ${JSON.stringify(mig1.badges)})`);
    check(mig0.memory.startsWith('1.0 GiB') && mig0.memoryExtra === 'of 20.0 GiB (5 %)',
      `MIG 0 shows its own memory: 1 GiB of 20 GiB ("${mig0.memory}")`);
    check(mig1.memory.startsWith('2.0 GiB') && mig1.memoryExtra === 'of 5.0 GiB (40 %)',
      `MIG 1 shows its own memory: 2 GiB of 5 GiB ("${mig1.memory}")`);
    check(gpu0.memory.startsWith('3.0 GiB') && gpu0.memoryExtra === 'of 40.0 GiB (8 %)',
      `GPU 0 keeps the whole GPU's memory: 3 GiB of 40 GiB ("${gpu0.memory}")`);
    check(gpu0.badges.includes('MIG mode: partitioned') && !gpu1.badges.includes('MIG mode: partitioned'),
      `GPU 0 is marked partitioned, GPU 1 is not (${JSON.stringify(gpu0.badges)})`);
    for (const [label, m] of [['MIG 0', mig0], ['MIG 1', mig1]]) {
      const rows = Object.keys(m.details);
      check(!rows.some((r) => /^(pcie|ecc|nvlink|retired|remapped)/.test(r)),
        `${label} has no PCIe/ECC/NVLink rows (not per instance): ${rows.join(', ')}`);
    }

    // 3. GPU 0's interconnect and health rows.
    const pcie = gpu0.details.pcie;
    check(pcie === 'gen 4  ·  of 4  ·  width x 8  ·  of x 16  ·  rx 2.0 MiB/s  ·  tx 1.0 MiB/s',
      `GPU 0's PCIe row: gen 4 of 4, x8 of x16, rx 2 MiB/s, tx 1 MiB/s ("${pcie}")`);
    check(gpu0.details['ecc volatile'] === 'corrected 3  ·  uncorrected 1',
      `GPU 0's volatile ECC row: 3 corrected, 1 uncorrected ("${gpu0.details['ecc volatile']}")`);
    check(gpu0.details['ecc aggregate'] === 'corrected 12  ·  uncorrected 2',
      `GPU 0's aggregate ECC row: 12, 2 ("${gpu0.details['ecc aggregate']}")`);
    check(cards.every((c) => c.events.length === 0), 'no card lists an event before one is fired');

    // 4. An Xid 79 on GPU 0, fired out of process through the fake's trigger file.
    writeFileSync(trigger + '.tmp', 'device=0\ntype=xid\ndata=79\ncount=1\n');
    renameSync(trigger + '.tmp', trigger);
    await waitForEvent(page, GPU0, 'Xid 79');
    let after = await readCards(page);
    const listed = after.find((c) => c.device === GPU0).events;
    check(listed.length === 1 && /^.+ · Xid 79$/.test(listed[0].text) &&
      listed[0].cls.split(' ').includes('bad'),
      `GPU 0's event list shows the Xid 79, marked bad (${JSON.stringify(listed)})`);
    check(after.filter((c) => c.device !== GPU0).every((c) => c.events.length === 0),
      'no other card lists it');
    await page.reload();
    await waitForState(page, 'connected');
    await waitForEvent(page, GPU0, 'Xid 79');
    after = await readCards(page);
    check(after.find((c) => c.device === GPU0).events.length === 1,
      'after a reload the Xid is listed once again (from /api/v1/events)');

    // 5. Nothing broken.
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
