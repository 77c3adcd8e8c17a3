import { dropTemplate } from './db.js';

/**
 * Mocha root hooks (.mocharc.cjs `require`): once every suite of the run is done, the
 * template database the fresh test databases were copied from is dropped (test/helpers/db.ts).
 */
export const mochaHooks = {
  async afterAll(): Promise<void> {
    await dropTemplate();
  },
};
