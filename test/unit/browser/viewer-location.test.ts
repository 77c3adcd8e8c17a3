import { expect } from 'chai';
import { EventEmitter } from 'node:events';
import type { WebSocket } from 'ws';
import type { EnvBrowser } from '../../../browser/env-browser.js';
import { relayViewer } from '../../../browser/viewer.js';

/**
 * The takeover viewer's address line (issue 23, item 3): the person sees the page's address
 * outside its pixels. A target in the middle of a navigation (takeover loads every page
 * afresh) has an empty url for a moment; the viewer shows nothing for it, not a blank address,
 * and shows the real one when it arrives. (A CI run once connected the viewer in that moment
 * and was shown `url: ""` first.)
 */
describe('takeover viewer: the address it shows', () => {
  function world(initialUrl: string) {
    const sent: any[] = [];
    const ws = new EventEmitter() as EventEmitter & { send(d: string): void };
    ws.send = (d: string) => sent.push(JSON.parse(d));
    const session = Object.assign(new EventEmitter(), {
      send: async () => ({}),
      detach: async () => {},
    });
    let listener: ((e: string, t: { targetId: string; url: string }) => void) | null = null;
    const browser = {
      targets: new Map([['T1', { targetId: 'T1', url: initialUrl }]]),
      attach: async () => session,
      subscribe: (f: typeof listener) => {
        listener = f;
        return () => {};
      },
    };
    return {
      sent,
      start: () => relayViewer(ws as unknown as WebSocket, browser as unknown as EnvBrowser, 'T1', () => {}),
      targetChanged: (url: string) => listener!('changed', { targetId: 'T1', url }),
      navigated: (url: string) => session.emit('Page.frameNavigated', { frame: { url } }),
      locations: () => sent.filter((m) => m.type === 'location'),
    };
  }

  it('an empty address is never shown; the real one is, with its origin', async () => {
    const w = world('');
    await w.start();
    w.targetChanged('');
    expect(w.locations()).to.deep.equal([]);
    w.targetChanged('https://app.example.com/form');
    w.navigated('');
    expect(w.locations()).to.deep.equal([{ type: 'location', url: 'https://app.example.com/form', origin: 'https://app.example.com' }]);
  });

  it('the address at connect is shown at once, and every change after it', async () => {
    const w = world('https://a.example/x');
    await w.start();
    w.navigated('https://b.example/y');
    expect(w.locations().map((m) => m.url)).to.deep.equal(['https://a.example/x', 'https://b.example/y']);
  });
});
