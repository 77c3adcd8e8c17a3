import { runtimeSuite } from '../helpers/runtime-suite.js';
import { IMAGE_DIR, skipWithoutQemu } from './helpers.js';

// The driver-agnostic runtime tests of issue 12, against the QEMU microVM (issue 16, item 4).
runtimeSuite('qemu', { skip: skipWithoutQemu, env: { GATEWAY_QEMU_IMAGE_DIR: IMAGE_DIR } });
