import { runtimeSuite } from '../helpers/runtime-suite.js';
import { skipWithoutRuntime } from '../helpers/runtime.js';

// The driver-agnostic runtime tests against the process sandbox (the default runtime):
// started cold (no pool), and started from a slot of the pool (issue 29).
runtimeSuite('process', { skip: skipWithoutRuntime, env: { GATEWAY_SANDBOX_POOL: '0' } });
runtimeSuite('process', { skip: skipWithoutRuntime, claimed: true });
