import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Keyring } from '../../lib/crypto.js';
import { createLogger } from '../../lib/log.js';
import { QemuDriver } from '../../hosts/drivers/qemu.js';
import type { Surface, VmSpec } from '../../hosts/driver.js';
import { IMAGE_DIR, skipWithoutQemu } from './helpers.js';

/**
 * The qemu driver from the host's side (issue 16): a real microVM (TCG here), its LUKS
 * data disk, the in-guest agent, memory snapshots. The agent inside is the attacker: the
 * escape tests try every way out the process sandbox's do.
 */
describe('qemu driver: a real microVM', function () {
  this.timeout(600_000);
  let root: string;
  let driver: QemuDriver;
  let proxy: Server;
  let proxyHits = 0;
  const spec: VmSpec = { id: `env_${randomBytes(12).toString('hex')}`, cpus: 1, memoryMib: 384, diskGib: 2 };
  const surface = (greeting: string): Surface => ({
    env: { GREETING: greeting, HTTPS_PROXY: 'http://127.0.0.1:3128', HTTP_PROXY: 'http://127.0.0.1:3128' },
    files: { 'settings.json': Buffer.from('{"a":1}') },
    connections: { gmail: 'tok_standin_abcdefghijklmnop' },
    caPem: '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n',
  });
  const sh = async (script: string, extra: { timeoutMs?: number; stdin?: string } = {}) => {
    const r = await driver.exec(spec.id, { command: ['/bin/sh', '-c', script], env: { PATH: '/usr/bin:/bin', HOME: '/home/agent' }, timeoutMs: extra.timeoutMs ?? 60_000, maxOutputBytes: 1 << 20, stdin: extra.stdin });
    return { code: r.exitCode, out: r.stdout.toString('utf8'), err: r.stderr.toString('utf8'), timedOut: r.timedOut };
  };

  before(async function () {
    skipWithoutQemu(this);
    root = mkdtempSync(join(tmpdir(), 'gw-qemu-'));
    // A stand-in for the gateway proxy: answers any request with a marker.
    proxy = createServer((s) => {
      proxyHits++;
      s.once('data', () => s.end('HTTP/1.1 200 OK\r\nContent-Length: 11\r\nConnection: close\r\n\r\nvia-gateway'));
      s.on('error', () => {});
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', () => r()));
    driver = makeDriver();
    driver.image(); // built once per checkout (a minute the first time)
  });
  const keyring = new Keyring([randomBytes(32)]);
  /** A driver as a host process makes it (a second one stands for the host after a restart). */
  const makeDriver = () => new QemuDriver({
    rootDir: join(root, 'environments'), imageDir: IMAGE_DIR, hostTag: `qt${process.pid}`,
    proxy: { host: '127.0.0.1', port: (proxy.address() as { port: number }).port },
    keys: { wrap: (p, c) => keyring.encrypt(p, c), unwrap: (b, c) => keyring.decrypt(b, c) },
    log: createLogger('warn'),
  });

  after(async () => {
    await driver?.close();
    await new Promise<void>((r) => (proxy ? proxy.close(() => r()) : r()));
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('boots on a LUKS-encrypted qcow2; exec runs as the agent with argv, cwd, env and stdin', async () => {
    const t0 = performance.now();
    await driver.start(spec, surface('hello'));
    console.log(`      booted in ${Math.round(performance.now() - t0)} ms (${driver.accel})`);
    expect(driver.status(spec.id)).to.equal('running');
    const r = await driver.exec(spec.id, { command: ['/bin/sh', '-c', 'pwd; id -u; echo "$FOO"; cat; exit 3'], cwd: '/tmp', env: { PATH: '/usr/bin:/bin', FOO: 'bar' }, stdin: 'from-stdin', timeoutMs: 30_000, maxOutputBytes: 4096 });
    expect(r.exitCode).to.equal(3);
    expect(r.stdout.toString()).to.equal('/tmp\n1000\nbar\nfrom-stdin');
    const info = readFileSync(join(root, 'environments', spec.id, 'disk.key'), 'utf8');
    expect(info).to.match(/^v1\./); // wrapped by the master key, never the raw key
    const info2 = JSON.parse(execFileSync('qemu-img', ['info', '-U', '--output=json', join(root, 'environments', spec.id, 'disk.qcow2')], { encoding: 'utf8' }));
    expect(info2.encrypted).to.equal(true);
    expect(info2['format-specific'].data.encrypt.format).to.equal('luks');
    // The image marks this VM as its user, so no prune removes it while the VM may restore on it.
    const record = join(root, 'environments', spec.id, 'vm.json');
    const { imageDir } = JSON.parse(readFileSync(record, 'utf8')) as { imageDir: string };
    expect(imageDir).to.equal(driver.image().dir);
    expect(readdirSync(join(imageDir, 'users')).map((m) => readFileSync(join(imageDir, 'users', m), 'utf8').trim())).to.include(record);
    // Every argument arrives (the API allows 4096), none dropped on the way in.
    const many = await driver.exec(spec.id, { command: ['/bin/sh', '-c', 'echo $# "$4000"', 'sh', ...Array.from({ length: 4000 }, (_, i) => `a${i + 1}`)], env: { PATH: '/usr/bin:/bin' }, timeoutMs: 30_000, maxOutputBytes: 4096 });
    expect(many.stdout.toString()).to.equal('4000 a4000\n');
    const missing = await driver.exec(spec.id, { command: ['no-such-command'], env: { PATH: '/usr/bin:/bin' }, timeoutMs: 10_000, maxOutputBytes: 10 }).catch((e) => e);
    expect(missing.kind).to.equal('exec_failed');
  });

  it('holds no capability and sets no_new_privs; a timeout kills the whole tree', async () => {
    const r = await sh("grep -E '^(CapEff|CapPrm|NoNewPrivs)' /proc/self/status");
    expect(r.out).to.match(/CapEff:\s+0+\n/).and.match(/CapPrm:\s+0+\n/).and.match(/NoNewPrivs:\s+1/);
    const t = await driver.exec(spec.id, { command: ['/bin/sh', '-c', 'sleep 300 & sleep 301'], env: { PATH: '/usr/bin:/bin' }, timeoutMs: 1000, maxOutputBytes: 10 });
    expect(t.timedOut).to.equal(true);
    expect((await sh('ps -eo args --no-headers | grep -c "^sleep 30[01]" || true')).out.trim()).to.equal('0');
  });

  it('/run/service: env, read-only files and connections, the CA; a surface update arrives live', async () => {
    const r = await sh('. /run/service/env; echo $GREETING; cat /run/service/files/settings.json; echo; cat /run/service/connections/gmail; echo; head -1 /run/service/ca.pem; echo x > /run/service/files/settings.json 2>/dev/null && echo WRITABLE || echo readonly');
    expect(r.out.split('\n')).to.deep.equal(['hello', '{"a":1}', 'tok_standin_abcdefghijklmnop', '-----BEGIN CERTIFICATE-----', 'readonly', '']);
    const pid1 = (await sh('cat /proc/1/stat | cut -d" " -f22')).out;
    await driver.applySurface(spec.id, { ...surface('bonjour'), files: { 'b.txt': Buffer.from('B') } });
    const after = await sh('. /run/service/env; echo $GREETING; ls /run/service/files');
    expect(after.out).to.equal('bonjour\nb.txt\n');
    expect((await sh('cat /proc/1/stat | cut -d" " -f22')).out).to.equal(pid1);
  });

  it('attack: reaches the gateway through 127.0.0.1:3128, and nothing else: no route, no DNS, not the host, not 10.0.2.2', async () => {
      const before = proxyHits;
      const ok = await sh('curl -sS --max-time 20 -x http://127.0.0.1:3128 http://example.com/');
      expect(ok.out).to.equal('via-gateway');
      expect(proxyHits).to.be.greaterThan(before);
      const tries = await sh(`
        curl -sS --noproxy '*' --max-time 5 http://1.1.1.1/ >/dev/null 2>&1; echo "ip=$?"
        curl -sS --noproxy '*' --max-time 5 http://10.0.2.2:22/ >/dev/null 2>&1; echo "hostgw=$?"
        curl -sS --noproxy '*' --max-time 5 http://10.0.2.3/ >/dev/null 2>&1; echo "dns_tcp=$?"
        python3 -c "
import socket
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.settimeout(3)
q=b'\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x07example\\x03com\\x00\\x00\\x01\\x00\\x01'
try:
  s.sendto(q,('10.0.2.3',53)); s.recvfrom(512); print('dns=answered')
except Exception as e: print('dns=none')
"
        ip route 2>/dev/null | grep -c default || echo noroute
      `, { timeoutMs: 60_000 });
      expect(tries.out).to.match(/ip=[1-9]/).and.match(/hostgw=[1-9]/).and.match(/dns_tcp=[1-9]/).and.include('dns=none');
    });

  it('attack: cannot reach the host\'s files: two block devices (its root image, its disk), no shared folder, nothing of DATA_DIR', async () => {
      const r = await sh('cat /proc/partitions | awk \'NR>2{print $4}\' | sort | tr "\\n" " "; echo; grep -E " (9p|virtiofs|nfs|cifs) " /proc/mounts | wc -l; grep -c " / ext4 ro" /proc/mounts');
      const [parts, shares, rootRo] = r.out.split('\n');
      expect(parts!.trim().split(' ').sort()).to.deep.equal(['vda', 'vdb']);
      expect(shares).to.equal('0');
      expect(rootRo).to.equal('1');
      const hunt = await sh(`grep -rl "${root}" / --exclude-dir=proc --exclude-dir=sys 2>/dev/null | head -3; ls /mnt; find / -name 'disk.key' -o -name '*.sqlite' -o -name 'master.key' 2>/dev/null | grep -v ^/proc | head`, { timeoutMs: 120_000 });
      expect(hunt.out.trim()).to.equal('');
      const write = await sh('touch /usr/bin/x 2>/dev/null && echo ROOT_WRITABLE; touch /etc/x 2>/dev/null && echo ETC_WRITABLE; echo done');
      expect(write.out).to.equal('done\n');
    });

  it('the data disk is encrypted at rest: a file written inside is not in the qcow2 on the host', async () => {
    const marker = `plaintext-marker-${randomBytes(8).toString('hex')}`;
    await sh(`for i in $(seq 1 2000); do echo ${marker}; done > /home/agent/marker.txt; sync`);
    const disk = readFileSync(join(root, 'environments', spec.id, 'disk.qcow2'));
    expect(disk.includes(Buffer.from(marker))).to.equal(false);
    expect((await sh('grep -c plaintext-marker /home/agent/marker.txt')).out).to.equal('2000\n');
  });

  it('suspend to a zstd memory snapshot and resume: processes go on; 20 cycles lose nothing written', async () => {
    await sh("nohup sh -c 'i=0; while :; do i=$((i+1)); echo $i > /home/agent/c.new; mv /home/agent/c.new /home/agent/counter; sleep 0.05; done' >/dev/null 2>&1 &");
    await new Promise((r) => setTimeout(r, 300));
    const times: number[][] = [];
    for (let i = 0; i < 20; i++) {
      await sh(`echo cycle-${i} > /home/agent/cycle-${i}.txt`);
      const t0 = performance.now();
      await driver.suspend(spec.id);
      const t1 = performance.now();
      expect(driver.status(spec.id)).to.equal('suspended');
      if (i === 0) {
        const snap = join(root, 'environments', spec.id, 'snapshot.zst');
        expect(readFileSync(snap).subarray(0, 4).equals(Buffer.from([0x28, 0xb5, 0x2f, 0xfd]))).to.equal(true); // zstd frame
      }
      await driver.resume(spec.id);
      times.push([t1 - t0, performance.now() - t1]);
    }
    const all = await sh('cat /home/agent/cycle-*.txt | wc -l; a=$(cat /home/agent/counter); sleep 0.5; b=$(cat /home/agent/counter); [ "$b" -gt "$a" ] && echo counting');
    expect(all.out).to.equal('20\ncounting\n');
    const med = (k: number) => times.map((t) => t[k]!).sort((a, b) => a - b)[10]!;
    console.log(`      suspend p50 ${Math.round(med(0))} ms, resume p50 ${Math.round(med(1))} ms`);
  });

  it('one snapshot restored twice: the clock is the host\'s and the random pool differs each time', async () => {
    const dir = join(root, 'environments', spec.id);
    await driver.suspend(spec.id);
    copyFileSync(join(dir, 'snapshot.zst'), join(dir, 'saved.zst'));
    await new Promise((r) => setTimeout(r, 1500)); // time passes while it sleeps
    await driver.resume(spec.id);
    const a = await sh('date +%s.%N; head -c 32 /dev/urandom | od -An -tx1 | tr -d " \\n"');
    const [clockA, randA] = a.out.split('\n');
    expect(Math.abs(Number(clockA) - Date.now() / 1000)).to.be.lessThan(1.0);
    await driver.stop(spec.id);
    copyFileSync(join(dir, 'saved.zst'), join(dir, 'snapshot.zst'));
    await driver.resume(spec.id);
    const b = await sh('date +%s.%N; head -c 32 /dev/urandom | od -An -tx1 | tr -d " \\n"');
    const randB = b.out.split('\n')[1];
    expect(randA).to.have.length(64);
    expect(randB).to.not.equal(randA);
    rmSync(join(dir, 'saved.zst'), { force: true });
  });

  it('a suspended VM survives a restart of the host: a new driver finds it suspended and resumes it, memory and all', async () => {
    await sh("echo before-restart > /home/agent/r.txt; nohup sh -c 'while :; do sleep 1; done' >/dev/null 2>&1 & echo $! > /tmp/loop.pid");
    await driver.suspend(spec.id);
    await driver.close();
    driver = makeDriver();
    expect(driver.status(spec.id)).to.equal('suspended');
    expect(driver.leftovers()).to.not.include(spec.id);
    await driver.resume(spec.id);
    // /tmp is the guest's tmpfs: it and the loop lived in the snapshot's memory.
    expect((await sh('cat /home/agent/r.txt; kill -0 "$(cat /tmp/loop.pid)" && echo same-process')).out).to.equal('before-restart\nsame-process\n');
  });

  it('a snapshot that cannot be restored is set aside: resume fails, the next start boots fresh on the kept disk', async () => {
    const dir = join(root, 'environments', spec.id);
    await sh('echo survives > /home/agent/s.txt; sync');
    await driver.suspend(spec.id);
    writeFileSync(join(dir, 'snapshot.zst'), randomBytes(4096));
    const err = await driver.resume(spec.id).catch((e) => e);
    expect(err.kind).to.equal('start_failed');
    expect(driver.status(spec.id)).to.equal('absent');
    expect(existsSync(join(dir, 'snapshot.failed.zst'))).to.equal(true);
    await driver.start(spec, surface('fresh'));
    expect((await sh('cat /home/agent/s.txt')).out).to.equal('survives\n');
  });

  it('stop keeps the disk and drops the snapshot; the next start boots fresh with the data; destroy deletes everything', async () => {
    await sh('echo kept > /home/agent/kept.txt; echo gone > /tmp/gone.txt');
    await driver.suspend(spec.id);
    await driver.stop(spec.id);
    const dir = join(root, 'environments', spec.id);
    expect(existsSync(join(dir, 'snapshot.zst'))).to.equal(false);
    expect(driver.status(spec.id)).to.equal('absent');
    await driver.start(spec, surface('again'));
    expect((await sh('cat /home/agent/kept.txt; ls /tmp')).out).to.equal('kept\n');
    await driver.destroy(spec.id);
    expect(existsSync(dir)).to.equal(false);
  });
});
