import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { startTestService, type TestService } from '../helpers/service.js';
import { sandboxProcess, sh, skipWithoutRuntime, waitState } from '../helpers/runtime.js';
import { skipOrFailInCI } from '../helpers/ci-gate.js';
import { ProcessDriver } from '../../hosts/drivers/process.js';

/**
 * Issue 24, item 6 (part): the `network_sealed` capability read a start-up flag, not the
 * sandbox. Now the host's probe starts a sandbox and reads its network namespace
 * (/proc/net/dev: loopback only; /proc/net/route: no route), every start checks the new
 * sandbox's namespace the same way from the host (/proc/<its first pid>/net/*) and refuses
 * one that is not sealed, and the driver answers for a running sandbox by reading it.
 *
 * Asserted from inside, as the agent sees it, and from the host, where tampering with the
 * namespace (a dummy interface moved into it by the host's root) must show.
 */
describe('security: network_sealed is the sandbox\'s real network namespace (issue 24, item 6)', function () {
  this.timeout(60_000);
  let t: TestService;
  let envId: string;

  before(async function () {
    skipWithoutRuntime(this);
    t = await startTestService({ GATEWAY_RUNTIME: 'process' });
    const created = await t.api.post('/v1/environments', { end_user_id: 'net-prober', resources: { cpus: 1, memory_mib: 512, disk_gib: 1 } });
    envId = created.body.id;
    await waitState(t.api, envId, 'running');
  });
  after(async () => t?.close());

  it('the host reports network_sealed from the sandbox its probe started', async () => {
    const host = (await t.api.get('/v1/hosts')).body.data[0];
    expect(host.capabilities.network_sealed).to.equal(true);
    expect(host.capabilities.missing.join(' ')).to.not.match(/network namespace/);
  });

  it('inside: loopback is the only interface, no IPv4 route, IPv6 only on loopback, no resolver', async () => {
    const r = await sh(t.api, envId, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; echo ---; tail -n +2 /proc/net/route | wc -l; echo ---; awk '{print $NF}' /proc/net/ipv6_route | sort -u; echo ---; awk '{print $NF}' /proc/net/if_inet6 | sort -u; echo ---; cat /etc/resolv.conf | wc -c");
    expect(r.stdout).to.equal('lo\n---\n0\n---\nlo\n---\nlo\n---\n0\n');
  });

  it('the driver reads the running sandbox\'s namespace: an interface the host moves into it (a tun device) shows at once', async function () {
    const driver = t.svc.host!.driver as ProcessDriver;
    expect(driver.networkSealed(envId)).to.equal(true);
    // A process of the sandbox, found by the environment's own host uid, in a network
    // namespace that is not the host's (bwrap's outer process has the uid too).
    const uid = driver.uidOf(envId)!;
    const pid = sandboxProcess(uid);
    expect(pid).to.be.a('string');
    const link = `gwt${randomBytes(3).toString('hex')}`;
    try {
      execFileSync('/usr/bin/ip', ['tuntap', 'add', 'mode', 'tun', 'name', link], { stdio: 'ignore' });
    } catch {
      skipOrFailInCI(this, 'no tun device on this machine (ip tuntap add failed)');
    }
    execFileSync('/usr/bin/ip', ['link', 'set', link, 'netns', pid!]);
    expect(driver.networkSealed(envId)).to.equal(false);
    const inside = await sh(t.api, envId, 'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "');
    expect(inside.stdout.split('\n')).to.include(link);
    // A new start makes a new namespace, checked again: sealed.
    await t.svc.db('environments').where({ id: envId }).update({ desired_state: 'stopped' });
    t.svc.host!.notify();
    await waitState(t.api, envId, 'stopped');
    expect((await sh(t.api, envId, 'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "')).stdout).to.equal('lo\n');
    expect(driver.networkSealed(envId)).to.equal(true);
  });
});
