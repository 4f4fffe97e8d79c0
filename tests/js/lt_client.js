// Calls a deepmt server through the npm `libretranslate` client:
//   node lt_client.js URL SOURCE TARGET FORMAT TEXT [API_KEY]  -> prints {"result": ...} or {"error": ...}
const { translate } = require("libretranslate");
const [url, source, target, format, query, apiKey] = process.argv.slice(2);
translate({ query, source, target, format, apiurl: url, apiKey })
  .then((result) => console.log(JSON.stringify({ result })))
  .catch((e) => {
    console.log(JSON.stringify({ error: String(e) }));
    process.exit(1);
  });
