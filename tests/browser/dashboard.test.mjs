// The dashboard in a real browser: tessera-data prepares a small Fashion-MNIST dataset, a real
// tessera-server runs a dit-tiny task on loopback and a real tessera-client trains it, while
// Debian's chromium (headless, driven by playwright-core) loads the page. It checks that the
// page loads without console errors, that every chart has data points, that the sample
// images are not blank, that a server-sent event changes the shown version without a
// reload, that the page fits a phone's width and follows the dark preference, that the audits
// card shows the server's record, that a second task can be chosen, and that the divergence
// guard's report reads as it should on the task's line; it saves screenshots (light, dark,
// phone, diverged) into TESSERA_SCREENSHOTS.
//
// Usage (meson sets the variables): node dashboard.test.mjs
//   TESSERA_DATA, TESSERA_SERVER, TESSERA_CLIENT  the programs
//   TESSERA_SCREENSHOTS                           where the screenshots go
//   CHROMIUM                                      the browser (default /usr/bin/chromium)
//   TESSERA_VOLUNTEERS, TESSERA_WAIT_VERSION,     volunteers to run (1), and the version (2) and
//   TESSERA_WAIT_SECONDS                          seconds of training (0) before the browser
//                                                 opens; larger for docs/ (scripts/dashboard-screenshots)
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { env, launchBrowser, run, runTest, sleep, start, startServer, waitFor } from './harness.mjs';

const dir = mkdtempSync(join(tmpdir(), 'tessera-dashboard-'));
const screenshots = env('TESSERA_SCREENSHOTS');
mkdirSync(screenshots, { recursive: true });

async function main() {
  const data = join(dir, 'data');
  const state = join(dir, 'server');
  await run(env('TESSERA_DATA'), ['prepare', 'fashion-mnist', '--out', data, '--limit', '3000',
    '--shard-size', '1000', '--autoencoder-steps', '150', '--threads', '2']);
  await run(env('TESSERA_SERVER'), ['init', '--state', state]);
  await run(env('TESSERA_SERVER'), ['task', 'create', '--state', state, '--data', data, '--local-steps', '20',
    '--batch', '32', '--target-seconds', '0', '--eval-interval', '1', '--eval-samples', '256',
    '--replication', '0', '--loss-check', '0']);

  const base = await startServer(state);
  const volunteers = Number(env('TESSERA_VOLUNTEERS', '1'));
  for (let i = 0; i < volunteers; i += 1) {
    const name = i === 0 ? 'browser-test-volunteer' : `volunteer-${i + 1}`;
    start(env('TESSERA_CLIENT'), ['--server', base, '--state', join(dir, `volunteer-${i}`), '--device', 'cpu',
      '--threads', '1', '--name', name, '--quiet']).stdout.resume();
  }

  const stats = async () => (await fetch(`${base}/api/v1/stats`)).json();
  const warmUp = Number(env('TESSERA_WAIT_VERSION', '2'));
  await waitFor(`version ${warmUp}`, async () => (await stats()).version >= warmUp, Math.max(300, 3 * warmUp));
  await sleep(1000 * Number(env('TESSERA_WAIT_SECONDS', '0')));

  const browser = await launchBrowser();
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 }, colorScheme: 'light' });
  const consoleErrors = [];
  page.on('console', (message) => { if (message.type() === 'error') consoleErrors.push(message.text()); });
  page.on('pageerror', (error) => consoleErrors.push(error.message));
  let streamRequests = 0;
  page.on('request', (request) => { if (request.url().includes('/api/v1/events/stream')) streamRequests += 1; });

  await page.goto(`${base}/`, { waitUntil: 'load' });
  await page.evaluate(() => { window.loadMarker = 'first load'; });
  await page.waitForFunction(() => window.tesseraDashboard && window.tesseraDashboard.refreshes >= 1);

  // Every chart has data points (null is a gap, not a point); the loss curve has two or more.
  const points = await waitFor('data in every chart', async () => {
    const counts = await page.evaluate(() => Object.fromEntries(Object.entries(window.tesseraDashboard.data)
      .map(([name, data]) => [name, data.slice(1).flat().filter((v) => v !== null && v !== undefined).length])));
    const ready = Object.keys(counts).length === 6 && Object.values(counts).every((n) => n > 0) && counts.lossVersion >= 2;
    return ready && counts;
  }, 180);
  console.log('chart points:', JSON.stringify(points));
  // uPlot drew them: every chart has a canvas of the container's size.
  const canvases = await page.$$eval('.chart canvas', (list) => list.filter((c) => c.width > 100 && c.height > 100).length);
  assert.equal(canvases, 6, 'six drawn charts');

  // The sample grid is an image with real contrast, not a blank or flat square.
  await page.waitForFunction(() => {
    const img = document.getElementById('samples-img');
    return img && img.complete && img.naturalWidth > 0;
  }, null, { timeout: 180_000 });
  const pixels = await page.evaluate(() => {
    const img = document.getElementById('samples-img');
    const canvas = document.createElement('canvas');
    canvas.width = img.naturalWidth;
    canvas.height = img.naturalHeight;
    const context = canvas.getContext('2d');
    context.drawImage(img, 0, 0);
    const { data } = context.getImageData(0, 0, canvas.width, canvas.height);
    let sum = 0, squares = 0;
    const n = data.length / 4;
    for (let i = 0; i < data.length; i += 4) { sum += data[i]; squares += data[i] * data[i]; }
    const mean = sum / n;
    return { width: canvas.width, height: canvas.height, mean, std: Math.sqrt(squares / n - mean * mean) };
  });
  console.log('sample grid:', JSON.stringify(pixels));
  assert.ok(pixels.width >= 8 * 28 && pixels.height >= 10 * 28, 'ten rows of eight images');
  assert.ok(pixels.std > 10, `the sample grid is not blank (pixel std ${pixels.std.toFixed(1)})`);
  const labels = await page.$$eval('#samples .rows span', (spans) => spans.map((s) => s.textContent));
  assert.equal(labels.length, 10, 'a label per class row');

  // A version merged while the page is open reaches it through the event stream, not a reload.
  const shown = Number(await page.textContent('#version'));
  await page.waitForFunction((before) => Number(document.getElementById('version').textContent) > before, shown,
    { timeout: 180_000 });
  assert.equal(await page.evaluate(() => window.loadMarker), 'first load', 'the page was not reloaded');
  assert.equal(await page.evaluate(() => performance.getEntriesByType('navigation').length), 1);
  assert.ok(streamRequests >= 1, 'the page opened the event stream');
  assert.equal(await page.textContent('#live'), 'live');

  // The volunteer appears in the table and on the leaderboard.
  await page.waitForFunction(() => document.querySelector('#leaderboard li:not(.muted)') !== null, null,
    { timeout: 120_000 });
  const volunteerRow = await page.textContent('#volunteers tbody');
  assert.match(volunteerRow, /browser-test-volunteer/);
  assert.match(volunteerRow, /cpu/);

  // The audits card shows the server's record (GET /api/v1/audits): an honest volunteer fails none.
  const audits = await (await fetch(`${base}/api/v1/audits`)).json();
  await page.waitForFunction((passed) => {
    const m = /^(\d+) passed · (\d+) failed · \d+ sent to trusted volunteers/.exec(
      document.getElementById('audit-totals').textContent);
    return m && Number(m[1]) >= passed;
  }, audits.counts.audit_passed, { timeout: 60_000 });
  assert.match(await page.textContent('#audit-totals'), / 0 failed /);
  assert.ok(await page.$$eval('#audits tbody tr', (rows) => rows.length) >= 1, 'the audits table has a row');

  await page.screenshot({ path: join(screenshots, 'dashboard.png'), fullPage: true });

  // Dark preference: the page's colours follow it.
  const light = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  await page.emulateMedia({ colorScheme: 'dark' });
  const dark = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  assert.notEqual(dark, light, 'dark mode changes the background');
  await page.screenshot({ path: join(screenshots, 'dashboard-dark.png'), fullPage: true });

  // Phone width: nothing wider than the screen but the scrollable tables.
  await page.emulateMedia({ colorScheme: 'light' });
  await page.setViewportSize({ width: 390, height: 844 });
  await sleep(500);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(overflow <= 390, `the page fits 390 px (scroll width ${overflow})`);
  await page.screenshot({ path: join(screenshots, 'dashboard-phone.png'), fullPage: true });

  // A second task, created while the server runs, appears in the task selector; choosing it
  // opens its page (?task=ID) with its own overview and curve, then back to the first.
  await page.setViewportSize({ width: 1280, height: 900 });
  // Read before the second task exists: the page without ?task= shows the newest task.
  const first = await page.evaluate(() => window.tesseraDashboard.shownTask);
  await run(env('TESSERA_SERVER'), ['task', 'create', '--state', state, '--data', data, '--id', 'second',
    '--local-steps', '20', '--batch', '32', '--target-seconds', '0', '--eval-interval', '1', '--eval-samples', '256',
    '--replication', '0', '--loss-check', '0']);
  await page.waitForFunction(() => document.querySelectorAll('#task-select option').length === 2, null,
    { timeout: 60_000 });
  assert.ok(first && first !== 'second', `the first task was shown first (${first})`);
  await page.selectOption('#task-select', 'second');
  await page.waitForFunction(() => window.tesseraDashboard.shownTask === 'second', null, { timeout: 30_000 });
  assert.match(page.url(), /\?task=second$/);
  assert.equal(await page.evaluate(() => performance.getEntriesByType('navigation').length), 1, 'no reload');
  await waitFor('a curve of the second task', async () =>
    (await (await fetch(`${base}/api/v1/tasks/second/versions`)).json()).versions.some((v) => v.validation_loss !== null), 120);
  await page.waitForFunction(() => document.getElementById('loss').textContent !== 'not yet', null,
    { timeout: 60_000 });
  assert.doesNotMatch(await page.textContent('#model'), / 0 params/, 'the second task is served by the server');
  await page.screenshot({ path: join(screenshots, 'dashboard-second-task.png'), fullPage: true });
  await page.selectOption('#task-select', first);
  await page.waitForFunction((id) => window.tesseraDashboard.shownTask === id, first, { timeout: 30_000 });
  assert.match(page.url(), new RegExp(`\\?task=${first}$`));

  // The divergence guard's report (the fields aggregator.cpp stores) on the task's line: the
  // server's own stats with a recovery, then a pause, added in flight, since a real divergence
  // takes a diverging run; each reaches the page with the next merged version's refresh.
  let divergence = { action: 'recovered', diverged_version: 7, evaluated_version: 7, loss: 5.27, best_loss: 0.93,
    best_version: 4, returned_to: 4, version: 8, server_lr: 0.5, recoveries: 1, max_recoveries: 3, at: 0,
    message: 'diverged' };
  await page.route('**/stats', async (route) => {
    const response = await route.fetch();
    const stats = await response.json();
    if (stats.task) stats.task.divergence = divergence;
    await route.fulfill({ response, json: stats });
  });
  const taskLine = (pattern) => page.waitForFunction((source) =>
    new RegExp(source).test(document.getElementById('task').textContent), pattern.source, { timeout: 120_000 });
  await taskLine(/DIVERGED at version 7: back to version 4, server lr now 0\.5 \(1 of 3\)/);
  divergence = { ...divergence, action: 'paused', diverged_version: 19, returned_to: null, recoveries: 3 };
  await taskLine(/DIVERGED at version 19: task PAUSED for the operator/);
  assert.equal(await page.evaluate(() => window.tesseraDashboard.shownTask), first, 'the line is the first task\'s');
  await page.screenshot({ path: join(screenshots, 'dashboard-diverged.png'), fullPage: true });
  await page.unrouteAll({ behavior: 'ignoreErrors' });

  assert.deepEqual(consoleErrors, [], 'no console errors');
  console.log(`dashboard browser test passed; screenshots in ${screenshots}`);
}

await runTest(main, dir);
