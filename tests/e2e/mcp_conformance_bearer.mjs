// Preloaded into the MCP conformance suite's process (`node --import`): every HTTP request it makes
// carries `Authorization: Bearer $MCP_CONFORMANCE_BEARER`.
//
// The suite (@modelcontextprotocol/conformance 0.1.12) has no option for headers or credentials:
// its scenarios reach the server through the SDK's StreamableHTTPClientTransport (the global
// `fetch`) and, for dns-rebinding-protection, undici's `request`. Both send through undici's global
// dispatcher, which this replaces by one that adds the header. The suite's own headers are kept
// (its Host and Origin included); a request that already names an Authorization keeps it.
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const token = process.env.MCP_CONFORMANCE_BEARER;
if (!token) {
  throw new Error("MCP_CONFORMANCE_BEARER is not set: the bearer the suite should send");
}
// The suite's own undici (resolved from its script, process.argv[1]): the dispatcher is global to
// every copy of undici in the process, Node's built-in fetch included.
const undici = createRequire(pathToFileURL(process.argv[1]))("undici");
const authorization = `Bearer ${token}`;

function withBearer(headers) {
  if (headers == null) {
    return { authorization };
  }
  if (Array.isArray(headers)) {
    // [name, value, name, value, ...] (fetch) or [[name, value], ...]
    const flat = headers.flat();
    for (let index = 0; index < flat.length; index += 2) {
      if (String(flat[index]).toLowerCase() === "authorization") {
        return headers;
      }
    }
    return [...flat, "authorization", authorization];
  }
  if (typeof headers[Symbol.iterator] === "function") {
    return withBearer([...headers]);
  }
  if (Object.keys(headers).some((name) => name.toLowerCase() === "authorization")) {
    return headers;
  }
  return { ...headers, authorization };
}

const bearer = (dispatch) => (options, handler) => dispatch({ ...options, headers: withBearer(options.headers) }, handler);
undici.setGlobalDispatcher(undici.getGlobalDispatcher().compose(bearer));
