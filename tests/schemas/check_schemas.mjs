// Checks the protocol's JSON Schemas (schemas/*.schema.json) against the C++ code with a real
// validator (ajv, draft 2020-12): every message the C++ code emits must validate, and every
// invalid example must be rejected by both ajv and the C++ parser.
// The fleet files in FLEET_DIR must validate against fleet.schema.json (test_fleet_sim parses
// the same files in C++).
// Usage: node check_schemas.mjs PROTO_TOOL SCHEMA_DIR INVALID_EXAMPLES_JSON FLEET_DIR
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

let Ajv2020;
try {
  Ajv2020 = (await import('ajv/dist/2020.js')).default;
} catch {
  console.error('ajv is not installed: run scripts/test (it runs npm ci in tests/)');
  process.exit(2);
}

const [protoTool, schemaDir, invalidFile, fleetDir] = process.argv.slice(2);
const ajv = new Ajv2020({ strict: true, allErrors: true });
for (const name of readdirSync(schemaDir).filter((n) => n.endsWith('.schema.json'))) {
  ajv.addSchema(JSON.parse(readFileSync(join(schemaDir, name), 'utf8')));
}
const schemaFor = (type) => {
  const validate = ajv.getSchema(`tessera:/schemas/${type}.schema.json`);
  if (!validate) throw new Error(`no schema for message type ${type}`);
  return validate;
};

let passed = 0;
let failed = 0;
const report = (ok, what) => {
  if (ok) passed += 1;
  else failed += 1;
  console.log(`${ok ? 'ok' : 'not ok'} - ${what}`);
};

const work = mkdtempSync(join(tmpdir(), 'tessera-schemas-'));
try {
  execFileSync(protoTool, ['emit', work]);
  const emitted = readdirSync(work).filter((n) => n.endsWith('.json'));
  report(emitted.length >= 7, `C++ emitted ${emitted.length} example messages`);
  for (const name of emitted) {
    const type = name.split('.')[0];
    const validate = schemaFor(type);
    const ok = validate(JSON.parse(readFileSync(join(work, name), 'utf8')));
    report(ok, `${name} from C++ validates against ${type}.schema.json` +
      (ok ? '' : `: ${ajv.errorsText(validate.errors)}`));
    const parsed = spawnSync(protoTool, ['parse', type, join(work, name)], { encoding: 'utf8' });
    report(parsed.status === 0, `${name} parses back in C++ ${parsed.stderr.trim()}`);
  }

  const { cases } = JSON.parse(readFileSync(invalidFile, 'utf8'));
  cases.forEach((c, i) => {
    const schemaAccepts = schemaFor(c.type)(c.message);
    report(!schemaAccepts, `schema rejects ${c.type}: ${c.description}`);
    const file = join(work, `invalid-${i}.json`);
    writeFileSync(file, JSON.stringify(c.message));
    const parsed = spawnSync(protoTool, ['parse', c.type, file], { encoding: 'utf8' });
    report(parsed.status === 1 && parsed.stderr.trim().length > 0,
      `C++ rejects ${c.type}: ${c.description} (${parsed.stderr.trim()})`);
  });

  const fleets = readdirSync(fleetDir).filter((n) => n.endsWith('.json'));
  report(fleets.length >= 1, `${fleets.length} example fleet files`);
  for (const name of fleets) {
    const validate = schemaFor('fleet');
    const ok = validate(JSON.parse(readFileSync(join(fleetDir, name), 'utf8')));
    report(ok, `${name} validates against fleet.schema.json` + (ok ? '' : `: ${ajv.errorsText(validate.errors)}`));
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
