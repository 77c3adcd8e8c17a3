/**
 * Quickstart: an environment with a secret, a policy that asks before writes, an exec, and
 * an approval decided through the API (issue 25, item 4).
 *
 *   GATEWAY_URL=http://127.0.0.1:8080 GATEWAY_API_KEY=sk_... npx tsx examples/quickstart.ts
 *
 * QUICKSTART_API_HOST (default api.example.com) is the API the secret is for. The exec starts
 * a POST to it in the background, inside the environment, with the secret's placeholder; the
 * gateway holds it (the policy asks before writes), this program finds the pending approval
 * and approves it once, and the request goes on with the real secret swapped in.
 */
import { createGatewayClient, exec, unwrap, type Approval } from '../src/index.js';

const gw = createGatewayClient({ baseUrl: need('GATEWAY_URL'), apiKey: need('GATEWAY_API_KEY') });
const host = process.env.QUICKSTART_API_HOST || 'api.example.com';

// 1. An environment for one end user, with a secret only `host` may receive.
const env = await unwrap(gw.POST('/v1/environments', {
  body: {
    end_user_id: process.env.QUICKSTART_END_USER || `quickstart-${Date.now()}`,
    secrets: { DEMO_TOKEN: { value: process.env.QUICKSTART_SECRET || 'demo-secret-value', allowed_hosts: [host] } },
  },
}));
console.log(`environment ${env.id} (${env.desired_state})`);

// 2. Its policy: reads with the secret go through, writes wait for a person.
const policy = await unwrap(gw.PUT('/v1/environments/{id}/policy', {
  params: { path: { id: env.id } },
  body: {
    rules: [
      { connector: 'secret:DEMO_TOKEN', category: 'read', effect: 'allow' },
      { connector: 'secret:DEMO_TOKEN', category: 'write', effect: 'ask', max_scope: 'task' },
    ],
  },
}));
console.log(`policy: ${policy.rules.length} rules (${policy.source})`);

// 3. An exec: a command, then a write to the API started in the background (the agent's work).
const hello = await exec(gw, env.id, { command: ['/bin/sh', '-c', 'echo "hello from $(id -un), token $DEMO_TOKEN"'] });
console.log(`exec: exit ${hello.exit_code}: ${hello.stdout.trim()}`);
const write = `curl -sS -X POST -H "Authorization: Bearer $DEMO_TOKEN" -H 'X-Service-Task-Id: quickstart' https://${host}/v1/messages -d '{"text":"hi"}'`;
await exec(gw, env.id, {
  command: ['/bin/sh', '-c', 'rm -f posted.out; nohup sh -c "$WRITE > posted.tmp 2>&1; mv posted.tmp posted.out" >/dev/null 2>&1 &'],
  env: { WRITE: write },
});

// 4. The held write is a pending approval: list them, and approve this one, once.
let pending: Approval | undefined;
for (let i = 0; i < 300 && !pending; i++) {
  const page = await unwrap(gw.GET('/v1/approvals', { params: { query: { status: 'pending', environment_id: env.id } } }));
  pending = page.data[0];
  if (!pending) await new Promise((r) => setTimeout(r, 100));
}
if (!pending) throw new Error('no pending approval appeared within 30 s');
console.log(`pending approval ${pending.id}: ${pending.summary} (${pending.connector} ${pending.category}, task ${pending.task_id})`);
const decided = await unwrap(gw.POST('/v1/approvals/{id}/decision', {
  params: { path: { id: pending.id } },
  body: { decision: 'approve', scope: { kind: 'once' } },
}));
console.log(`decided: ${decided.status} (scope ${decided.scope}, via ${decided.decided_via})`);

// 5. The write went on: what the API answered, as the environment received it.
let answer = '';
for (let i = 0; i < 300 && !answer; i++) {
  const out = await exec(gw, env.id, { command: ['/bin/sh', '-c', 'cat posted.out 2>/dev/null || true'] });
  answer = out.stdout.trim();
  if (!answer) await new Promise((r) => setTimeout(r, 100));
}
console.log(`the API answered: ${answer}`);

function need(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`set ${name}`);
  return v;
}
