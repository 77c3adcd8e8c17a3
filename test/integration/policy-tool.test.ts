import { expect } from 'chai';
import { startTestService, type TestService } from '../helpers/service.js';

/**
 * The policy check endpoint takes the MCP tool a request would call (issue 28): a rule that
 * names a tool matches only it, so a developer can test `tool` rules without a request.
 */
describe('policy check with an MCP tool (issue 28)', function () {
  this.timeout(30_000);
  let t: TestService;
  let env: string;
  before(async () => {
    t = await startTestService();
    env = (await t.api.post('/v1/environments', { end_user_id: 'tool-check' })).body.id;
    const put = await t.api.put(`/v1/environments/${env}/policy`, {
      rules: [{ connector: 'mcp:gh', tool: 'delete_repository', effect: 'deny' }, { connector: 'mcp:gh', category: 'read', effect: 'allow' }],
    });
    expect(put.status, put.text).to.equal(200);
  });
  after(async () => {
    await t?.close();
  });

  const check = (body: Record<string, unknown>) => t.api.post(`/v1/environments/${env}/policy/check`, { connector: 'mcp:gh', category: 'delete', ...body });

  it('the named tool is denied by the rule; another tool, or none, asks (delete is high-risk)', async () => {
    expect((await check({ tool: 'delete_repository' })).body).to.include({ decision: 'deny', reason: 'deny_rule' });
    expect((await check({ tool: 'delete_branch' })).body).to.include({ decision: 'ask', reason: 'high_risk' });
    expect((await check({})).body).to.include({ decision: 'ask', reason: 'high_risk' });
  });

  it('a tool that is not a tool name: 400 invalid_request; a wrong type: 422 invalid_body', async () => {
    const bad = await check({ tool: 'rm -rf /' });
    expect(bad.status).to.equal(400);
    expect(bad.body.error).to.equal('invalid_request');
    const shape = await check({ tool: 7 });
    expect(shape.status).to.equal(422);
    expect(shape.body.error).to.equal('invalid_body');
  });
});
