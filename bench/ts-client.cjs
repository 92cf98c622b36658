// The official TypeScript v2 MCP client (@modelcontextprotocol/client) as a load-benchmark peer.
//
// Spawned by `cargo run --release --example load` (examples/load/ts.rs); never run by hand.
//
//   node bench/ts-client.cjs <dir holding node_modules/@modelcontextprotocol/client>
//
// Line protocol: one JSON object per line on stdin, one JSON answer per line on stdout
// (nothing else is written to stdout; diagnostics go to stderr). Every answer has `ok`;
// a failed command answers {"ok":false,"error":"..."}.
//
//   {"op":"hello"}                           -> {"ok":true,"node":"v22…","client":"2.4.0"}
//   {"op":"connect","command":"/path/fixture","args":[],"servers":S,"mode":"auto"|"inplace"}
//        connects S stdio servers at once (server/discover, then tools/list on each)
//        -> {"ok":true,"ms":wall,"revisions":["2026-07-28"],"rss_before_kib":…,
//            "rss_after_kib":…,"hwm_kib":…}
//   {"op":"calls","n":N,"c":C,"warmup":W}
//        W sequential warm-up calls on server 0, then N echo calls with C in flight, call i
//        to server i % S -> {"ok":true,"wall_ms":…,"lat_us":[…],"failed":k,"cpu_us":…}
//   {"op":"close"}                           -> {"ok":true,"ms":…}, then the process exits
//
// `mode: "auto"` is the SDK's shipped negotiation: on its own StdioClientTransport the
// server/discover probe runs on a disposable sibling process (one extra spawn per server).
// `mode: "inplace"` uses a trivial subclass of StdioClientTransport, which the SDK probes in
// place on the session's own pipe, like rmcp's ClientLifecycleMode::Auto does.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');
const { createRequire } = require('node:module');

const moduleDir = process.argv[2];
if (!moduleDir) {
  process.stderr.write('usage: node bench/ts-client.cjs <dir with node_modules>\n');
  process.exit(2);
}
const requireFrom = createRequire(path.join(path.resolve(moduleDir), 'package.json'));
const { Client } = requireFrom('@modelcontextprotocol/client');
const { StdioClientTransport } = requireFrom('@modelcontextprotocol/client/stdio');
const clientVersion = JSON.parse(
  fs.readFileSync(
    path.join(path.resolve(moduleDir), 'node_modules/@modelcontextprotocol/client/package.json'),
    'utf8',
  ),
).version;

class InPlaceStdioClientTransport extends StdioClientTransport {}

const ECHO = { name: 'echo', arguments: { text: 'hello' } };
let clients = [];

function statusKib() {
  const text = fs.readFileSync('/proc/self/status', 'utf8');
  const field = (name) => {
    const m = text.match(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm'));
    return m ? Number(m[1]) : 0;
  };
  return { rss: field('VmRSS'), hwm: field('VmHWM') };
}

function resetHwm() {
  try {
    fs.writeFileSync('/proc/self/clear_refs', '5');
  } catch {
    // Older kernels or restricted /proc: the peak then includes start-up.
  }
}

async function connectOne(command, args, mode) {
  const Transport = mode === 'inplace' ? InPlaceStdioClientTransport : StdioClientTransport;
  const client = new Client(
    { name: 'plurnk-bench', version: '0.1.0' },
    { versionNegotiation: { mode: 'auto' } },
  );
  await client.connect(new Transport({ command, args, stderr: 'inherit' }));
  // Kept, as every client here keeps the catalog it routes by.
  const { tools } = await client.listTools();
  if (!tools.some((tool) => tool.name === 'echo')) throw new Error('tools/list has no echo');
  return { client, tools };
}

async function connect(msg) {
  if (clients.length) throw new Error('already connected');
  resetHwm();
  const before = statusKib();
  const started = performance.now();
  clients = await Promise.all(
    Array.from({ length: msg.servers }, () => connectOne(msg.command, msg.args || [], msg.mode)),
  );
  const ms = performance.now() - started;
  const after = statusKib();
  const revisions = [...new Set(clients.map((c) => c.client.getNegotiatedProtocolVersion()))];
  return { ms, revisions, rss_before_kib: before.rss, rss_after_kib: after.rss, hwm_kib: after.hwm };
}

async function calls(msg) {
  if (!clients.length) throw new Error('not connected');
  for (let i = 0; i < (msg.warmup || 0); i++) await clients[0].client.callTool(ECHO);
  const n = msg.n;
  const lat = new Array(n);
  let next = 0;
  let failed = 0;
  const cpu0 = process.cpuUsage();
  const started = performance.now();
  async function worker() {
    for (;;) {
      const i = next++;
      if (i >= n) return;
      const t = performance.now();
      try {
        const result = await clients[i % clients.length].client.callTool(ECHO);
        if (result.isError) failed++;
      } catch {
        failed++;
      }
      lat[i] = Math.round((performance.now() - t) * 1000);
    }
  }
  await Promise.all(Array.from({ length: Math.max(1, msg.c) }, worker));
  const wall_ms = performance.now() - started;
  const cpu = process.cpuUsage(cpu0);
  return { wall_ms, lat_us: lat, failed, cpu_us: cpu.user + cpu.system };
}

async function close() {
  const started = performance.now();
  await Promise.all(clients.map((c) => c.client.close().catch(() => {})));
  clients = [];
  return { ms: performance.now() - started };
}

function answer(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

const rl = readline.createInterface({ input: process.stdin, terminal: false });
let queue = Promise.resolve();
rl.on('line', (line) => {
  queue = queue.then(async () => {
    let msg;
    try {
      msg = JSON.parse(line);
    } catch (error) {
      answer({ ok: false, error: `bad command line: ${error}` });
      return;
    }
    try {
      let result;
      switch (msg.op) {
        case 'hello':
          result = { node: process.version, client: clientVersion };
          break;
        case 'connect':
          result = await connect(msg);
          break;
        case 'calls':
          result = await calls(msg);
          break;
        case 'close':
          result = await close();
          answer({ ok: true, ...result });
          process.exit(0);
          return;
        default:
          throw new Error(`unknown op ${msg.op}`);
      }
      answer({ ok: true, ...result });
    } catch (error) {
      answer({ ok: false, error: String(error && error.stack ? error.stack : error) });
    }
  });
});
rl.on('close', () => {
  queue.then(close).then(() => process.exit(0));
});
