// gpustream dashboard — GPU events (Xid, ECC, clock-event, power-source): the newest per GPU,
// shown as a list on its card. Fed by `event` messages on /ws and, at each (re)connection, by
// /api/v1/events (what happened before the page connected). Bounded: EVENTS_PER_GPU per card,
// MAX_GPUS cards' lists, SEEN_MAX sequences remembered to drop duplicates.
// Plain JavaScript, no third-party code; transport/web/embed.cmake inlines it into the page.
'use strict';

(() => {
  const gs = (window.gpustream = window.gpustream || {});

  const EVENTS_PER_GPU = 20;
  const MAX_GPUS = 256;
  const SEEN_MAX = 4096;

  const KIND_TEXT = {
    xid: 'Xid error',
    ecc_single_bit: 'ECC single-bit error (corrected)',
    ecc_double_bit: 'ECC double-bit error (uncorrected)',
    clock_event: 'clock event',
    power_source: 'power source changed',
    pstate: 'performance state changed',
  };
  const SEVERITY = { xid: 'bad', ecc_double_bit: 'bad', ecc_single_bit: 'warn' };

  const lists = new Map();  // "probe/device" → events, newest first
  const seen = new Set();   // "instance:sequence" of the events listed
  let instance = '';        // the server's instance (event sequences restart with it)

  function text(e) {
    let t = KIND_TEXT[e.kind] || e.kind;
    if (e.kind === 'xid' && e.data != null) t = 'Xid ' + e.data;
    if (e.kind === 'clock_event' && e.data != null) t += ' (reasons 0x' + e.data.toString(16) + ')';
    return t;
  }

  /** Adds one event (a wire `event` message or an /api/v1/events entry); false if known. */
  function add(e) {
    const id = instance + ':' + e.sequence;
    if (seen.has(id)) return false;
    seen.add(id);
    if (seen.size > SEEN_MAX) seen.delete(seen.values().next().value);
    const key = e.probe + '/' + e.device;
    let list = lists.get(key);
    if (!list) {
      if (lists.size >= MAX_GPUS) return false;
      list = [];
      lists.set(key, list);
    }
    list.push(e);
    list.sort((a, b) => b.sequence - a.sequence);
    if (list.length > EVENTS_PER_GPU) list.length = EVENTS_PER_GPU;
    return true;
  }

  /** The server changed (hello.instance): sequences start again. */
  function setInstance(id) {
    instance = id || '';
  }

  /** Fetches /api/v1/events; calls done() when something was added. */
  async function fetchRecent(token, done) {
    try {
      const headers = token ? { Authorization: 'Bearer ' + token } : {};
      const res = await fetch('/api/v1/events', { headers, cache: 'no-store' });
      if (!res.ok) return;
      const body = await res.json();
      let added = false;
      for (const e of body.events || []) added = add(e) || added;
      if (added) done();
    } catch (e) {
      // The connection state already says the server is away.
    }
  }

  /** Fills a card's event list (`node`: its .events element). */
  function renderCard(key, node) {
    if (!node) return;
    const list = lists.get(key) || [];
    node.replaceChildren(...list.map((e) => {
      const d = document.createElement('div');
      d.className = 'event ' + (SEVERITY[e.kind] || '');
      const when = new Date(e.time_unix_ns / 1e6);
      d.textContent = when.toLocaleTimeString() + ' · ' + text(e);
      d.title = 'event #' + e.sequence + ' (' + e.kind + ') at ' + when.toISOString();
      return d;
    }));
  }

  gs.events = { add, setInstance, fetchRecent, renderCard };
})();
