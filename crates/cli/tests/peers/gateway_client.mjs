// A real MCP client for the gateway tests: the official TypeScript v2 client
// (npm `@modelcontextprotocol/client`, installed by scripts/install-peers.sh into .cache/npm).
// Run it with Node 22 ($NODE22 from .cache/peers.env):
//
//   $NODE22 tests/peers/gateway_client.mjs [OPTIONS] --http <url>
//   $NODE22 tests/peers/gateway_client.mjs [OPTIONS] --stdio <command> [args...]
//
// `--stdio` comes last: everything after it is the server's command line.
//
// Options:
//   --plan '<json>'       the plan: a JSON array of steps (or {"steps":[...]})
//   --plan-file <path>    the plan from a file (`-`: stdin)
//   --revision R          auto (default: the SDK's `versionNegotiation: {mode:'auto'}`,
//                         server/discover then initialize), 2026-07-28 (`{pin:'2026-07-28'}`:
//                         discover must offer it, no fallback), 2025-11-25 (`mode:'legacy'`:
//                         a plain initialize)
//   --timeout-ms N        the bound on connecting and on each step (default 30000); a step's
//                         own "timeout_ms" overrides it
//   --stdio-probe P       sibling (default: the SDK's shipped behaviour, whose server/discover
//                         probe runs on a disposable second process spawned from the same
//                         command) or inplace (a trivial StdioClientTransport subclass, which the
//                         SDK probes on the session's own pipe: one process)
//   --listen L            auto (default: the SDK's `listChanged` option, which watches tools
//                         list_changed only when the server advertises tools.listChanged, on
//                         2026-07-28 by opening subscriptions/listen itself) or always (watch
//                         whatever the server advertises: an explicit client.listen() on
//                         2026-07-28, a notification handler on 2025-11-25)
//   --client-dir DIR      the npm prefix holding node_modules/@modelcontextprotocol/client
//                         (default $TS_CLIENT_DIR, else <repo>/.cache/npm)
//   --elicit '<json>'     answer every form elicitation with action "accept" and this JSON
//                         object as its content: an `elicitation/create` request handler
//                         (`client.setRequestHandler`), which serves a 2025-11-25 server's
//                         elicitation/create request and, through the SDK's own multi-round-trip
//                         driver (`inputRequired.autoFulfill`, on by default: it dispatches the
//                         embedded requests to the same handler and retries the request with
//                         inputResponses and the echoed requestState, up to 10 rounds), the
//                         elicitation/create input requests of a 2026-07-28 input_required
//                         result. The client then declares `capabilities: {elicitation: {form:
//                         {}}}`; a url-mode elicitation is refused (-32602). Without --elicit
//                         there is no handler and no elicitation capability: the SDK answers a
//                         2025-11-25 elicitation/create with -32601 (method not found), and fails
//                         the call on a 2026-07-28 input_required elicitation itself (an SdkError
//                         CAPABILITY_NOT_SUPPORTED: "kind":"sdk" on the step's line).
//
// The stdio server inherits this process's whole environment (the SDK's default would pass only
// a whitelist: HOME, PATH, ...) and its stderr.
//
// With --elicit every step's line (connected excepted) also has "elicited": the message of each
// elicitation the client answered during that step, in order.
//
// Steps: {"op":"list_tools"} {"op":"call","tool":NAME,"arguments":{...}} {"op":"list_resources"}
// {"op":"read","uri":URI} {"op":"list_prompts"} {"op":"get_prompt","name":N,"arguments":{...}}
// {"op":"wait_tools_changed","timeout_ms":N} {"op":"sleep","ms":N}
// {"op":"time_calls","tool":NAME,"arguments":{...},"calls":N,"warmup":W}: W calls, then N calls one
// after another, each timed (the gateway benchmark, examples/gateway.rs); its result is
// {"latencies_us":[...]} and a call that fails ends the step with that error
//
// Output, one JSON object per line on stdout (diagnostics go to stderr):
//   {"op":"connected","protocolVersion":"2026-07-28","era":"modern","serverInfo":{...},
//    "capabilities":{...},"listening":{"toolsListChanged":true}|null}
//   then per step {"op":...,"ok":true,"result":<the SDK's result>} or
//   {"op":...,"ok":false,"error":{"code":<JSON-RPC code>,"message":...,"data":...}}; an error that
//   is no JSON-RPC error has "code":null and "kind" ("timeout", "sdk" with "sdkCode", "error").
//   Over HTTP the SDK raises an HTTP error for a JSON-RPC error sent with a non-2xx status (rmcp
//   answers -32601 with 404 at 2026-07-28); its JSON-RPC code and message are reported, plus
//   "sdkCode" and "httpStatus".
//
// List steps are the SDK's aggregating calls (every page walked) with cacheMode 'refresh', and
// read uses cacheMode 'refresh': every step reaches the server, none is served from the SDK's
// response cache. wait_tools_changed consumes one tools list_changed notification (one that
// arrived since the previous wait counts), then lists the tools again; its line has "via":
// "listen" (on the subscriptions/listen stream the SDK opens itself on a 2026-07-28 connection
// when the server advertises tools.listChanged), "unsolicited" (2026-07-28, outside any stream:
// the SDK still dispatches it) or "notification" (2025-11-25). With --listen auto the SDK only
// watches when the server advertises tools.listChanged; otherwise the wait times out.
//
// Exit status: 0 when the plan ran to its end (step errors included); 1 when the connection
// could not be made; 3 when the connection was lost during the plan (the plan still runs out,
// its remaining steps failing); 2 on bad usage.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import util from 'node:util';

// stdout carries the JSON lines only: the SDK's console output (e.g. its "server does not
// advertise prompts capability" notice from console.log) goes to stderr.
for (const level of ['log', 'info', 'debug', 'warn', 'error']) {
  console[level] = (...args) => process.stderr.write(util.format(...args) + '\n');
}

const DEFAULT_TIMEOUT_MS = 30000;

function usage(message) {
  process.stderr.write(`gateway_client.mjs: ${message}\n`);
  process.stderr.write(
    'usage: gateway_client.mjs [--plan JSON | --plan-file PATH] [--revision auto|2026-07-28|2025-11-25]\n' +
      '       [--timeout-ms N] [--stdio-probe sibling|inplace] [--listen auto|always] [--client-dir DIR]\n' +
      '       [--elicit JSON]\n' +
      '       (--http URL | --stdio COMMAND [ARGS...])\n',
  );
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { revision: 'auto', timeoutMs: DEFAULT_TIMEOUT_MS, stdioProbe: 'sibling', listen: 'auto' };
  let planText;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) usage(`${arg} needs a value`);
      return argv[++i];
    };
    switch (arg) {
      case '--plan':
        planText = value();
        break;
      case '--plan-file': {
        const file = value();
        planText = fs.readFileSync(file === '-' ? 0 : file, 'utf8');
        break;
      }
      case '--revision':
        opts.revision = value();
        if (!['auto', '2026-07-28', '2025-11-25'].includes(opts.revision)) {
          usage(`unknown revision ${opts.revision}`);
        }
        break;
      case '--timeout-ms':
        opts.timeoutMs = Number(value());
        if (!(opts.timeoutMs > 0)) usage('--timeout-ms needs a positive number');
        break;
      case '--stdio-probe':
        opts.stdioProbe = value();
        if (!['sibling', 'inplace'].includes(opts.stdioProbe)) usage(`unknown probe ${opts.stdioProbe}`);
        break;
      case '--listen':
        opts.listen = value();
        if (!['auto', 'always'].includes(opts.listen)) usage(`unknown listen mode ${opts.listen}`);
        break;
      case '--client-dir':
        opts.clientDir = value();
        break;
      case '--elicit':
        try {
          opts.elicit = JSON.parse(value());
        } catch (error) {
          usage(`--elicit is not JSON: ${error.message}`);
        }
        if (!opts.elicit || typeof opts.elicit !== 'object' || Array.isArray(opts.elicit)) {
          usage('--elicit needs a JSON object');
        }
        break;
      case '--http':
        opts.http = value();
        break;
      case '--stdio':
        if (i + 1 >= argv.length) usage('--stdio needs a command');
        opts.stdio = { command: argv[i + 1], args: argv.slice(i + 2) };
        i = argv.length;
        break;
      case '-h':
      case '--help':
        usage('help');
        break;
      default:
        usage(`unknown argument ${arg}`);
    }
  }
  if (!opts.http === !opts.stdio) usage('give exactly one of --http URL and --stdio COMMAND');
  let plan = [];
  if (planText !== undefined) {
    try {
      plan = JSON.parse(planText);
    } catch (error) {
      usage(`the plan is not JSON: ${error.message}`);
    }
    if (plan && !Array.isArray(plan) && Array.isArray(plan.steps)) plan = plan.steps;
    if (!Array.isArray(plan)) usage('the plan must be a JSON array of steps');
  }
  opts.plan = plan;
  return opts;
}

const opts = parseArgs(process.argv.slice(2));

// Import the SDK's ESM entry points from the npm prefix, through the package's own "exports".
const here = path.dirname(fileURLToPath(import.meta.url));
const clientDir = path.resolve(
  opts.clientDir || process.env.TS_CLIENT_DIR || path.join(here, '..', '..', '..', '..', '.cache', 'npm'),
);
const pkgDir = path.join(clientDir, 'node_modules', '@modelcontextprotocol', 'client');
let pkg;
try {
  pkg = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8'));
} catch (error) {
  process.stderr.write(
    `gateway_client.mjs: no @modelcontextprotocol/client under ${clientDir} (run scripts/install-peers.sh): ${error.message}\n`,
  );
  process.exit(1);
}
async function importExport(subpath) {
  const entry = pkg.exports[subpath];
  const file = typeof entry === 'string' ? entry : entry.import.default || entry.import;
  return import(pathToFileURL(path.join(pkgDir, file)).href);
}
const sdk = await importExport('.');
const { StdioClientTransport } = await importExport('./stdio');
const { Client, StreamableHTTPClientTransport, ProtocolError, SdkError } = sdk;

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

class TimeoutError extends Error {}

function describeError(error) {
  if (error instanceof TimeoutError) {
    return { code: null, kind: 'timeout', message: error.message };
  }
  if (ProtocolError && ProtocolError.isInstance(error)) {
    const out = { code: error.code, message: error.message };
    if (error.data !== undefined) out.data = error.data;
    return out;
  }
  if (SdkError && SdkError.isInstance(error)) {
    // A JSON-RPC error answered with a non-2xx HTTP status (e.g. 404 for -32601) surfaces as
    // an SdkHttpError whose data holds the body: report the JSON-RPC error it carries.
    const body = error.data && typeof error.data.text === 'string' ? error.data.text : undefined;
    if (body !== undefined) {
      try {
        const rpc = JSON.parse(body);
        if (rpc && rpc.error && typeof rpc.error.code === 'number') {
          const out = { code: rpc.error.code, message: String(rpc.error.message) };
          if (rpc.error.data !== undefined) out.data = rpc.error.data;
          out.sdkCode = error.code;
          out.httpStatus = error.data.status;
          return out;
        }
      } catch {
        // Not JSON: fall through.
      }
    }
    const out = {
      code: null,
      kind: error.code === 'REQUEST_TIMEOUT' ? 'timeout' : 'sdk',
      sdkCode: error.code,
      message: error.message,
    };
    if (error.data !== undefined) out.data = error.data;
    return out;
  }
  // Duck-typed JSON-RPC errors (an error class from another copy of core).
  if (error && typeof error.code === 'number') {
    return { code: error.code, message: String(error.message) };
  }
  return { code: null, kind: 'error', message: String(error && error.message ? error.message : error) };
}

// Bounds `work(signal)` by `ms`: the signal aborts the SDK request, the race bounds everything else.
async function bounded(ms, what, work) {
  const controller = new AbortController();
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => {
      const error = new TimeoutError(`${what} did not finish within ${ms} ms`);
      controller.abort(error);
      reject(error);
    }, ms);
  });
  try {
    return await Promise.race([work(controller.signal), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

// Tools list_changed notifications not yet consumed by a wait (how each came), and who waits
// for the next. `via` is "listen" (stamped with a subscriptions/listen id), "unsolicited" (on a
// 2026-07-28 connection, outside any listen stream) or "notification" (2025-11-25).
const SUBSCRIPTION_ID_KEY = sdk.SUBSCRIPTION_ID_META_KEY || 'io.modelcontextprotocol/subscriptionId';
const pendingToolsChanged = [];
let toolsChangedWaiter = null;
function onToolsChanged(via) {
  if (toolsChangedWaiter) {
    const wake = toolsChangedWaiter;
    toolsChangedWaiter = null;
    wake(via);
  } else {
    pendingToolsChanged.push(via);
  }
}
function viaOf(notification) {
  if (client.getProtocolEra() !== 'modern') return 'notification';
  if (notification === undefined) return subscription ? 'listen' : 'unsolicited';
  const meta = notification && notification.params && notification.params._meta;
  return meta && meta[SUBSCRIPTION_ID_KEY] !== undefined ? 'listen' : 'unsolicited';
}

const versionNegotiation = {
  auto: { mode: 'auto' },
  '2026-07-28': { mode: { pin: '2026-07-28' } },
  '2025-11-25': { mode: 'legacy' },
}[opts.revision];

const client = new Client(
  { name: 'plurnk-gateway-test-ts', version: pkg.version },
  {
    versionNegotiation,
    ...(opts.elicit && { capabilities: { elicitation: { form: {} } } }),
    ...(opts.listen === 'auto' && {
      listChanged: {
        tools: { autoRefresh: false, debounceMs: 0, onChanged: () => onToolsChanged(viaOf(undefined)) },
      },
    }),
  },
);
let connected = false;
let lost = false;
let subscription;
client.onclose = () => {
  if (connected) lost = true;
};
client.onerror = (error) => {
  process.stderr.write(`gateway_client.mjs: client error: ${error && error.message ? error.message : error}\n`);
};

// The messages of the elicitations answered during the current step (with --elicit).
let elicited = [];
if (opts.elicit) {
  client.setRequestHandler('elicitation/create', async (request) => {
    const params = request.params ?? {};
    if (params.mode === 'url') {
      process.stderr.write(`gateway_client.mjs: refusing a url-mode elicitation: ${JSON.stringify(params.message)}\n`);
      throw new ProtocolError(-32602, 'url-mode elicitation is not supported');
    }
    elicited.push(params.message);
    return { action: 'accept', content: opts.elicit };
  });
}
const withElicited = (line) => (opts.elicit ? { ...line, elicited } : line);

class InPlaceStdioClientTransport extends StdioClientTransport {}

let transport;
if (opts.http) {
  transport = new StreamableHTTPClientTransport(new URL(opts.http));
} else {
  const Transport = opts.stdioProbe === 'inplace' ? InPlaceStdioClientTransport : StdioClientTransport;
  transport = new Transport({
    command: opts.stdio.command,
    args: opts.stdio.args,
    env: { ...process.env },
    stderr: 'inherit',
  });
}

try {
  await bounded(opts.timeoutMs, 'connect', (signal) =>
    client.connect(transport, { timeout: opts.timeoutMs, signal }),
  );
} catch (error) {
  const detail = describeError(error);
  process.stderr.write(`gateway_client.mjs: could not connect: ${JSON.stringify(detail)}\n`);
  await client.close().catch(() => {});
  await transport.close().catch(() => {});
  process.exit(1);
}
connected = true;
subscription = client.autoOpenedSubscription;
if (opts.listen === 'always') {
  client.setNotificationHandler('notifications/tools/list_changed', (n) => onToolsChanged(viaOf(n)));
  if (client.getProtocolEra() === 'modern') {
    try {
      subscription = await bounded(opts.timeoutMs, 'subscriptions/listen', (signal) =>
        client.listen({ toolsListChanged: true }, { timeout: opts.timeoutMs, signal }),
      );
    } catch (error) {
      process.stderr.write(`gateway_client.mjs: subscriptions/listen failed: ${JSON.stringify(describeError(error))}\n`);
    }
  }
}
emit({
  op: 'connected',
  protocolVersion: client.getNegotiatedProtocolVersion() ?? null,
  era: client.getProtocolEra() ?? null,
  serverInfo: client.getServerVersion() ?? null,
  capabilities: client.getServerCapabilities() ?? null,
  listening: subscription ? subscription.honoredFilter : null,
});

function waitToolsChanged(ms) {
  if (pendingToolsChanged.length > 0) return Promise.resolve(pendingToolsChanged.shift());
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      toolsChangedWaiter = null;
      reject(new TimeoutError(`no tools list_changed notification within ${ms} ms`));
    }, ms);
    toolsChangedWaiter = (via) => {
      clearTimeout(timer);
      resolve(via);
    };
  });
}

async function runStep(step, signal, ms) {
  const request = { timeout: ms, signal };
  const cached = { ...request, cacheMode: 'refresh' };
  switch (step.op) {
    case 'list_tools':
      return client.listTools(undefined, cached);
    case 'call':
      return client.callTool({ name: step.tool, arguments: step.arguments ?? {} }, request);
    case 'list_resources':
      return client.listResources(undefined, cached);
    case 'read':
      return client.readResource({ uri: step.uri }, cached);
    case 'list_prompts':
      return client.listPrompts(undefined, cached);
    case 'get_prompt':
      return client.getPrompt({ name: step.name, arguments: step.arguments ?? {} }, request);
    case 'sleep':
      await new Promise((resolve) => setTimeout(resolve, step.ms ?? 0));
      return {};
    case 'time_calls': {
      const latencies = [];
      const warmup = step.warmup ?? 0;
      for (let n = 0; n < warmup + (step.calls ?? 1); n++) {
        const started = process.hrtime.bigint();
        const result = await client.callTool({ name: step.tool, arguments: step.arguments ?? {} }, request);
        const elapsed = process.hrtime.bigint() - started;
        if (result.isError) throw new Error(`call ${n} was a tool error: ${JSON.stringify(result)}`);
        if (n >= warmup) latencies.push(Number(elapsed / 1000n));
      }
      return { latencies_us: latencies };
    }
    default:
      throw new Error(`unknown op ${JSON.stringify(step.op)}`);
  }
}

for (const step of opts.plan) {
  const op = step && step.op;
  elicited = [];
  try {
    if (op === 'wait_tools_changed') {
      const ms = step.timeout_ms ?? opts.timeoutMs;
      const via = await waitToolsChanged(ms);
      const result = await bounded(opts.timeoutMs, 'tools/list', (signal) =>
        client.listTools(undefined, { timeout: opts.timeoutMs, signal, cacheMode: 'refresh' }),
      );
      emit(withElicited({ op, ok: true, via, result }));
      continue;
    }
    // A timed run is bounded per call by the SDK's own timeout, not as a whole.
    const ms = step.timeout_ms ?? (op === 'sleep' ? (step.ms ?? 0) + opts.timeoutMs
      : op === 'time_calls' ? opts.timeoutMs * ((step.warmup ?? 0) + (step.calls ?? 1)) : opts.timeoutMs);
    const result = await bounded(ms, String(op), (signal) => runStep(step, signal, ms));
    emit(withElicited({ op, ok: true, result }));
  } catch (error) {
    emit(withElicited({ op, ok: false, error: describeError(error) }));
  }
}

connected = false;
await bounded(5000, 'close', () => client.close()).catch(() => {});
if (lost) {
  process.stderr.write('gateway_client.mjs: the connection was lost during the plan\n');
  process.exit(3);
}
process.exit(0);
