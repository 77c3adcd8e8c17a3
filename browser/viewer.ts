import { randomBytes } from 'node:crypto';
import type { WebSocket } from 'ws';
import type { EnvBrowser } from './env-browser.js';

/**
 * The takeover viewer (service.md, Viewer rules; issue 14, item 4): an HTML page served
 * without an API key (the one-time token in its URL is the credential) and its WebSocket,
 * which relays JSON text both ways:
 *
 * - to the person: `{type: "location", url, origin}` whenever the page's address changes (the
 *   viewer shows it above the page, outside its pixels, so a page the agent drew cannot pass
 *   for a real sign-in page; issue 23, item 3), and
 *   `{type: "frame", data: <base64 JPEG>, width, height}` from CDP
 *   `Page.startScreencast`; each frame is acknowledged (`Page.screencastFrameAck`) only
 *   when the page says it drew it (`{type: "ack"}`), so a slow viewer slows the stream
 *   instead of queueing frames;
 * - from the person: `{type: "mouse", event: "down"|"up"|"move", x, y, button}`, `{type:
 *   "wheel", x, y, dx, dy}`, `{type: "key", event: "down"|"up", key, code, text}` (CDP
 *   `Input.dispatch*`, coordinates in the page's CSS pixels), and `{done: true}` (the Hand
 *   back button): the browser goes back to the agent.
 */
export function viewerPage(nonce: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Browser takeover</title>
<style nonce="${nonce}">
  body { margin: 0; font: 14px system-ui, sans-serif; background: #111; color: #eee; }
  header { display: flex; gap: 12px; align-items: center; padding: 8px 12px; background: #222; }
  header .status { flex: 1; }
  #where { display: block; padding: 6px 12px; background: #000; font: 13px ui-monospace, monospace; color: #9cf; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
  #where b { color: #fff; }
  button { font: inherit; padding: 6px 14px; border-radius: 6px; border: 0; background: #3a7; color: #fff; cursor: pointer; }
  #screen { display: block; max-width: 100%; margin: 0 auto; cursor: crosshair; outline: none; }
</style></head>
<body>
<header><span class="status" id="status">Connecting…</span><button id="done" type="button">Hand back</button></header>
<div id="where" title="The address of the page you are looking at">Address: <b id="origin"></b><span id="rest"></span></div>
<img id="screen" alt="The agent's browser" tabindex="0">
<script nonce="${nonce}">
(() => {
  const screen = document.getElementById('screen');
  const status = document.getElementById('status');
  const ws = new WebSocket(location.href.replace(/^http/, 'ws').replace(/[?#].*$/, '') + '/ws');
  let size = { width: 1, height: 1 };
  const send = (m) => { if (ws.readyState === 1) ws.send(JSON.stringify(m)); };
  const at = (e) => {
    const r = screen.getBoundingClientRect();
    return { x: Math.round((e.clientX - r.left) * size.width / r.width), y: Math.round((e.clientY - r.top) * size.height / r.height) };
  };
  ws.onopen = () => { status.textContent = 'You have the browser. The agent waits until you hand it back.'; };
  ws.onclose = () => { status.textContent = 'Disconnected: the browser was handed back or the link expired.'; };
  ws.onmessage = (ev) => {
    const m = JSON.parse(ev.data);
    if (m.type === 'location' && typeof m.url === 'string') {
      const origin = typeof m.origin === 'string' ? m.origin : '';
      document.getElementById('origin').textContent = origin || m.url;
      document.getElementById('rest').textContent = origin && m.url.startsWith(origin) ? m.url.slice(origin.length) : '';
      document.getElementById('where').title = m.url;
    }
    if (m.type === 'frame') {
      size = { width: m.width, height: m.height };
      screen.onload = () => send({ type: 'ack' });
      screen.src = 'data:image/jpeg;base64,' + m.data;
    }
  };
  const buttons = ['left', 'middle', 'right'];
  screen.addEventListener('mousedown', (e) => { e.preventDefault(); screen.focus(); send({ type: 'mouse', event: 'down', button: buttons[e.button] || 'left', ...at(e) }); });
  screen.addEventListener('mouseup', (e) => send({ type: 'mouse', event: 'up', button: buttons[e.button] || 'left', ...at(e) }));
  screen.addEventListener('mousemove', (e) => { if (e.buttons) send({ type: 'mouse', event: 'move', button: buttons[e.button] || 'left', ...at(e) }); });
  screen.addEventListener('wheel', (e) => { e.preventDefault(); send({ type: 'wheel', dx: e.deltaX, dy: e.deltaY, ...at(e) }); }, { passive: false });
  screen.addEventListener('contextmenu', (e) => e.preventDefault());
  screen.addEventListener('keydown', (e) => { e.preventDefault(); send({ type: 'key', event: 'down', key: e.key, code: e.code, text: e.key.length === 1 ? e.key : '' }); });
  screen.addEventListener('keyup', (e) => { e.preventDefault(); send({ type: 'key', event: 'up', key: e.key, code: e.code }); });
  document.getElementById('done').addEventListener('click', () => { send({ done: true }); status.textContent = 'Handed back.'; });
})();
</script>
</body></html>`;
}

export function notFoundPage(): string {
  return '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Link not valid</title></head><body><h1>This link is not valid</h1><p>It has expired, was already used, or the browser was handed back.</p></body></html>';
}

export function viewerHeaders(nonce: string | null): Record<string, string> {
  const csp = nonce
    ? `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'nonce-${nonce}'; img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`
    : "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
  return {
    'Content-Type': 'text/html; charset=utf-8',
    'Cache-Control': 'no-store',
    'Referrer-Policy': 'no-referrer',
    'Content-Security-Policy': csp,
    'X-Content-Type-Options': 'nosniff',
    'X-Frame-Options': 'DENY',
  };
}

export function newNonce(): string {
  return randomBytes(16).toString('base64');
}

const MOUSE: Record<string, string> = { down: 'mousePressed', up: 'mouseReleased', move: 'mouseMoved' };

function location(url: string): { type: 'location'; url: string; origin: string } {
  let origin = '';
  try {
    const u = new URL(url);
    origin = u.origin === 'null' ? `${u.protocol}` : u.origin;
  } catch { /* shown as it is */ }
  return { type: 'location', url: url.slice(0, 4096), origin };
}

/** Relays one viewer: the page's screencast and address out, the person's input in; `onDone` hands back. */
export async function relayViewer(ws: WebSocket, browser: EnvBrowser, targetId: string, onDone: () => void): Promise<void> {
  const session = await browser.attach(targetId);
  let closed = false;
  // An empty address (a target mid-navigation, as when takeover loads the page afresh) is not
  // shown: the person keeps seeing the last real one until the next arrives.
  const show = (url: string | undefined): void => {
    if (!closed && typeof url === 'string' && url !== '') ws.send(JSON.stringify(location(url)));
  };
  show(browser.targets.get(targetId)?.url);
  const unsubscribe = browser.subscribe((e, t) => {
    if (e !== 'destroyed' && t.targetId === targetId) show(t.url);
  });
  session.on('Page.frameNavigated', (p: { frame: { parentId?: string; url: string; urlFragment?: string } }) => {
    if (!p.frame.parentId) show(p.frame.url + (p.frame.urlFragment ?? ''));
  });
  session.on('Page.screencastFrame', (f: { data: string; sessionId: number; metadata: { deviceWidth: number; deviceHeight: number } }) => {
    if (closed) return;
    pendingAck = f.sessionId;
    ws.send(JSON.stringify({ type: 'frame', data: f.data, width: Math.round(f.metadata.deviceWidth), height: Math.round(f.metadata.deviceHeight) }));
  });
  let pendingAck: number | null = null;
  await session.send('Page.enable');
  await session.send('Page.startScreencast', { format: 'jpeg', quality: 70, maxWidth: 1600, maxHeight: 1200, everyNthFrame: 1 });
  ws.on('message', (raw) => {
    let m: any;
    try {
      m = JSON.parse(raw.toString());
    } catch {
      return;
    }
    if (!m || typeof m !== 'object') return;
    if (m.done === true) return onDone();
    const num = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
    const send = (method: string, params: Record<string, unknown>): void => {
      void session.send(method, params).catch(() => {});
    };
    switch (m.type) {
      case 'ack':
        if (pendingAck !== null) send('Page.screencastFrameAck', { sessionId: pendingAck });
        pendingAck = null;
        return;
      case 'mouse':
        if (!MOUSE[m.event]) return;
        send('Input.dispatchMouseEvent', { type: MOUSE[m.event], x: num(m.x), y: num(m.y), button: ['left', 'middle', 'right'].includes(m.button) ? m.button : 'left', clickCount: m.event === 'move' ? 0 : 1, buttons: m.event === 'up' ? 0 : 1 });
        return;
      case 'wheel':
        send('Input.dispatchMouseEvent', { type: 'mouseWheel', x: num(m.x), y: num(m.y), deltaX: num(m.dx), deltaY: num(m.dy) });
        return;
      case 'key': {
        if (m.event !== 'down' && m.event !== 'up') return;
        const key = typeof m.key === 'string' ? m.key.slice(0, 32) : '';
        const text = typeof m.text === 'string' ? m.text.slice(0, 4) : '';
        send('Input.dispatchKeyEvent', { type: m.event === 'down' ? (text ? 'keyDown' : 'rawKeyDown') : 'keyUp', key, code: typeof m.code === 'string' ? m.code.slice(0, 32) : '', text: m.event === 'down' ? text : undefined });
        return;
      }
      default:
    }
  });
  ws.on('close', () => {
    closed = true;
    unsubscribe();
    void session.send('Page.stopScreencast').catch(() => {}).finally(() => session.detach().catch(() => {}));
  });
}
