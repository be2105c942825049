// End-to-end tests of `corral mcp` with the official MCP TypeScript SDK client over stdio.
// Prints PASS/FAIL lines and exits non-zero when a test failed.
//
//   cd tests/e2e && npm ci && CORRAL=../../build/corral WS=/tmp/ws node mcp_e2e.mjs
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { execFileSync } from 'node:child_process';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { get as httpGet } from 'node:http';
import { createServer } from 'node:net';
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

const TOOLS = [
  'can_i', 'job_kill', 'job_list', 'job_output', 'job_start', 'run_code', 'run_command',
  'run_pipeline', 'shell_close', 'shell_exec', 'shell_list',
];
// Every tool answers with structuredContent, so every tool declares an outputSchema (the run
// result; can_i's answer; a session, job or pipeline object). Once listTools has cached them
// the SDK validates each structuredContent against its tool's outputSchema: every test that
// lists the tools first checks the shapes of what it calls.
const WITH_OUTPUT_SCHEMA = TOOLS;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

// A TCP port nothing on the host listens on (right now).
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

// A GET from the host; resolves to the status code or to the error code (ECONNREFUSED).
function hostGet(url) {
  return new Promise((resolve) => {
    const req = httpGet(url, { timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })));
    req.on('error', (e) => resolve(e.code || String(e)));
  });
}

// Calls a tool and checks it answered as a tool result (not a protocol error). A call that
// gets no answer fails after `ms` (not the SDK's 60 s), naming the call.
async function call(client, name, args, ms = 15000) {
  let r;
  try {
    r = await client.callTool({ name, arguments: args }, undefined, { timeout: ms });
  } catch (e) {
    e.message = `${name} ${JSON.stringify(args)}: ${e.message}`;
    throw e;
  }
  assert.ok(Array.isArray(r.content) && r.content.length >= 1, `${name}: no content`);
  return r;
}

async function ok(client, name, args) {
  const r = await call(client, name, args);
  assert.equal(r.isError, false, `${name} ${JSON.stringify(args)}: ${text(r)}`);
  return r.structuredContent;
}

// The text of a JSON-answering tool is that JSON: both carry the same object.
function sameAsText(r) {
  assert.deepEqual(JSON.parse(r.content.at(-1).text), r.structuredContent);
}

// Polls job_output until cond(out) holds; returns the last answer.
async function pollJob(client, job, cond, ms, args = {}) {
  const end = Date.now() + ms;
  let out;
  do {
    out = await ok(client, 'job_output', { job, ...args });
    if (cond(out)) return out;
    await sleep(50);
  } while (Date.now() < end);
  assert.fail(`job ${job}: condition not met in ${ms} ms; last: ${JSON.stringify(out)}`);
}

await test('initialize_and_list_tools', async () => {
  const { client } = await connect();
  const info = client.getServerVersion();
  assert.equal(info.name, 'corral');
  assert.deepEqual(client.getServerCapabilities().tools, { listChanged: false });
  assert.match(client.getInstructions(), /sandbox/);
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  assert.deepEqual(names, TOOLS);
  for (const t of tools) {
    assert.equal(t.inputSchema.type, 'object', t.name);
    assert.equal(typeof t.inputSchema.properties, 'object', t.name);
    assert.equal(t.inputSchema.additionalProperties, false, t.name);
    assert.equal(typeof t.description, 'string', t.name);
    assert.ok(t.description.length > 20, `${t.name}: description '${t.description}'`);
    assert.equal(typeof t.title, 'string', t.name);
    if (WITH_OUTPUT_SCHEMA.includes(t.name)) assert.equal(t.outputSchema?.type, 'object', t.name);
    else assert.equal(t.outputSchema, undefined, `${t.name} has an outputSchema`);
  }
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  assert.deepEqual(byName.shell_exec.inputSchema.required, ['command']);
  assert.deepEqual(byName.shell_close.inputSchema.required, ['session']);
  assert.deepEqual(byName.job_output.inputSchema.required, ['job']);
  assert.deepEqual(byName.run_pipeline.inputSchema.required, ['stages']);
  for (const n of ['shell_list', 'job_list', 'job_output'])
    assert.equal(byName[n].annotations.readOnlyHint, true, n);
  for (const n of ['shell_exec', 'shell_close', 'job_start', 'job_kill', 'run_pipeline'])
    assert.equal(byName[n].annotations.readOnlyHint, false, n);
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
  assert.ok(total > 4.5 && total < 16, `20 calls took ${total}s`);
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
    // by the server's clock (progress is the elapsed ms when sent), not the arrival times
    assert.ok(seen[i].progress - seen[i - 1].progress >= 500, 'progress must be rate limited');
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
  assert.equal(tools.length, TOOLS.length);
  // The -32700 reply (id null) reached the client as an error, not as a crash.
  assert.ok(errors.length >= 1, 'the client saw no error for the malformed line');
  await client.ping();
  await client.close();
});

// ---- stateful tools: shell sessions, background jobs, pipelines --------------------------

await test('shell_session_keeps_state', async () => {
  const { client } = await connect();
  await client.listTools(); // caches shell_exec's outputSchema: every result below is validated
  let r = await call(client, 'shell_exec', {
    command: 'mkdir -p e2e-sess && cd e2e-sess && export E2E_VAR=v1 && greet() { echo "hi $1"; }; echo one > f.txt; pwd',
  });
  assert.equal(r.isError, false, text(r));
  const sc = r.structuredContent;
  assert.match(sc.session.id, UUID);
  assert.deepEqual(sc.session, { id: sc.session.id, restarted: false, ended: false });
  const sid = sc.session.id;
  assert.equal(r.content[0].text, `session ${sid} (new; pass it as session to continue in it)`);
  assert.equal(sc.exit_code, 0);
  assert.match(sc.stdout, /\/e2e-sess\n$/);
  assert.match(r.content[1].text, /^\$ mkdir -p e2e-sess .*\nexit: 0\n/);
  // second call: the cwd, the variable, the function and the file are all there
  r = await call(client, 'shell_exec', {
    session: sid,
    command: 'pwd; echo "$E2E_VAR"; greet there; cat f.txt; echo two >> f.txt; E2E_VAR=v2',
  });
  assert.equal(r.isError, false, text(r));
  assert.equal(r.content[0].text, `session ${sid}`);
  assert.equal(r.structuredContent.session.id, sid);
  assert.equal(r.structuredContent.stdout, `${sc.stdout}v1\nhi there\none\n`);
  // third call: and what the second changed
  r = await call(client, 'shell_exec', { session: sid, command: 'echo "$E2E_VAR"; cat f.txt; type greet | head -n 1; (exit 3)' });
  assert.equal(r.structuredContent.stdout, 'v2\none\ntwo\ngreet is a function\n');
  assert.equal(r.structuredContent.exit_code, 3);
  assert.equal(r.isError, true); // a failing command is a tool error ...
  assert.equal(r.structuredContent.session.ended, false); // ... in a session that lives on
  r = await call(client, 'shell_exec', { session: sid, command: 'echo "$E2E_VAR"' });
  assert.equal(r.structuredContent.stdout, 'v2\n');
  // a second session starts from scratch
  r = await call(client, 'shell_exec', { command: 'pwd; echo "[$E2E_VAR]"; type greet >/dev/null 2>&1 || echo nofn' });
  const sid2 = r.structuredContent.session.id;
  assert.notEqual(sid2, sid);
  assert.doesNotMatch(r.structuredContent.stdout, /e2e-sess/);
  assert.match(r.structuredContent.stdout, /\n\[\]\nnofn\n$/);
  // `exit` ends the shell: the session is gone, the other one stays
  r = await call(client, 'shell_exec', { session: sid2, command: 'exit 4' });
  assert.equal(r.structuredContent.session.ended, true);
  assert.match(r.content[0].text, new RegExp(`^session ${sid2} has ended`));
  r = await call(client, 'shell_exec', { session: sid2, command: 'true' });
  assert.equal(r.isError, true);
  assert.match(text(r), new RegExp(`session ${sid2}: no such session`));
  const list = await ok(client, 'shell_list', {});
  assert.deepEqual(list.sessions.map((x) => x.session), [sid]);
  // the file is in the workspace, seen by a fresh sandbox too
  r = await call(client, 'run_command', { command: 'cat e2e-sess/f.txt' }, 5000);
  assert.equal(r.structuredContent.stdout, 'one\ntwo\n');
  await client.close();
});

await test('shell_timeout_keeps_the_session', async () => {
  const { client } = await connect();
  await client.listTools();
  let sc = await ok(client, 'shell_exec', { command: 'cd / && export KEEP=kept' });
  const sid = sc.session.id;
  const t0 = Date.now();
  const r = await call(client, 'shell_exec', { session: sid, command: 'echo before; sleep 30; echo after', timeout_s: 0.5 });
  const dt = Date.now() - t0;
  assert.ok(dt < 5000, `the timed-out command took ${dt} ms`);
  assert.equal(r.isError, true);
  assert.equal(r.structuredContent.timed_out, true);
  assert.equal(r.structuredContent.exit_code, 130);
  assert.equal(r.structuredContent.limit, 'timeout');
  assert.equal(r.structuredContent.stdout, 'before\n');
  assert.deepEqual(r.structuredContent.session, { id: sid, restarted: false, ended: false });
  assert.match(text(r), /timed out after 0\.5s/);
  // the session is still there, with its state
  sc = await ok(client, 'shell_exec', { session: sid, command: 'pwd; echo $KEEP' });
  assert.equal(sc.stdout, '/\nkept\n');
  assert.equal(sc.session.restarted, false);
  const list = await ok(client, 'shell_list', {});
  const s = list.sessions.find((x) => x.session === sid);
  assert.equal(s.alive, true);
  assert.equal(s.restarts, 0);
  assert.equal(s.commands, 3);
  await client.close();
});

await test('shell_close_then_exec_is_an_error', async () => {
  const { client } = await connect();
  await client.listTools();
  const sc = await ok(client, 'shell_exec', { command: 'true' });
  const sid = sc.session.id;
  let r = await call(client, 'shell_close', { session: sid });
  assert.equal(r.isError, false, text(r));
  assert.equal(r.structuredContent.closed, sid);
  assert.equal(r.structuredContent.was_busy, false);
  assert.equal(r.structuredContent.commands, 1);
  sameAsText(r);
  r = await call(client, 'shell_exec', { session: sid, command: 'echo nope' });
  assert.equal(r.isError, true);
  assert.equal(r.structuredContent, undefined);
  assert.match(text(r), new RegExp(`session ${sid}: no such session`));
  assert.match(text(r), /omit session to start a new one/);
  r = await call(client, 'shell_close', { session: sid });
  assert.equal(r.isError, true);
  assert.match(text(r), new RegExp(`session ${sid}: no such session`));
  assert.deepEqual((await ok(client, 'shell_list', {})).sessions, []);
  await client.ping();
  await client.close();
});

await test('session_job_http_server_isolated', async () => {
  const { client } = await connect();
  await client.listTools();
  const port = await freePort();
  const m = mark('http');
  const url = `http://127.0.0.1:${port}/`;
  let sc = await ok(client, 'shell_exec', { command: 'mkdir -p e2e-www && cd e2e-www && echo hello-from-www > index.html' });
  const sid = sc.session.id;
  let r = await call(client, 'job_start', {
    session: sid,
    command: `exec -a ${m} python3 -u -m http.server ${port} --bind 127.0.0.1`,
  });
  assert.equal(r.isError, false, text(r));
  const job = r.structuredContent.job;
  assert.match(job, UUID);
  assert.equal(r.structuredContent.running, true);
  assert.equal(r.structuredContent.session, sid);
  sameAsText(r);
  try {
    assert.ok(await waitFor(() => alive(m), 10000), 'the server never started');
    let out = await pollJob(client, job, (o) => /Serving HTTP on 127\.0\.0\.1 port/.test(o.stdout), 10000);
    const served = out.next_offset;
    // the same session reaches it (its loopback), and it serves from the shell's cwd
    sc = await ok(client, 'shell_exec', {
      session: sid,
      command: `python3 -c "import urllib.request as u; r = u.urlopen('${url}index.html', timeout=5); print(r.status, r.read().decode().strip())"`,
      timeout_s: 20,
    });
    assert.equal(sc.stdout, '200 hello-from-www\n');
    // the request log arrives after the offset we had: offsets advance
    out = await pollJob(client, job, (o) => /GET \/index\.html/.test(o.stderr), 5000, { since_offset: served });
    assert.equal(out.from_offset, served);
    assert.ok(out.next_offset > served);
    assert.doesNotMatch(out.stdout, /Serving HTTP/);
    // the host cannot reach it: the session has a network namespace of its own
    const hostAnswer = await hostGet(url);
    assert.equal(hostAnswer, 'ECONNREFUSED', `the host reached the session's server: ${hostAnswer}`);
    // nor can another session
    r = await call(client, 'shell_exec', {
      command: `python3 -c "import urllib.request as u; u.urlopen('${url}', timeout=3)"`,
      timeout_s: 20,
    });
    assert.notEqual(r.structuredContent.session.id, sid);
    assert.equal(r.isError, true);
    assert.notEqual(r.structuredContent.exit_code, 0);
    assert.match(r.structuredContent.stderr, /Connection refused/);
    // nor a job in a sandbox of its own
    r = await call(client, 'job_start', {
      command: `python3 -c "import urllib.request as u; u.urlopen('${url}', timeout=3)"`,
    });
    const other = await pollJob(client, r.structuredContent.job, (o) => !o.running, 10000);
    assert.equal(other.exit_code, 1);
    assert.match(other.stderr, /Connection refused/);
    // the lists show the job in its session
    const sl = await ok(client, 'shell_list', {});
    assert.equal(sl.sessions.find((s) => s.session === sid).jobs, 1);
    const jl = await ok(client, 'job_list', {});
    const j = jl.jobs.find((x) => x.job === job);
    assert.equal(j.session, sid);
    assert.equal(j.running, true);
  } finally {
    // job_kill answers once the job has ended; nothing of it is left on the host
    r = await call(client, 'job_kill', { job });
    assert.equal(r.isError, false, text(r));
    assert.equal(r.structuredContent.job, job);
    assert.equal(r.structuredContent.running, false);
    assert.ok([15, 9].includes(r.structuredContent.signal), `signal ${r.structuredContent.signal}`);
    assert.equal(r.structuredContent.exit_code, null);
    assert.ok(await waitFor(() => !alive(m), 3000), 'the killed server is still running on the host');
  }
  // the session outlives its job
  sc = await ok(client, 'shell_exec', { session: sid, command: 'basename "$PWD"' });
  assert.equal(sc.stdout, 'e2e-www\n');
  await client.close();
});

await test('job_output_offsets_advance', async () => {
  const { client } = await connect();
  await client.listTools(); // the SDK validates each structuredContent below
  let r = await call(client, 'job_start', { command: 'for i in 1 2 3 4 5 6; do echo line$i; sleep 0.1; done; echo err >&2' });
  assert.equal(r.isError, false, text(r));
  const job = r.structuredContent.job;
  // read it 7 bytes at a time, each call from where the last one ended
  let off = 0, got = '', err = '', calls = 0, out;
  for (const end = Date.now() + 10000; Date.now() < end; ) {
    r = await call(client, 'job_output', { job, since_offset: off, max_bytes: 7 });
    assert.equal(r.isError, false, text(r));
    out = r.structuredContent;
    sameAsText(r);
    calls++;
    assert.equal(out.from_offset, off, 'from_offset is the since_offset asked for');
    assert.ok(out.next_offset >= off);
    assert.ok(out.next_offset - off <= 7, `more than max_bytes: ${JSON.stringify(out)}`);
    assert.equal(Buffer.byteLength(out.stdout) + Buffer.byteLength(out.stderr), out.next_offset - off);
    assert.equal(out.missed_bytes, 0);
    assert.equal(out.dropped_bytes, 0);
    assert.equal(out.more, out.next_offset < out.total_bytes);
    got += out.stdout;
    err += out.stderr;
    off = out.next_offset;
    if (!out.running && !out.more) break;
    if (!out.more) await sleep(100);
  }
  assert.equal(out.running, false);
  assert.equal(out.exit_code, 0);
  assert.equal(out.signal, null);
  assert.equal(got, 'line1\nline2\nline3\nline4\nline5\nline6\n');
  assert.equal(err, 'err\n');
  assert.equal(out.total_bytes, got.length + err.length);
  assert.ok(calls >= 6, `only ${calls} job_output calls`);
  // since_offset 0 reads everything still held; at the end reads nothing; past it is an error
  out = await ok(client, 'job_output', { job });
  assert.equal(out.stdout, got);
  assert.equal(out.from_offset, 0);
  assert.equal(out.next_offset, out.total_bytes);
  out = await ok(client, 'job_output', { job, since_offset: out.total_bytes });
  assert.equal(out.stdout + out.stderr, '');
  assert.equal(out.next_offset, out.total_bytes);
  const past = await call(client, 'job_output', { job, since_offset: out.total_bytes + 1 });
  assert.equal(past.isError, true);
  assert.match(past.content[0].text, new RegExp(`since_offset: ${out.total_bytes + 1} is past the end of job ${job}'s output, which is ${out.total_bytes} bytes so far`));
  // job_kill on a finished job answers its state
  const k = await ok(client, 'job_kill', { job });
  assert.equal(k.running, false);
  assert.equal(k.exit_code, 0);
  await client.close();
});

await test('job_start_returns_at_once', async () => {
  const { client } = await connect();
  await client.listTools();
  const m = mark('bg');
  const t0 = Date.now();
  let r = await call(client, 'job_start', {
    command: `echo started; exec bash -c 'exec -a ${m} sleep 300'`,
  });
  assert.ok(Date.now() - t0 < 5000, 'job_start did not return at once');
  assert.equal(r.isError, false, text(r));
  const job = r.structuredContent.job;
  assert.match(job, UUID);
  assert.equal(r.structuredContent.running, true);
  assert.equal(r.structuredContent.session, null);
  assert.match(r.structuredContent.hint, /job_output/);
  try {
    assert.ok(await waitFor(() => alive(m), 10000), 'the job never started');
    const out = await pollJob(client, job, (o) => /^started\n?$/.test(o.stdout), 5000);
    assert.equal(out.running, true);
  } finally {
    r = await call(client, 'job_kill', { job });
    assert.equal(r.structuredContent.running, false);
    assert.ok([15, 9].includes(r.structuredContent.signal), `signal ${r.structuredContent.signal}`);
    assert.ok(await waitFor(() => !alive(m), 3000), 'the killed job survived');
  }
  // run_command stays a one-shot run: a background argument is refused by name
  r = await client.callTool({ name: 'run_command', arguments: { command: 'true', background: true } });
  assert.equal(r.isError, true);
  assert.match(text(r), /background/);
  await client.close();
});

await test('job_list_and_shell_list', async () => {
  const { client } = await connect();
  await client.listTools();
  let r = await call(client, 'shell_list', {});
  assert.deepEqual(r.structuredContent.sessions, []);
  assert.ok(Number.isInteger(r.structuredContent.max_sessions) && r.structuredContent.max_sessions >= 1);
  assert.ok(r.structuredContent.idle_expiry_s > 0);
  sameAsText(r);
  r = await call(client, 'job_list', {});
  assert.deepEqual(r.structuredContent.jobs, []);
  assert.equal(r.structuredContent.running, 0);
  assert.ok(Number.isInteger(r.structuredContent.max_jobs) && r.structuredContent.max_jobs >= 1);
  sameAsText(r);
  const m = mark('list');
  const a = (await ok(client, 'shell_exec', { command: 'echo a' })).session.id;
  const b = (await ok(client, 'shell_exec', { command: 'echo b; echo bb' })).session.id;
  await ok(client, 'shell_exec', { session: b, command: 'true' });
  const j1 = (await ok(client, 'job_start', { session: a, command: `exec -a ${m}-1 sleep 300` })).job;
  const j2 = (await ok(client, 'job_start', { command: 'echo done-job' })).job;
  // outside a session a job runs under sh -c (dash has no exec -a)
  const j3 = (await ok(client, 'job_start', { command: `bash -c 'exec -a ${m}-3 sleep 300'`, cwd: '.' })).job;
  await pollJob(client, j2, (o) => !o.running, 5000);
  assert.ok(await waitFor(() => alive(`${m}-1`) && alive(`${m}-3`), 10000), 'the jobs never started');
  const sl = await ok(client, 'shell_list', {});
  assert.deepEqual(sl.sessions.map((s) => s.session).sort(), [a, b].sort());
  for (const s of sl.sessions) {
    assert.equal(s.alive, true);
    assert.equal(s.busy, false);
    assert.equal(s.restarts, 0);
    assert.equal(s.shell, 'bash');
    assert.ok(s.idle_s >= 0 && s.idle_s < 60, `idle_s ${s.idle_s}`);
    assert.ok(Number.isInteger(s.output_bytes));
  }
  const sa = sl.sessions.find((s) => s.session === a), sb = sl.sessions.find((s) => s.session === b);
  assert.equal(sa.commands, 1);
  assert.equal(sb.commands, 2);
  assert.equal(sa.jobs, 1);
  assert.equal(sb.jobs, 0);
  assert.ok(sb.output_bytes >= 5, `output_bytes ${sb.output_bytes}`);
  const jl = await ok(client, 'job_list', {});
  assert.deepEqual(jl.jobs.map((j) => j.job).sort(), [j1, j2, j3].sort());
  assert.equal(jl.running, 2);
  const byId = Object.fromEntries(jl.jobs.map((j) => [j.job, j]));
  assert.deepEqual(
    [byId[j1].session, byId[j1].running, byId[j1].command],
    [a, true, `exec -a ${m}-1 sleep 300`],
  );
  assert.deepEqual(
    [byId[j2].session, byId[j2].running, byId[j2].exit_code, byId[j2].total_bytes],
    [null, false, 0, 'done-job\n'.length],
  );
  assert.deepEqual([byId[j3].session, byId[j3].running], [null, true]);
  // closing a session stops its job; killing the other leaves none running
  r = await call(client, 'shell_close', { session: a });
  assert.equal(r.isError, false, text(r));
  assert.ok(await waitFor(() => !alive(`${m}-1`), 3000), "the closed session's job survived");
  await ok(client, 'job_kill', { job: j3 });
  assert.ok(!alive(`${m}-3`), 'the killed job survived');
  let jl2;
  for (const end = Date.now() + 3000; Date.now() < end; await sleep(50)) {
    jl2 = await ok(client, 'job_list', {});
    if (jl2.running === 0) break;
  }
  assert.equal(jl2.running, 0, JSON.stringify(jl2));
  for (const j of jl2.jobs) assert.equal(j.running, false, j.job);
  assert.deepEqual((await ok(client, 'shell_list', {})).sessions.map((s) => s.session), [b]);
  await client.close();
});

await test('every_advertised_argument_is_accepted', async () => {
  // What tools/list offers a model must not be refused as an unknown argument.
  const { client } = await connect();
  const { tools } = await client.listTools();
  const ghost = '00000000-0000-4000-8000-000000000000';
  const sample = (tool, key, p) => {
    if (key === 'session' || key === 'job') return ghost;
    if (key === 'language') return p.enum[0];
    if (key === 'code') return '';
    if (key === 'cwd') return '.';
    if (key === 'stages') return [['true'], ['true']];
    if (key === 'queries') return [{ op: 'read', target: 'x' }];
    if (key === 'op') return 'read';
    if (p.type === 'string') return key === 'command' || key === 'target' ? 'true' : '';
    if (p.type === 'number' || p.type === 'integer') return 1;
    if (p.type === 'boolean') return false;
    if (p.type === 'array') return ['true'];
    if (p.type === 'object') return {};
    return null;
  };
  const refused = [];
  for (const t of tools) {
    const props = t.inputSchema.properties;
    const base = {};
    for (const k of t.inputSchema.required || []) base[k] = sample(t.name, k, props[k]);
    for (const [k, p] of Object.entries(props)) {
      const args = { ...base, [k]: sample(t.name, k, p) };
      const r = await call(client, t.name, args);
      if (r.isError && new RegExp(`unknown argument '${k}'`).test(text(r)))
        refused.push(`${t.name}.${k}: ${text(r)}`);
    }
  }
  assert.deepEqual(refused, []);
  await client.close();
});

await test('stateful_bad_arguments', async () => {
  const { client } = await connect();
  await client.listTools();
  const bad = async (name, args, re) => {
    const r = await call(client, name, args);
    assert.equal(r.isError, true, `${name} ${JSON.stringify(args)} was accepted: ${text(r)}`);
    assert.equal(r.structuredContent, undefined);
    assert.match(text(r), re, `${name} ${JSON.stringify(args)}`);
  };
  const ghost = '00000000-0000-4000-8000-000000000000';
  await bad('shell_exec', { session: ghost, command: 'true' }, new RegExp(`^session ${ghost}: no such session`));
  await bad('shell_exec', { command: '' }, /^invalid arguments for shell_exec: command: required, a non-empty/);
  await bad('shell_exec', {}, /^invalid arguments for shell_exec: command/);
  await bad('shell_exec', { session: '', command: 'true' }, /session: not an id/);
  await bad('shell_exec', { command: 'true', timeout_s: -1 }, /timeout_s/);
  await bad('shell_exec', { command: 'true', cwd: '.' }, /unknown argument 'cwd'/);
  await bad('shell_close', {}, /^invalid arguments for shell_close: session: required/);
  await bad('shell_close', { session: ghost }, new RegExp(`^session ${ghost}: no such session`));
  await bad('job_start', { command: '' }, /^invalid arguments for job_start: command: required, a non-empty/);
  await bad('job_start', { session: ghost, command: 'true' }, new RegExp(`^session ${ghost}: no such session`));
  await bad('job_output', { job: ghost }, new RegExp(`^job ${ghost}: no such job`));
  await bad('job_output', {}, /^invalid arguments for job_output: job: required/);
  await bad('job_kill', { job: ghost }, new RegExp(`^job ${ghost}: no such job`));
  await bad('shell_list', { all: true }, /unknown argument 'all'/);
  const sid = (await ok(client, 'shell_exec', { command: 'true' })).session.id;
  await bad('job_start', { session: sid, command: 'true', cwd: 'x' }, /cwd: a job in a session starts in the shell's current directory/);
  const job = (await ok(client, 'job_start', { command: 'echo x' })).job;
  await bad('job_output', { job, since_offset: -1 }, /^invalid arguments for job_output: since_offset: must be a non-negative integer, not a negative number/);
  await bad('job_output', { job, since_offset: 'x' }, /since_offset: must be a non-negative integer, not a string/);
  await bad('job_output', { job, max_bytes: 0 }, /max_bytes: must be at least 1/);
  await bad('run_pipeline', { stages: [['true']] }, /stages: 1 stages; a pipeline has 2 to 16/);
  await bad('run_pipeline', { stages: [['true'], []] }, /stages\[1\]: must be a non-empty array/);
  // the server keeps serving, and the session and the job are intact
  await client.ping();
  assert.equal((await ok(client, 'shell_exec', { session: sid, command: 'echo fine' })).stdout, 'fine\n');
  assert.equal((await pollJob(client, job, (o) => !o.running, 5000)).stdout, 'x\n');
  await client.close();
});

await test('run_command_still_runs_after_shell_exec_and_job_kill', async () => {
  // A shell_exec or a job_kill that was answered must not use up a run_command slot.
  const { client } = await connect(['--max-concurrent', '2']);
  await client.listTools();
  await ok(client, 'shell_exec', { command: 'true' });
  let r = await call(client, 'run_command', { command: 'echo after-shell-exec' }, 5000);
  assert.equal(r.structuredContent.stdout, 'after-shell-exec\n');
  const job = (await ok(client, 'job_start', { command: 'sleep 300' })).job;
  await ok(client, 'job_kill', { job });
  r = await call(client, 'run_command', { command: 'echo after-job-kill' }, 5000);
  assert.equal(r.structuredContent.stdout, 'after-job-kill\n');
  await client.close();
});

await test('run_pipeline_three_stages', async () => {
  const { client } = await connect();
  await client.listTools();
  let r = await call(client, 'run_pipeline', { stages: [['printf', 'b\\na\\nc\\n'], ['sort'], ['head', '-n', '2']] });
  assert.doesNotMatch(text(r), /not available in this build/, 'run_pipeline is not wired yet');
  assert.equal(r.isError, false, text(r));
  let sc = r.structuredContent;
  assert.equal(sc.pipeline, true);
  assert.equal(sc.stdout, 'a\nb\n');
  assert.equal(sc.exit_code, 0);
  assert.equal(sc.failed_stage, null);
  assert.equal(sc.timed_out, false);
  assert.equal(sc.stages.length, 3);
  assert.deepEqual(sc.stages.map((s) => s.exit_code), [0, 0, 0]);
  assert.deepEqual(sc.stages.map((s) => s.argv[0]), ['printf', 'sort', 'head']);
  assert.equal(sc.stages[0].stdout, ''); // went to the next stage
  assert.match(text(r), /a\nb\n/);
  // pipefail: the rightmost failing stage sets the status
  r = await call(client, 'run_pipeline', { stages: [['sh', '-c', 'echo x; exit 3'], ['cat'], ['sh', '-c', 'cat; exit 0']] });
  sc = r.structuredContent;
  assert.equal(r.isError, true, text(r));
  assert.equal(sc.exit_code, 3);
  assert.equal(sc.failed_stage, 0);
  assert.equal(sc.stdout, 'x\n');
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
