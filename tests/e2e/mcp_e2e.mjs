// End-to-end tests of `corral mcp` with the official MCP TypeScript SDK client over stdio.
// Prints PASS/FAIL lines and exits non-zero when a test failed.
//
//   cd tests/e2e && npm ci && CORRAL=../../build/corral WS=/tmp/ws node mcp_e2e.mjs
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { execFileSync } from 'node:child_process';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const CORRAL = process.env.CORRAL || new URL('../../build/corral', import.meta.url).pathname;
const WS = process.env.WS || mkdtempSync(join(tmpdir(), 'corral-e2e-'));
let failed = 0;

async function test(name, fn) {
  try {
    await fn();
    console.log(`PASS e2e_${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL e2e_${name}: ${(e && e.stack) || e}`);
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function alive(mark) {
  try {
    execFileSync('pgrep', ['-f', mark], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

async function waitFor(cond, ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (cond()) return true;
    await sleep(50);
  }
  return false;
}

async function connect(args = []) {
  const transport = new StdioClientTransport({
    command: CORRAL,
    args: ['mcp', '-w', WS, ...args],
    stderr: 'pipe',
  });
  const client = new Client({ name: 'corral-e2e', version: '1.0.0' });
  const errors = [];
  client.onerror = (e) => errors.push(e);
  await client.connect(transport);
  return { client, transport, errors };
}

const text = (r) => r.content.map((c) => c.text).join('\n');
const mark = (what) => `corral-e2e-${what}-${process.pid}-${Math.floor(Math.random() * 1e9)}`;

await test('initialize_and_list_tools', async () => {
  const { client } = await connect();
  const info = client.getServerVersion();
  assert.equal(info.name, 'corral');
  assert.deepEqual(client.getServerCapabilities().tools, { listChanged: false });
  assert.match(client.getInstructions(), /sandbox/);
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  assert.deepEqual(names, ['can_i', 'run_code', 'run_command']);
  for (const t of tools) {
    assert.equal(t.inputSchema.type, 'object');
    assert.equal(t.outputSchema.type, 'object');
  }
  await client.close();
});

await test('call_every_tool', async () => {
  const { client } = await connect();
  const { tools } = await client.listTools(); // caches the output schemas: results are validated
  let r = await client.callTool({ name: 'run_command', arguments: { command: 'echo hello; exit 0' } });
  assert.equal(r.isError, false);
  assert.equal(r.structuredContent.stdout, 'hello\n');
  assert.match(text(r), /^\$ echo hello; exit 0\nexit: 0\nduration: \d+ ms\n--- stdout ---\nhello\n/);
  r = await client.callTool({ name: 'run_command', arguments: { argv: ['sh', '-c', 'exit 7'] } });
  assert.equal(r.isError, true);
  assert.equal(r.structuredContent.exit_code, 7);
  const langs = tools.find((t) => t.name === 'run_code').inputSchema.properties.language.enum;
  const progs = {
    python: 'print(6*7)',
    node: 'console.log(6*7)',
    bash: 'echo $((6*7))',
    sh: 'echo $((6*7))',
  };
  assert.ok(langs.length >= 2, `languages: ${langs}`);
  for (const lang of langs) {
    r = await client.callTool({ name: 'run_code', arguments: { language: lang, code: progs[lang] } });
    assert.equal(r.isError, false, `${lang}: ${text(r)}`);
    assert.equal(r.structuredContent.stdout, '42\n', lang);
  }
  // argument errors are tool errors the model can read
  r = await client.callTool({ name: 'run_command', arguments: { command: 'true', timeout_s: 'x' } });
  assert.equal(r.isError, true);
  assert.match(text(r), /timeout_s/);
  // an unknown tool is a protocol error (-32602)
  await assert.rejects(client.callTool({ name: 'nope', arguments: {} }), /-32602|unknown tool/);
  await client.close();
});

await test('can_i_answers_from_the_policy', async () => {
  const { client } = await connect(['--profile', 'readonly']);
  // listTools caches can_i's outputSchema: the SDK validates every structuredContent below
  const { tools } = await client.listTools();
  const canI = tools.find((t) => t.name === 'can_i');
  assert.ok(canI, 'can_i is listed');
  assert.equal(canI.annotations.readOnlyHint, true);
  assert.deepEqual(canI.inputSchema.properties.op.enum, ['read', 'write', 'exec', 'connect']);
  let r = await client.callTool({ name: 'can_i', arguments: { op: 'read', target: 'src/main.c' } });
  assert.equal(r.isError, false);
  assert.equal(r.structuredContent.allowed, true);
  assert.match(text(r), /^allowed: read src\/main\.c \(rule: workspace /);
  // the readonly profile: a denial is an answer, not an error
  r = await client.callTool({ name: 'can_i', arguments: { op: 'write', target: 'src/main.c' } });
  assert.equal(r.isError, false);
  assert.equal(r.structuredContent.allowed, false);
  assert.match(text(r), /^denied: write src\/main\.c \(rule: workspace \(read-only\)\)/);
  r = await client.callTool({ name: 'can_i', arguments: { op: 'connect', target: 'pypi.org:443' } });
  assert.equal(r.isError, false);
  assert.equal(r.structuredContent.rule, 'network none');
  assert.match(text(r), /^denied: connect pypi\.org:443 \(rule: network none\) \u2014 network access is disabled/);
  r = await client.callTool({
    name: 'can_i',
    arguments: { queries: [{ op: 'exec', target: 'sh' }, { op: 'read', target: '/etc/shadow' }] },
  });
  assert.equal(r.isError, false);
  assert.deepEqual(r.structuredContent.answers.map((a) => a.allowed), [true, false]);
  assert.equal(text(r).trim().split('\n').length, 2);
  // a malformed question is a tool error the model can read
  r = await client.callTool({ name: 'can_i', arguments: { op: 'delete', target: 'x' } });
  assert.equal(r.isError, true);
  assert.match(text(r), /op: 'delete' is not one of read, write, exec, connect/);
  // what can_i said holds: the write is refused in the sandbox
  r = await client.callTool({ name: 'run_command', arguments: { command: 'touch src-main-c' } });
  assert.equal(r.isError, true);
  await client.close();
});

await test('twenty_concurrent_calls_overlap', async () => {
  const { client } = await connect(['--max-concurrent', '4']);
  await client.listTools();
  const t0 = Date.now();
  const results = await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      client.callTool({
        name: 'run_command',
        arguments: { command: `s=$(date +%s%N); sleep 1; echo ${i} $s $(date +%s%N)` },
      }),
    ),
  );
  const total = (Date.now() - t0) / 1000;
  const spans = results.map((r, i) => {
    const [n, a, b] = r.structuredContent.stdout.trim().split(' ');
    assert.equal(n, String(i), 'a response went to the wrong request');
    return [BigInt(a), BigInt(b)];
  });
  assert.ok(total > 4.5 && total < 12, `20 calls took ${total}s`);
  const ev = spans.flatMap(([a, b]) => [[a, 1], [b, -1]]).sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : x[1] - y[1]));
  let cur = 0, peak = 0;
  for (const [, d] of ev) { cur += d; peak = Math.max(peak, cur); }
  assert.equal(peak, 4, `peak concurrency ${peak}`);
  await client.close();
});

await test('cancellation_kills_the_sandbox', async () => {
  const { client } = await connect();
  const m = mark('cancel');
  const ac = new AbortController();
  const p = client.callTool(
    { name: 'run_command', arguments: { argv: ['bash', '-c', `exec -a ${m} sleep 300`] } },
    undefined,
    { signal: ac.signal },
  );
  assert.ok(await waitFor(() => alive(m), 10000), 'the command never started');
  ac.abort('test cancels');
  await assert.rejects(p);
  assert.ok(await waitFor(() => !alive(m), 5000), 'the cancelled command is still running on the host');
  await client.ping(); // still serving
  const r = await client.callTool({ name: 'run_command', arguments: { command: 'echo after' } });
  assert.equal(r.structuredContent.stdout, 'after\n');
  await client.close();
});

await test('progress_notifications', async () => {
  const { client } = await connect();
  const seen = [];
  const r = await client.callTool(
    { name: 'run_command', arguments: { command: 'for i in 1 2 3 4 5 6; do echo tick$i; sleep 0.4; done' } },
    undefined,
    { onprogress: (p) => seen.push({ at: Date.now(), ...p }) },
  );
  assert.equal(r.isError, false);
  assert.ok(seen.length >= 2, `only ${seen.length} progress notifications`);
  for (let i = 1; i < seen.length; i++) {
    assert.ok(seen[i].progress > seen[i - 1].progress, 'progress must increase');
    assert.ok(seen[i].at - seen[i - 1].at >= 400, 'progress must be rate limited');
  }
  assert.match(seen.at(-1).message, /^elapsed \d+\.\ds, \d+ bytes out, last: tick\d/);
  await client.close();
});

await test('malformed_line_then_good_request', async () => {
  const { client, transport, errors } = await connect();
  // Raw bytes on the server's stdin, behind the SDK's back.
  transport._process.stdin.write('{"jsonrpc": "2.0", this is not json\n');
  await sleep(200);
  const { tools } = await client.listTools();
  assert.equal(tools.length, 3);
  // The -32700 reply (id null) reached the client as an error, not as a crash.
  assert.ok(errors.length >= 1, 'the client saw no error for the malformed line');
  await client.ping();
  await client.close();
});

await test('eof_shutdown_leaves_no_process', async () => {
  const { client, transport } = await connect(['--max-concurrent', '2']);
  const m = mark('eof');
  const pending = [0, 1, 2].map((i) =>
    client.callTool({ name: 'run_command', arguments: { argv: ['bash', '-c', `exec -a ${m}-${i} sleep 300`] } }).catch((e) => e),
  );
  assert.ok(await waitFor(() => alive(m), 10000), 'the commands never started');
  const pid = transport.pid;
  let exit = null;
  transport._process.once('exit', (code, signal) => { exit = { code, signal }; });
  const t0 = Date.now();
  await client.close(); // closes stdin; the SDK would send SIGTERM after 2 s
  const dt = Date.now() - t0;
  assert.ok(dt < 1900, `the server took ${dt} ms to exit after EOF`);
  assert.ok(await waitFor(() => exit !== null, 2000));
  assert.deepEqual(exit, { code: 0, signal: null });
  assert.ok(!alive(m), 'a sandboxed process survived the server');
  let gone = false;
  try { process.kill(pid, 0); } catch { gone = true; }
  assert.ok(gone, 'the server process is still there');
  await Promise.all(pending);
});

if (failed) {
  console.log(`${failed} e2e test(s) failed`);
  process.exit(1);
}
