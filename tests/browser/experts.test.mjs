// An expert group on the dashboard in Debian's chromium (playwright-core): tessera-data clusters a
// small Fashion-MNIST dataset into two experts, `task create --experts` makes the group and its
// router, and a real volunteer trains expert 0 alone (`--tasks g-e0`). On an expert's page the
// group card lists both experts and the router, each with its version and loss, the router with
// its accuracy and expert 0 with its volunteer; the samples are the group's, drawn through the
// router by the routing rule it names, a row per Fashion-MNIST class; choosing the router from
// the card opens its page, which shows the same group. Screenshot: experts.png.
//
// Usage (meson sets the variables): node experts.test.mjs
//   TESSERA_DATA, TESSERA_SERVER, TESSERA_CLIENT, TESSERA_SCREENSHOTS, CHROMIUM   as dashboard.test.mjs
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { env, launchBrowser, run, runTest, start, startServer, waitFor } from './harness.mjs';

const dir = mkdtempSync(join(tmpdir(), 'tessera-experts-'));
const screenshots = env('TESSERA_SCREENSHOTS');
mkdirSync(screenshots, { recursive: true });

async function main() {
  const data = join(dir, 'data');
  const experts = join(dir, 'experts');
  const state = join(dir, 'server');
  await run(env('TESSERA_DATA'), ['prepare', 'fashion-mnist', '--out', data, '--limit', '2000',
    '--shard-size', '500', '--autoencoder-steps', '100', '--threads', '2']);
  await run(env('TESSERA_DATA'), ['cluster', '--data', data, '--out', experts, '--experts', '2', '--seed', '0']);
  await run(env('TESSERA_SERVER'), ['init', '--state', state]);
  await run(env('TESSERA_SERVER'), ['task', 'create', '--state', state, '--experts', experts, '--id', 'g',
    '--local-steps', '10', '--batch', '32', '--target-seconds', '0', '--eval-interval', '1',
    '--replication', '0', '--loss-check', '0']);
  const base = await startServer(state);
  start(env('TESSERA_CLIENT'), ['--server', base, '--state', join(dir, 'volunteer'), '--device', 'cpu',
    '--threads', '1', '--name', 'expert-volunteer', '--tasks', 'g-e0', '--quiet']).stdout.resume();
  const tasks = async () => (await fetch(`${base}/api/v1/tasks`)).json();
  const e0 = async () => (await tasks()).tasks.find((t) => t.id === 'g-e0');
  await waitFor('expert 0 at version 2', async () => (await e0()).version >= 2, 300);

  const browser = await launchBrowser();
  const page = await browser.newPage({ viewport: { width: 1280, height: 1100 }, colorScheme: 'light' });
  const consoleErrors = [];
  page.on('console', (message) => { if (message.type() === 'error') consoleErrors.push(message.text()); });
  page.on('pageerror', (error) => consoleErrors.push(error.message));
  await page.goto(`${base}/?task=g-e0`, { waitUntil: 'load' });

  // The group card: both experts and the router, in that order, with their figures.
  await page.waitForFunction(() => !document.getElementById('group').hidden, null, { timeout: 60_000 });
  assert.equal(await page.textContent('#group-title'), 'Expert group g: 2 experts and a router');
  const rows = await waitFor('the members\' losses and expert 0\'s volunteer', async () => {
    const cells = await page.$$eval('#group-members tbody tr',
      (trs) => trs.map((tr) => [...tr.cells].map((td) => td.textContent)));
    const ready = cells.length === 3 && cells.every((c) => c[3] !== '–') && cells[0][5] === '1';
    return ready && cells;
  }, 120);
  console.log('group rows:', JSON.stringify(rows));
  assert.deepEqual(rows.map((c) => c[0]), ['g-e0', 'g-e1', 'g-router']);
  assert.deepEqual(rows.map((c) => c[1]), ['expert 0', 'expert 1', 'router']);
  assert.match(rows[2][4], /^\d+\.\d%$/, 'the router\'s accuracy');
  assert.equal(rows[0][4], '–', 'an expert has no router accuracy');
  assert.equal(rows[1][5], '0', 'nobody trains expert 1');

  // The samples are the group's, through the router, a row per class of the experts' data.
  await page.waitForFunction(() => {
    const img = document.getElementById('samples-img');
    return img && img.complete && img.naturalWidth > 0;
  }, null, { timeout: 180_000 });
  assert.match(await page.textContent('#samples-title'), /^Samples of group g through the router \(top1-class\)/);
  const labels = await page.$$eval('#samples .rows span', (spans) => spans.map((s) => s.textContent));
  assert.equal(labels.length, 10);
  assert.equal(labels[0], 'T-shirt/top');
  const size = await page.evaluate(() => {
    const img = document.getElementById('samples-img');
    return [img.naturalWidth, img.naturalHeight];
  });
  assert.deepEqual(size, [8 * 32, 10 * 32], 'eight samples a row, a row per class');
  await page.screenshot({ path: join(screenshots, 'experts.png'), fullPage: true });

  // The router's page, chosen from the card, shows the same group.
  await page.click('#group-members a[href="?task=g-router"]');
  await page.waitForFunction(() => document.getElementById('task-select').value === 'g-router', null,
    { timeout: 30_000 });
  await page.waitForFunction(() => !document.getElementById('group').hidden, null, { timeout: 30_000 });
  assert.equal(await page.textContent('#group-title'), 'Expert group g: 2 experts and a router');
  assert.deepEqual(consoleErrors, [], 'no console errors');
}

runTest(main, dir);
