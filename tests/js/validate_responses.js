// Checks recorded answers against the response schemas of an OpenAPI document:
//   node validate_responses.js SPEC.json RECORDS.json
// RECORDS: [{"method": "post", "path": "/translate", "status": 200, "body": {...}}, ...]
// Prints one line per record ("ok ..." or "FAIL ...: errors") and exits 1 when any fails.
// Schemas are compiled with ajv (draft-07, not strict: OpenAPI 3.0 keywords such as
// "example" are ignored); a status the document does not list for the path fails.
const SwaggerParser = require("@apidevtools/swagger-parser");
const Ajv = require("ajv");
const fs = require("fs");

(async () => {
  const api = await SwaggerParser.dereference(process.argv[2]);
  const records = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
  const ajv = new Ajv({ strict: false, allErrors: true });
  let failed = 0;
  for (const r of records) {
    const op = (api.paths[r.path] || {})[r.method];
    const resp = op && op.responses && (op.responses[String(r.status)] || op.responses.default);
    const schema = resp && resp.content && resp.content["application/json"] && resp.content["application/json"].schema;
    const what = `${r.method.toUpperCase()} ${r.path} ${r.status} ${JSON.stringify(r.body).slice(0, 120)}`;
    if (!schema) {
      console.log(`FAIL ${what}: the spec lists no JSON answer for this status`);
      failed++;
      continue;
    }
    const validate = ajv.compile(schema);
    if (validate(r.body)) console.log(`ok ${what}`);
    else {
      console.log(`FAIL ${what}: ${ajv.errorsText(validate.errors)}`);
      failed++;
    }
  }
  process.exit(failed ? 1 : 0);
})().catch((e) => {
  console.log("FAIL", e.message);
  process.exit(1);
});
