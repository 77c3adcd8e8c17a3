import { runtimeSuite } from '../helpers/runtime-suite.js';

// The driver-agnostic runtime tests against the process sandbox (the default runtime).
runtimeSuite('process');
