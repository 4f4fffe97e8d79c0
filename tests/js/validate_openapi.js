// Validates an OpenAPI document with @apidevtools/swagger-parser (schema and
// $refs); prints "valid TITLE" or "invalid: MESSAGE" and exits 1.
const SwaggerParser = require("@apidevtools/swagger-parser");
SwaggerParser.validate(process.argv[2])
  .then((api) => console.log("valid", api.info.title))
  .catch((e) => {
    console.log("invalid:", e.message);
    process.exit(1);
  });
