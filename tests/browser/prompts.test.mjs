// The dashboard's prompts in a real browser: tessera-data prepares a small captioned-canvases
// dataset (with its stand-in text encoder), a real tessera-server serves a dit-tiny-text task on
// loopback, and Debian's chromium (headless, driven by playwright-core) opens the page. It types
// a prompt, sets the CFG scale and sees a row of samples drawn; picks one of the dataset's
// held-out captions and sees it drawn; types a word outside the vocabulary and sees the server's
// refusal naming it. A screenshot goes to TESSERA_SCREENSHOTS (dashboard-prompts.png).
//
// Usage (meson sets the variables): node prompts.test.mjs
//   TESSERA_DATA, TESSERA_SERVER  the programs
//   TESSERA_SCREENSHOTS           where the screenshot goes
//   CHROMIUM                      the browser (default /usr/bin/chromium)
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { env, launchBrowser, run, runTest, start, startServer } from './harness.mjs';

const dir = mkdtempSync(join(tmpdir(), 'tessera-prompts-'));
const screenshots = env('TESSERA_SCREENSHOTS');
mkdirSync(screenshots, { recursive: true });

// The shown prompt image's size and pixel spread (a blank or flat row has none).
function promptPixels(page) {
  return page.evaluate(() => {
    const img = document.getElementById('prompt-img');
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
    return { width: canvas.width, height: canvas.height, std: Math.sqrt(squares / n - mean * mean) };
  });
}

async function main() {
  const data = join(dir, 'canvases');
  const state = join(dir, 'server');
  await run(env('TESSERA_DATA'), ['prepare', 'canvases', '--out', data, '--limit', '120',
    '--autoencoder-steps', '20', '--threads', '2']);
  await run(env('TESSERA_SERVER'), ['init', '--state', state]);
  await run(env('TESSERA_SERVER'), ['task', 'create', '--state', state, '--data', data, '--local-steps', '10',
    '--batch', '16', '--target-seconds', '0', '--replication', '0', '--loss-check', '0']);

  const base = await startServer(state);

  const browser = await launchBrowser();
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 }, colorScheme: 'light' });
  const consoleErrors = [];
  page.on('console', (message) => { if (message.type() === 'error') consoleErrors.push(message.text()); });
  page.on('pageerror', (error) => consoleErrors.push(error.message));

  await page.goto(`${base}/`, { waitUntil: 'load' });
  // The form appears for a text task, with the dataset's captions and the encoder's words.
  await page.waitForSelector('#prompt-form:not([hidden])', { timeout: 60_000 });
  const heldout = await page.$$eval('#prompt-caption optgroup[label^="held-out"] option', (options) => options.length);
  assert.ok(heldout > 0, 'the held-out captions are listed');
  assert.match(await page.textContent('#prompt-words'), /\bbag\b/);

  // Typed: a row of samples comes back as an image.
  await page.fill('#prompt-text', 'a dark bag left of a light top');
  await page.$eval('#prompt-cfg', (input) => { input.value = '4'; input.dispatchEvent(new Event('input')); });
  assert.equal(await page.textContent('#prompt-cfg-value'), '4');
  await page.click('#prompt-draw');
  await page.waitForFunction(() => window.tesseraDashboard.prompts.drawn >= 1, null, { timeout: 120_000 });
  const typed = await promptPixels(page);
  console.log('typed prompt:', JSON.stringify(typed));
  assert.equal(typed.width, 8 * 64, 'eight 64-pixel canvases in a row');
  assert.equal(typed.height, 64);
  assert.ok(typed.std > 1, `the samples are not blank (pixel std ${typed.std.toFixed(1)})`);
  assert.match(await page.textContent('#prompt-status'), /a dark bag left of a light top.*CFG 4.*version 0/);

  // Picked: one of the held-out captions.
  const picked = await page.$eval('#prompt-caption optgroup[label^="held-out"] option', (option) => option.value);
  await page.selectOption('#prompt-caption', picked);
  assert.notEqual(await page.inputValue('#prompt-text'), '');
  await page.click('#prompt-draw');
  await page.waitForFunction(() => window.tesseraDashboard.prompts.drawn >= 2, null, { timeout: 120_000 });
  await page.screenshot({ path: join(screenshots, 'dashboard-prompts.png'), fullPage: true });

  // A word outside the vocabulary: the server's 400 names it, shown as an error.
  await page.fill('#prompt-text', 'a purple bag left of a top');
  await page.click('#prompt-draw');
  await page.waitForSelector('#prompt-status.error', { timeout: 30_000 });
  assert.match(await page.textContent('#prompt-status'), /"purple"/);
  assert.equal(await page.evaluate(() => window.tesseraDashboard.prompts.drawn), 2);

  // The one 400 above is the browser's own report of the refused request; nothing else.
  const unexpected = consoleErrors.filter((text) => !/status of 400/.test(text));
  assert.deepEqual(unexpected, [], 'no console errors');
  console.log(`dashboard prompts browser test passed; screenshot in ${screenshots}`);
}

await runTest(main, dir);
