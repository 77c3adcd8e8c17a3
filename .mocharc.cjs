/**
 * Mocha's configuration (was .mocharc.json). One addition: on the MySQL run (DATABASE_URL
 * names MySQL/MariaDB), the suites whose subject is the host boundary and not the store
 * (the browser's and the process sandbox's attack suites, the runtime suite) are left to
 * the SQLite run, which CI also makes: their store calls are the same knex code the store
 * suites run on both engines, and on a slow 2-core machine running them twice (Chromium and
 * bubblewrap, a third of a run's CPU) took CI past its 20 minutes. GATEWAY_TEST_ALL=1 runs
 * them on MySQL too. The list is printed at the start of the run: nothing is left out unseen.
 */
const HOST_BOUNDARY_SUITES = [
  'test/integration/environments-runtime.test.ts',
  'test/integration/sandbox-pool.test.ts',
  'test/integration/browser-spare.test.ts',
  'test/integration/disk-image-spare.test.ts',
  'test/security/browser-cross-lease.test.ts',
  'test/security/browser-sandbox.test.ts',
  'test/security/browser-resources.test.ts',
  'test/security/browser-host-files.test.ts',
  'test/security/browser-session-cookie.test.ts',
  'test/security/browser-takeover-watch.test.ts',
  'test/security/browser-download.test.ts',
  'test/security/sandbox-disk-quota.test.ts',
  'test/security/sandbox-inherited-fds.test.ts',
  'test/security/sandbox-userns-seccomp.test.ts',
  'test/security/sandbox-host-env.test.ts',
  'test/security/sandbox-network-sealed.test.ts',
  'test/security/sandbox-mountinfo.test.ts',
  'test/security/sandbox-service-resources.test.ts',
];

const mysql = /^(mysql|mariadb):\/\//.test(process.env.DATABASE_URL ?? '');
const all = /^(1|true)$/i.test(process.env.GATEWAY_TEST_ALL ?? '');
const ignore = mysql && !all ? HOST_BOUNDARY_SUITES : [];
if (ignore.length > 0) {
  console.log(`MySQL run: ${ignore.length} host-boundary suites run on the SQLite run only (GATEWAY_TEST_ALL=1 runs them here too):\n${ignore.map((f) => `  ${f}`).join('\n')}`);
}

module.exports = {
  'node-option': ['import=tsx'],
  require: ['test/helpers/root-hooks.ts'],
  timeout: 20000,
  color: false,
  exit: true,
  ignore,
};
