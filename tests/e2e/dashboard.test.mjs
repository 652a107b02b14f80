// The dashboard in a real browser against a real `loopx serve` on a real
// loop: logging in through the one-time link, read, refine, live refresh
// with an open draft, stale-write recovery with a concurrent CLI write,
// applying a proposed revision, the iteration page, absent outcomes, a
// browser without the session cookie refused, the all-loops page of
// `loopx serve --all`, each worker's todo and the merge queue while
// `drive --workers` runs, and desktop/narrow screenshots.
//
// Run by `cargo test` (crates/loopx/tests/dashboard_e2e.rs) with LOOPX_BIN
// set to the built binary.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, mkdirSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { chromium } from 'playwright-core';

const LOOPX = process.env.LOOPX_BIN || 'loopx';
const SHOTS = process.env.LOOPX_SCREENSHOTS || join(tmpdir(), 'loopx-e2e-screenshots');
mkdirSync(SHOTS, { recursive: true });

function loopx(dir, args, env = {}) {
  return execFileSync(LOOPX, [...args, '--dir', dir, '--json'], { env: { ...process.env, LOOPX_REGISTRY_DIR: join(dir, '..', 'registry'), ...env }, encoding: 'utf8' });
}

function newLoop({ withOutcome }) {
  const root = mkdtempSync(join(tmpdir(), 'loopx-e2e-'));
  const dir = join(root, 'loop');
  loopx(dir, ['init', '--goal', 'Write the talk', '--success-criteria', 'the deck is reviewed', '--max-iterations', '10']);
  if (withOutcome) {
    loopx(dir, ['todo', 'add', '--title', 'Build the deck']);
    const doc = join(root, 'outcome.json');
    writeFileSync(doc, JSON.stringify({ outcome_id: 'deck', objective: 'A deck that keeps the accepted intro', add_requirements: [{ id: 'R1', description: 'Keep the intro slide first' }], link_todos: ['t1'], source: { ref: 'msg-1' } }));
    loopx(dir, ['goal-acceptance', 'refine-outcome', '--document', doc], { LOOPX_AGENT_ID: 'agent-a' });
    loopx(dir, ['append-iteration', '--mode', 'bounded-research', '--objective', 'Draft the deck outline', '--decision', 'continue', '--evidence-id', 'outline.md']);
  }
  return { root, dir };
}

// The start line (--json) names the URL, the one-time login link and the
// token file; never the token.
async function serve(dir) {
  return started(spawn(LOOPX, ['serve', '--dir', dir, '--addr', '127.0.0.1:0', '--json'], { stdio: ['ignore', 'pipe', 'inherit'] }));
}

// `loopx serve --all` over the registry at `registry`.
async function serveAll(registry) {
  const env = { ...process.env, LOOPX_REGISTRY_DIR: registry };
  return started(spawn(LOOPX, ['serve', '--all', '--addr', '127.0.0.1:0', '--json'], { env, stdio: ['ignore', 'pipe', 'inherit'] }));
}

async function started(child) {
  const line = await new Promise((resolve) => createInterface({ input: child.stdout }).once('line', resolve));
  const start = JSON.parse(line);
  return { child, url: start.url, login: start.login_url, token: readFileSync(start.token_file, 'utf8').trim() };
}

let browser;
before(async () => {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});
after(async () => { await browser?.close(); });

// Each test logs in the way a person does: the one-time link sets the
// session cookie and lands on the overview.
async function withServer(loop, run) {
  const server = await serve(loop.dir);
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  try {
    const response = await page.goto(server.login);
    assert.equal(response.status(), 200);
    assert.equal(page.url(), server.url);
    await run(page, server, context);
  } finally {
    await context.close();
    server.child.kill();
  }
}

const requirementIds = (dir) => JSON.parse(loopx(dir, ['goal-acceptance', 'inspect'])).outcomes[0].requirements.map((r) => r.id);

test('reads the goal, outcomes, todos and iterations', async () => {
  const loop = newLoop({ withOutcome: true });
  await withServer(loop, async (page) => {
    await assert.doesNotReject(page.getByTestId('current-objective').filter({ hasText: 'Write the talk' }).waitFor());
    const outcome = page.locator('[data-outcome="deck"]');
    assert.match(await outcome.innerText(), /R1\s+unreviewed\s+Keep the intro slide first/);
    assert.match(await outcome.innerText(), /Responsible: agent-a/);
    assert.match(await page.locator('[data-column="open"]').innerText(), /t1 Build the deck/);
    await page.screenshot({ path: join(SHOTS, 'overview-desktop.png'), fullPage: true });
    await page.setViewportSize({ width: 390, height: 844 });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `the narrow layout scrolls sideways by ${overflow}px`);
    await page.screenshot({ path: join(SHOTS, 'overview-narrow.png'), fullPage: true });
    await page.getByRole('link', { name: '#1' }).click();
    assert.equal(await page.getByTestId('decision').innerText(), 'continue');
    assert.match(await page.locator('body').innerText(), /outline\.md/);
  });
});

test('refines in place and reads back the native result', async () => {
  const loop = newLoop({ withOutcome: true });
  await withServer(loop, async (page) => {
    await page.fill('input[name=requirement_id]', 'R2');
    await page.fill('textarea[name=description]', 'Put the results before the methods');
    await page.click('button[type=submit]');
    await page.locator('#refine-message').filter({ hasText: 'Saved: R2' }).waitFor();
    await page.locator('[data-requirement="R2"]').waitFor();
    assert.deepEqual(requirementIds(loop.dir), ['R1', 'R2']);
    // Reload: still there, read from the store.
    await page.reload();
    assert.match(await page.locator('[data-outcome="deck"]').innerText(), /R2\s+unreviewed\s+Put the results before the methods/);
  });
});

test('a stale write keeps the draft and its retry after reloading appends once', async () => {
  const loop = newLoop({ withOutcome: true });
  await withServer(loop, async (page) => {
    await page.fill('input[name=requirement_id]', 'R3');
    await page.fill('textarea[name=description]', 'End with one slide of questions');
    const operation = await page.locator('#refine').getAttribute('data-operation');
    // Someone commits through the CLI after the page loaded.
    loopx(loop.dir, ['todo', 'add', '--title', 'Concurrent CLI work']);
    await page.click('button[type=submit]');
    await page.locator('#refine-message').filter({ hasText: 'Someone changed this goal' }).waitFor();
    assert.equal(await page.inputValue('textarea[name=description]'), 'End with one slide of questions');
    assert.equal(await page.locator('#refine').getAttribute('data-operation'), operation, 'the pending operation is kept');
    assert.deepEqual(requirementIds(loop.dir), ['R1']);
    await page.click('#refine-retry');
    await page.locator('#refine-message').filter({ hasText: 'Saved: R3' }).waitFor();
    assert.deepEqual(requirementIds(loop.dir), ['R1', 'R3']);
    await page.screenshot({ path: join(SHOTS, 'after-stale-retry.png'), fullPage: true });
  });
});

test('the live refresh shows new state without losing an open draft', async () => {
  const loop = newLoop({ withOutcome: true });
  await withServer(loop, async (page) => {
    await page.fill('input[name=requirement_id]', 'R4');
    await page.fill('textarea[name=description]', 'A draft that must survive');
    loopx(loop.dir, ['todo', 'add', '--title', 'Appears live']);
    await page.locator('[data-column="open"]').filter({ hasText: 'Appears live' }).waitFor({ timeout: 10000 });
    assert.equal(await page.inputValue('textarea[name=description]'), 'A draft that must survive');
    assert.equal(await page.inputValue('input[name=requirement_id]'), 'R4');
  });
});

test('the owner reviews and applies a proposed objective revision', async () => {
  const loop = newLoop({ withOutcome: true });
  const doc = join(loop.root, 'revision.json');
  writeFileSync(doc, JSON.stringify({ objective: 'Write the talk and a two-page abstract', reason: 'the user asked for an abstract', source_ref: 'msg-7' }));
  loopx(loop.dir, ['goal-acceptance', 'prepare-objective', '--document', doc, '--execute'], { LOOPX_AGENT_ID: 'agent-a' });
  await withServer(loop, async (page) => {
    const proposal = page.getByTestId('proposal');
    assert.match(await proposal.innerText(), /Write the talk and a two-page abstract/);
    await proposal.getByRole('button', { name: 'Apply this revision' }).click();
    await page.getByTestId('current-objective').filter({ hasText: 'two-page abstract' }).waitFor();
    const readback = JSON.parse(loopx(loop.dir, ['goal-acceptance', 'inspect']));
    assert.equal(readback.objective.current_revision, 1);
    assert.equal(readback.original_objective, 'Write the talk');
  });
});

test('a goal without outcomes reads cleanly and offers no refine form', async () => {
  const loop = newLoop({ withOutcome: false });
  await withServer(loop, async (page) => {
    await page.getByTestId('no-outcomes').waitFor();
    assert.match(await page.locator('body').innerText(), /This form appears once an outcome exists/);
    assert.equal(await page.locator('#refine').count(), 0);
    await page.setViewportSize({ width: 390, height: 844 });
    await page.screenshot({ path: join(SHOTS, 'no-outcomes-narrow.png'), fullPage: true });
  });
});

test('a browser without the session cookie is refused, and no page holds the token', async () => {
  const loop = newLoop({ withOutcome: true });
  await withServer(loop, async (page, server, context) => {
    // Logged in: the overview works and its HTML carries no secret.
    await page.getByTestId('current-objective').waitFor();
    const html = await page.content();
    assert.ok(!html.includes(server.token), 'the overview embeds the token');
    const cookies = await context.cookies();
    assert.equal(cookies.length, 1);
    assert.ok(cookies[0].httpOnly && cookies[0].sameSite === 'Strict' && cookies[0].path === '/');
    assert.notEqual(cookies[0].value, server.token);
    assert.equal(await page.evaluate(() => document.cookie), '', 'scripts cannot read the session');
    await page.getByRole('link', { name: '#1' }).click();
    assert.ok(!(await page.content()).includes(server.token), 'the iteration page embeds the token');
    // The used login link is spent, and a fresh browser has no way in.
    const stranger = await browser.newContext();
    try {
      const other = await stranger.newPage();
      for (const path of ['', 'iterations/1', 'api/status', 'api/iterations/1']) {
        const response = await other.goto(server.url + path);
        assert.equal(response.status(), 403, path);
        const body = await response.text();
        assert.ok(!body.includes(server.token) && !body.includes('Write the talk'), `${path} leaks: ${body}`);
      }
      assert.equal((await other.goto(server.login)).status(), 403, 'a login link works once');
      const write = await other.evaluate(async () => (await fetch('/api/objective/revise', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ proposal_digest: 'x', expected_provider_revision: 0, operation_id: 'stranger-1' }) })).status);
      assert.equal(write, 403);
    } finally {
      await stranger.close();
    }
  });
});

// A loop driven by a fake agent: its first turn hits a quota limit with a
// reset a few seconds away, then each turn records an iteration.
function fakeAgent(root, resetSeconds) {
  const flag = join(root, 'limited-once');
  const agent = join(root, 'agent.sh');
  writeFileSync(agent, `#!/bin/sh\nif [ ! -e ${flag} ]; then touch ${flag}; echo 'usage limit reached; resets in ${resetSeconds} seconds'; exit 1; fi\n${LOOPX} append-iteration --mode monitor --objective turn --decision continue >/dev/null\n`, { mode: 0o755 });
  return agent;
}

function drive(loop, agent, turns) {
  const project = join(loop.root, 'project');
  mkdirSync(project, { recursive: true });
  const env = { ...process.env, LOOPX_REGISTRY_DIR: join(loop.root, 'registry') };
  delete env.LOOPX_DIR;
  delete env.AUTOLOOP_DRIVER;
  const child = spawn(LOOPX, ['drive', '--dir', loop.dir, '--root', project, '--cmd', agent, '--max-iterations', String(turns)], { env, stdio: 'ignore' });
  return new Promise((resolve) => child.on('exit', resolve));
}

const health = (page, state) => page.locator(`[data-testid="health"][data-state="${state}"]`).waitFor({ timeout: 15000 });

test('the health line follows the driver, and budgets, chart and timeline match the state', async () => {
  const loop = newLoop({ withOutcome: true });
  await withServer(loop, async (page) => {
    await health(page, 'not_driven');
    assert.match(await page.getByTestId('health-command').innerText(), /^loopx drive --dir /);
    const driven = drive(loop, fakeAgent(loop.root, 6), 3);
    await health(page, 'waiting_for_reset');
    const line = await page.getByTestId('health').innerText();
    assert.match(line, /waiting for a quota reset until \d\d:\d\d UTC \(in \d+s\)/);
    const until = await page.getByTestId('health').locator('strong').getAttribute('title');
    assert.ok(Math.abs(Date.parse(until) - Date.now()) < 10000, `the exact reset time is on hover: ${until}`);
    assert.equal(await driven, 0);
    // One hand-written iteration, the quota failure and two driven turns.
    await page.reload();
    await health(page, 'not_driven');
    const iterations = page.getByTestId('budget-iterations');
    assert.equal(await iterations.locator('.fill').getAttribute('style'), 'width: 30.0%');
    assert.match(await iterations.innerText(), /3 of 10/);
    assert.match(await page.getByTestId('budget-tokens').innerText(), /unlimited/);
    assert.match(await page.getByTestId('budget-wall_time_hours').innerText(), /\d+s of 1h · exhausted in 5\dm at this rate/);
    const turns = JSON.parse(loopx(loop.dir, ['cost', '--by', 'turn'])).rows;
    assert.equal(turns.length, 4, 'the hand-written iteration is a turn too');
    assert.equal(await page.getByTestId('turn-bar').count(), turns.length);
    assert.equal(await page.getByTestId('turn-tokens').count(), turns.length);
    assert.deepEqual(await page.getByTestId('turn-bar').evaluateAll((bars) => bars.map((b) => b.dataset.outcome)), ['recorded', 'failed:quota', 'advanced', 'advanced']);
    // The timeline: newest first, relative time with the exact one on hover.
    const rows = page.getByTestId('iteration-row');
    assert.equal(await rows.count(), 3);
    assert.equal(await rows.first().getByTestId('turn-outcome').innerText(), 'advanced');
    const stamp = rows.first().getByTestId('relative');
    assert.equal(await stamp.innerText(), 'just now');
    assert.ok(Math.abs(Date.parse(await stamp.getAttribute('title')) - Date.now()) < 60000);
    // Coverage: the one requirement is unreviewed.
    assert.equal(await page.locator('[data-testid="coverage"] [data-state="unreviewed"]').getAttribute('style'), 'width: 100.0%');
    await page.screenshot({ path: join(SHOTS, 'glance-desktop.png'), fullPage: true });
    await page.setViewportSize({ width: 390, height: 844 });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `the narrow layout scrolls sideways by ${overflow}px`);
    await page.screenshot({ path: join(SHOTS, 'glance-phone.png'), fullPage: true });
    // Operator sentinels, picked up by the live refresh.
    writeFileSync(join(loop.dir, 'PAUSE'), '');
    await health(page, 'paused');
    assert.equal(await page.getByTestId('health-command').innerText(), `rm ${loop.dir}/PAUSE`);
    writeFileSync(join(loop.dir, 'STOP_REQUESTED'), '');
    await health(page, 'stopped_by_user');
    assert.match(await page.getByTestId('health').innerText(), /stopped by the user \(STOP_REQUESTED\)/);
    assert.equal(await page.getByTestId('health-command').innerText(), `rm ${loop.dir}/STOP_REQUESTED`);
  });
});

test('a staged candidate and then its quarantine put a person on the health line, with the command for each', async () => {
  const root = mkdtempSync(join(tmpdir(), 'loopx-e2e-'));
  const dir = join(root, 'loop');
  loopx(dir, ['init', '--goal', 'Prove lemma B', '--success-criteria', 'a reviewed proof', '--max-iterations', '10', '--goal-focus-mode', 'enforce']);
  mkdirSync(join(dir, 'notes'));
  writeFileSync(join(dir, 'notes', 'b.md'), 'lemma B holds for n <= 4\n');
  const staged = JSON.parse(loopx(dir, ['append-iteration', '--mode', 'bounded-research', '--objective', 'Check lemma B', '--decision', 'continue', '--executor-provider', 'claude', '--executor', 'claude', '--claim-id', 'c1', '--claim-evidence', 'c1=notes/b.md']));
  const fingerprint = staged.candidate_fingerprint;
  assert.match(fingerprint, /^sha256:[0-9a-f]{64}$/);
  await withServer({ root, dir }, async (page) => {
    await health(page, 'needs_person');
    assert.match(await page.getByTestId('health').innerText(), /awaits its result review/);
    assert.equal(await page.getByTestId('health-command').innerText(), `loopx goal-focus review --dir ${dir} --candidate-fingerprint ${fingerprint} --file REVIEW.json`);
    loopx(dir, ['goal-focus', 'quarantine', '--candidate-fingerprint', fingerprint, '--reason', 'reviewer timed out']);
    // The live refresh picks the quarantine up without a reload.
    await page.getByTestId('health').filter({ hasText: 'is quarantined' }).waitFor({ timeout: 15000 });
    assert.equal(await page.getByTestId('health').getAttribute('data-state'), 'needs_person');
    assert.equal(await page.getByTestId('health-command').innerText(), `loopx goal-focus recover-quarantine --dir ${dir}`);
    await page.screenshot({ path: join(SHOTS, 'quarantined-desktop.png'), fullPage: true });
  });
});

test('leases show their expiry as relative time and digests are shortened', async () => {
  const loop = newLoop({ withOutcome: true });
  loopx(loop.dir, ['todo', 'claim', 't1', '--ttl', '7200'], { LOOPX_AGENT_ID: 'agent-b' });
  await withServer(loop, async (page) => {
    const card = page.locator('[data-column="claimed"]');
    assert.match(await card.innerText(), /leased to agent-b, expires in (1h 59m|2h)/);
    const expiry = card.getByTestId('relative');
    assert.ok(Math.abs(Date.parse(await expiry.getAttribute('title')) - Date.now() - 7200000) < 60000);
    const digest = page.getByTestId('digest').first();
    const full = await digest.getAttribute('title');
    assert.match(full, /^sha256:[0-9a-f]{64}$/);
    assert.equal(await digest.innerText(), full.slice(0, 15) + '…');
  });
});

test('the all-loops page lists two loops and a gone one, and opens each behind one login', async () => {
  const first = newLoop({ withOutcome: true });
  const registry = join(first.root, 'registry');
  // Two more loops in the same registry, armed; the last one then goes away.
  const second = join(first.root, 'second');
  const gone = join(first.root, 'gone');
  for (const [dir, goal] of [[second, 'Review the paper'], [gone, 'A loop that was deleted']]) {
    loopx(dir, ['init', '--goal', goal, '--success-criteria', 'reviewed', '--max-iterations', '4']);
    loopx(dir, ['arm', '--root', first.root, '--force']);
  }
  rmSync(gone, { recursive: true });
  // The first is registered by driving it: turns that take a second each.
  const agent = join(first.root, 'slow-agent.sh');
  writeFileSync(agent, `#!/bin/sh\nsleep 1\n${LOOPX} append-iteration --mode monitor --objective 'slow turn' --decision continue >/dev/null\n`, { mode: 0o755 });
  assert.equal(await drive(first, agent, 2), 0);

  const server = await serveAll(registry);
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  try {
    assert.equal((await page.goto(server.login)).status(), 200);
    assert.equal(page.url(), server.url);
    const rows = page.getByTestId('loop-row');
    assert.equal(await rows.count(), 3);
    assert.equal(await page.getByTestId('loop-link').count(), 2);
    const lost = page.locator('[data-testid="loop-row"][data-reach="gone"]');
    assert.match(await lost.getByTestId('loop-problem').innerText(), /gone/);
    assert.equal(await lost.getByTestId('loop-link').count(), 0, 'a gone loop links nowhere');
    const driven = rows.filter({ hasText: 'Write the talk' });
    assert.match(await driven.getByTestId('health').innerText(), /not driven/);
    assert.equal(await driven.getByTestId('health').getAttribute('data-tone'), 'neutral');
    assert.equal(await driven.getByTestId('last-activity').innerText(), 'just now');
    assert.equal(await driven.getByTestId('budget-iterations').locator('.fill').getAttribute('style'), 'width: 30.0%');
    const armed = rows.filter({ hasText: 'Review the paper' });
    assert.match(await armed.getByTestId('budget-iterations').innerText(), /0 of 4/);
    await page.screenshot({ path: join(SHOTS, 'all-loops-desktop.png'), fullPage: true });
    await page.setViewportSize({ width: 390, height: 844 });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `the narrow all-loops page scrolls sideways by ${overflow}px`);
    await page.screenshot({ path: join(SHOTS, 'all-loops-phone.png'), fullPage: true });
    await page.setViewportSize({ width: 1280, height: 900 });

    // Into the driven loop's own dashboard with the same session.
    await driven.getByTestId('loop-link').click();
    await page.getByTestId('current-objective').filter({ hasText: 'Write the talk' }).waitFor();
    assert.match(page.url(), /\/loops\/[0-9a-f]{16}\/$/);
    const took = page.getByTestId('iteration-row').first().getByTestId('turn-duration');
    assert.match(await took.innerText(), /^took [12]s$/);
    // A write and the live refresh both work under the loop's prefix.
    await page.fill('input[name=requirement_id]', 'R2');
    await page.fill('textarea[name=description]', 'Written through serve --all');
    await page.click('button[type=submit]');
    await page.locator('#refine-message').filter({ hasText: 'Saved: R2' }).waitFor();
    assert.deepEqual(requirementIds(first.dir), ['R1', 'R2']);
    loopx(first.dir, ['todo', 'add', '--title', 'Appears under all']);
    await page.locator('[data-column="open"]').filter({ hasText: 'Appears under all' }).waitFor({ timeout: 10000 });
    await page.getByRole('link', { name: '#2' }).click();
    assert.equal(await page.getByTestId('decision').innerText(), 'continue');
    await page.getByRole('link', { name: '← overview' }).click();
    await page.getByTestId('all-loops-link').click();
    assert.equal(page.url(), server.url);
    await rows.filter({ hasText: 'Review the paper' }).getByTestId('loop-link').click();
    await page.getByTestId('current-objective').filter({ hasText: 'Review the paper' }).waitFor();
    const secondUrl = page.url();

    // One credential: a browser without the session gets nothing anywhere.
    const stranger = await browser.newContext();
    try {
      const other = await stranger.newPage();
      for (const url of [server.url, server.url + 'api/loops', secondUrl, secondUrl + 'api/status']) {
        const response = await other.goto(url);
        assert.equal(response.status(), 403, url);
        assert.ok(!(await response.text()).includes('Review the paper'), url);
      }
    } finally {
      await stranger.close();
    }
    assert.ok(!existsSync(join(first.dir, 'serve.token')) && !existsSync(join(second, 'serve.token')), 'no loop got a token of its own');
  } finally {
    await context.close();
    server.child.kill();
  }
});

// One loop for each way a loop ends, all in one registry: each overview's
// health line and the all-loops table say the same verdict in the same
// colour, the budgets equal the ledger's sums, and a finished loop has no
// forecast.
test('every verdict reads the same, in its colour, on its overview and on the all-loops table', async () => {
  const root = mkdtempSync(join(tmpdir(), 'loopx-e2e-'));
  const registry = join(root, 'registry');
  const made = (name, extra) => {
    const dir = join(root, name);
    loopx(dir, ['init', '--goal', `Loop that ${name.replace(/-/g, ' ')}`, '--success-criteria', 'done', ...extra]);
    return dir;
  };
  const succeeded = made('succeeded', ['--max-iterations', '5']);
  mkdirSync(join(succeeded, 'proofs'));
  writeFileSync(join(succeeded, 'proofs', 'lemma.lean'), 'theorem b : True := trivial\n');
  writeFileSync(join(succeeded, 'proof_artifacts', 'q.json'), JSON.stringify({ schema_version: '1.0', id: 'q', artifact_type: 'lean', machine_checkable: true, target: 'lemma B', proof_path: 'proofs/lemma.lean', checker: { name: 'lean', status: 'passed' } }));
  loopx(succeeded, ['append-iteration', '--mode', 'bounded-research', '--objective', 'Prove it', '--decision', 'stop', '--stop-reason', 'proof_found', '--evidence-id', 'q', '--tokens', '1200', '--usd', '0.05']);
  const byUser = made('was-stopped', ['--max-iterations', '5']);
  writeFileSync(join(byUser, 'STOP_REQUESTED'), '');
  const spent = made('ran-out-of-tokens', ['--max-iterations', '5', '--max-tokens', '3000', '--max-usd', '0.15']);
  loopx(spent, ['append-iteration', '--mode', 'bounded-research', '--objective', 'Spend', '--decision', 'continue', '--tokens', '1200', '--usd', '0.05']);
  loopx(spent, ['append-iteration', '--mode', 'bounded-research', '--objective', 'Spend more', '--decision', 'stop', '--stop-reason', 'budget', '--tokens', '3000', '--usd', '0.12']);
  const blocked = made('is-blocked', ['--max-iterations', '1']);
  loopx(blocked, ['append-iteration', '--mode', 'bounded-research', '--objective', 'Try', '--decision', 'blocked', '--stop-reason', 'no access to the dataset']);
  // A driver that gives up: three turns that record nothing.
  const failed = made('failed', ['--max-iterations', '5']);
  const idle = join(root, 'idle-agent.sh');
  writeFileSync(idle, '#!/bin/sh\necho all done\n', { mode: 0o755 });
  mkdirSync(join(root, 'project'));
  const env = { ...process.env, LOOPX_REGISTRY_DIR: registry };
  delete env.LOOPX_DIR;
  delete env.AUTOLOOP_DRIVER;
  const gaveUp = await new Promise((resolve) => spawn(LOOPX, ['drive', '--dir', failed, '--root', join(root, 'project'), '--cmd', idle, '--max-failures', '3'], { env, stdio: 'ignore' }).on('exit', resolve));
  assert.equal(gaveUp, 3);

  const expected = [
    [succeeded, 'succeeded', 'good', /succeeded: iteration 1 stopped with a valid proof artifact/],
    [byUser, 'stopped_by_user', 'neutral', /stopped by the user \(STOP_REQUESTED\)/],
    [spent, 'budget_exhausted', 'attention', /budget exhausted: the (token|USD) budget is used up/],
    [blocked, 'needs_person', 'bad', /needs a person: the agent reported itself blocked on iteration 1 \(no access to the dataset\)/],
    [failed, 'failed', 'bad', /failed: the driver gave up after 3 turns \(exit 3\)/],
  ];
  const colours = { good: 'rgb(47, 158, 85)', attention: 'rgb(217, 164, 0)', bad: 'rgb(197, 48, 48)', neutral: 'rgb(138, 150, 163)' };
  for (const [dir, state, tone, words] of expected) {
    const ending = JSON.parse(loopx(dir, ['status'])).ending;
    assert.equal(ending.tone, tone, dir);
    await withServer({ root, dir }, async (page) => {
      await health(page, state);
      const line = page.getByTestId('health');
      assert.match(await line.innerText(), words);
      assert.equal(await line.getAttribute('data-tone'), tone);
      assert.equal(await line.evaluate((el) => getComputedStyle(el).borderLeftColor), colours[tone]);
      assert.match(await line.innerText(), new RegExp(ending.words.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')), 'the page and status say the same words');
      // Budgets are the ledger's sums, and a finished loop forecasts nothing.
      const status = JSON.parse(loopx(dir, ['status']));
      assert.equal(Number(await page.getByTestId('budget-iterations').getAttribute('data-used')), status.spent.iterations);
      if (status.budget.max_tokens > 0) {
        assert.equal(Number(await page.getByTestId('budget-tokens').getAttribute('data-used')), status.spent.tokens);
      }
      if (state !== 'failed') {
        assert.doesNotMatch(await page.locator('#live').innerText(), /at this rate/, 'a finished loop has no forecast');
      }
      if (state === 'failed') {
        const failedTurns = page.getByTestId('failed-turn-row');
        assert.equal(await failedTurns.count(), 3, 'the turns that recorded nothing are on the timeline');
        assert.match(await failedTurns.first().innerText(), /no_advance/);
        assert.match(await page.getByTestId('driver').innerText(), /its last run ended with exit 3 \(max_failures\)/);
      }
      await page.screenshot({ path: join(SHOTS, `verdict-${state}-desktop.png`), fullPage: true });
      await page.setViewportSize({ width: 390, height: 844 });
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 0, `${state}: the narrow layout scrolls sideways by ${overflow}px`);
      await page.screenshot({ path: join(SHOTS, `verdict-${state}-phone.png`), fullPage: true });
    });
  }

  // The all-loops table: one row a loop, every loop `init` made here.
  const server = await serveAll(registry);
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  try {
    assert.equal((await page.goto(server.login)).status(), 200);
    const rows = page.locator('table.loops tbody tr[data-testid="loop-row"]');
    assert.equal(await rows.count(), expected.length);
    assert.deepEqual(await page.locator('table.loops thead th').allInnerTexts(), ['Loop', 'Verdict', 'Last activity', 'Iterations', 'Cost']);
    for (const [dir, state, tone, words] of expected) {
      const row = rows.filter({ hasText: dir });
      const cell = row.getByTestId('health');
      assert.equal(await cell.getAttribute('data-state'), state, dir);
      assert.equal(await cell.getAttribute('data-tone'), tone, dir);
      assert.match(await cell.innerText(), words);
    }
    assert.match(await rows.filter({ hasText: succeeded }).getByTestId('loop-cost').innerText(), /\$0\.05/);
    await page.screenshot({ path: join(SHOTS, 'all-loops-verdicts-desktop.png'), fullPage: true });
    await page.setViewportSize({ width: 390, height: 844 });
    await page.screenshot({ path: join(SHOTS, 'all-loops-verdicts-phone.png'), fullPage: true });
  } finally {
    await context.close();
    server.child.kill();
  }
});

test('the Loop card shows each worker\'s todo while workers run, and the merge queue as they land', async () => {
  const root = mkdtempSync(join(tmpdir(), 'loopx-e2e-'));
  const dir = join(root, 'loop');
  const project = join(root, 'project');
  mkdirSync(project);
  const identity = { GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t' };
  const git = (...args) => execFileSync('git', ['-C', project, ...args], { env: { ...process.env, ...identity } });
  git('init', '-q', '-b', 'main');
  writeFileSync(join(project, 'README'), 'two parts\n');
  git('add', '-A');
  git('commit', '-qm', 'first');
  loopx(dir, ['init', '--goal', 'Two parts', '--success-criteria', 'both landed', '--max-iterations', '10']);
  loopx(dir, ['todo', 'add', '--title', 'Part one']);
  loopx(dir, ['todo', 'add', '--title', 'Part two']);
  // Each worker's agent holds its turn until the test lets it finish.
  const go = join(root, 'go');
  const agent = join(root, 'agent.sh');
  writeFileSync(agent, `#!/bin/sh\ncat >/dev/null\nwhile [ ! -e '${go}' ]; do sleep 0.05; done\necho "$LOOPX_TODO_ID" > "out-$LOOPX_TODO_ID.txt"\n`, { mode: 0o755 });
  await withServer({ root, dir }, async (page) => {
    const driver = spawn(LOOPX, ['drive', '--dir', dir, '--cmd', agent, '--workers', '2', '--host-id', 'box', '--root', project], {
      env: { ...process.env, LOOPX_REGISTRY_DIR: join(root, 'registry') },
      stdio: 'ignore',
    });
    const ended = new Promise((resolve) => driver.on('exit', resolve));
    // The live refresh brings the card in as the workers take their todos.
    const workers = page.getByTestId('workers');
    await workers.locator('[data-worker]').nth(1).waitFor({ timeout: 20000 });
    const shown = await workers.locator('[data-worker]').evaluateAll((rows) => rows.map((r) => r.innerText));
    assert.equal(shown.length, 2, shown.join(' | '));
    assert.ok(shown.every((s) => /\.w[12]@box: t[12] Part (one|two)/.test(s)), shown.join(' | '));
    assert.ok(shown.some((s) => s.includes('t1')) && shown.some((s) => s.includes('t2')), shown.join(' | '));
    assert.match(await workers.locator('[data-host="box"]').innerText(), /box running/);
    await page.screenshot({ path: join(SHOTS, 'workers-desktop.png'), fullPage: true });
    writeFileSync(go, '');
    assert.equal(await ended, 0);
    await page.getByTestId('queue').filter({ hasText: '2 landed' }).waitFor({ timeout: 20000 });
    assert.equal(await workers.locator('[data-worker]').count(), 0);
    assert.match(await workers.locator('[data-host="box"]').innerText(), /box stopped/);
  });
});
