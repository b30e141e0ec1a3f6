// gpustream dashboard — the connection (/ws, reconnect, resume), the host and probe sections.
// Plain JavaScript, no third-party code; transport/web/embed.cmake inlines the files of this
// folder into the page the server serves.
'use strict';

(() => {
  const gs = window.gpustream;
  const { fmtBytes, fmtNs } = gs.format;
  const Card = gs.Card;

  const STATS_PERIOD_MS = 2000;      // /api/v1/stats poll
  const RECONNECT_INITIAL_MS = 500;
  const RECONNECT_MAX_MS = 10000;

  const params = new URLSearchParams(location.search);
  const token = params.get('token');

  const $ = (id) => document.getElementById(id);

  const cards = new Map();  // "probe/device id" → Card
  let windowMs = 300000;    // the charts' time window

  // ---------------------------------------------------------------------------------------
  // Host

  let host = null;  // {probe, sample, timeMs}

  function renderHost() {
    if (!host) return;
    $('host-section').hidden = false;
    const h = host.sample;
    const frag = document.createDocumentFragment();
    const dl = document.createElement('dl');
    dl.className = 'details small';
    const row = (label, v, fmt) => {
      const dt = document.createElement('dt');
      dt.textContent = label;
      const dd = document.createElement('dd');
      if (v == null) {
        dd.textContent = '—';
        dd.className = 'absent';
        dd.title = label + ': not reported by probe ' + host.probe;
      } else {
        dd.textContent = fmt(v);
      }
      dl.append(dt, dd);
    };
    row('memory used', h.memory_used_bytes, fmtBytes);
    row('memory total', h.memory_total_bytes, fmtBytes);
    row('memory available', h.memory_available_bytes, fmtBytes);
    row('swap used', h.swap_used_bytes, fmtBytes);
    row('swap total', h.swap_total_bytes, fmtBytes);
    for (const [k, v] of Object.entries(h.metrics || {})) row(k, v, (x) => String(x));
    for (const p of h.processes || []) {
      row('pid ' + p.pid + ' ' + p.name + ' RSS', p.rss_bytes, fmtBytes);
    }
    frag.append(dl);
    $('host').replaceChildren(frag);
  }

  // ---------------------------------------------------------------------------------------
  // Snapshots

  let lastSeq = null;          // resume cursor: last sequence received (or skipped by a gap)
  let serverInstance = null;   // the hello's `instance`: which sequence space lastSeq belongs to
  let awaitingAck = true;      // snapshots before the subscribe's ack are replayed after it
  const sampleTimes = [];      // sample times (ms) of the last 10 s of snapshots, for the rate
  let dirty = true;

  function ingestSnapshot(s) {
    const timeMs = s.time_unix_ns / 1e6;
    const seen = new Set();
    for (const dev of s.devices || []) {
      const key = s.probe + '/' + dev.id;
      seen.add(key);
      let card = cards.get(key);
      if (!card) {
        card = new Card(key, s.probe, dev);
        cards.set(key, card);
        placeCards();
      }
      const errors = (s.errors || []).filter((e) => !e.device || e.device === dev.id);
      card.ingest(dev, timeMs, errors);
    }
    for (const card of cards.values()) {
      if (card.probe === s.probe && !seen.has(card.key)) card.present = false;
    }
    if (s.host) host = { probe: s.probe, sample: s.host, timeMs };
    sampleTimes.push(timeMs);
    while (sampleTimes.length && timeMs - sampleTimes[0] > 10000) sampleTimes.shift();
    dirty = true;
  }

  function placeCards() {
    // A MIG instance shares its GPU's index: it comes right after the GPU.
    const isMig = (c) => (c.dev && c.dev.parent ? 1 : 0);
    const sorted = [...cards.values()].sort((a, b) =>
      a.probe.localeCompare(b.probe) || a.index - b.index || isMig(a) - isMig(b) ||
      a.key.localeCompare(b.key));
    $('no-gpus').hidden = sorted.length > 0;
    $('cards').replaceChildren($('no-gpus'), ...sorted.map((c) => c.node));
    $('gpu-count').textContent = sorted.length ? '(' + sorted.length + ')' : '';
  }

  function render() {
    dirty = false;
    // Snapshots per second of sample time (a replayed history counts at the rate it was taken).
    const span = sampleTimes.length > 1 ? sampleTimes[sampleTimes.length - 1] - sampleTimes[0] : 0;
    $('rate').textContent = span > 0 ? ((sampleTimes.length - 1) * 1000 / span).toFixed(1) : '—';
    $('last-seq').textContent = lastSeq == null ? '—' : String(lastSeq);
    const nowMs = Date.now();
    for (const card of cards.values()) {
      card.render();
      card.draw(nowMs, windowMs);
    }
    renderHost();
  }

  function frame() {
    if (dirty) render();
    requestAnimationFrame(frame);
  }

  // ---------------------------------------------------------------------------------------
  // Connection: /ws with reconnect (backoff) and resume (subscribe since the last sequence)

  let ws = null;
  let attempts = 0;
  let retryTimer = null;

  function setConn(state, text) {
    $('conn').dataset.state = state;
    $('conn-text').textContent = text;
  }

  function showNotice(text) {
    const n = $('notice');
    n.textContent = text;
    n.hidden = !text;
  }

  function wsUrl() {
    const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const query = token ? '?token=' + encodeURIComponent(token) : '';
    return scheme + '//' + location.host + '/ws' + query;
  }

  function connect() {
    retryTimer = null;
    setConn('connecting', attempts ? 'reconnecting…' : 'connecting…');
    awaitingAck = true;
    const sock = new WebSocket(wsUrl());
    ws = sock;
    sock.onmessage = (ev) => {
      let msg;
      try {
        msg = JSON.parse(ev.data);
      } catch (e) {
        showNotice('The server sent a message that is not JSON: ' + e.message);
        return;
      }
      onMessage(sock, msg);
    };
    sock.onclose = (ev) => {
      if (ws !== sock) return;
      ws = null;
      attempts++;
      const base = Math.min(RECONNECT_MAX_MS, RECONNECT_INITIAL_MS * 2 ** (attempts - 1));
      const delay = Math.round(base * (0.8 + 0.4 * Math.random()));
      const why = ev.reason ? ' (' + ev.reason + ')' : ev.code === 1006 ? ' (connection lost)' : '';
      const until = Date.now() + delay;
      const tick = () => {
        if (ws) return;
        const s = Math.max(0, Math.ceil((until - Date.now()) / 1000));
        setConn('disconnected', 'disconnected' + why + ' — retrying in ' + s + ' s');
        if (Date.now() < until) setTimeout(tick, 250);
      };
      tick();
      retryTimer = setTimeout(connect, delay);
    };
  }

  function onMessage(sock, msg) {
    switch (msg.type) {
      case 'hello': {
        $('server-version').textContent = msg.server || '';
        // A different instance is a restarted server whose sequences start again at 1: our
        // cursor means nothing there, so take its whole history (charts keep their points).
        if (msg.instance && serverInstance && msg.instance !== serverInstance && lastSeq != null) {
          lastSeq = null;
        }
        if (msg.instance) serverInstance = msg.instance;
        // GPU events that happened before this connection (the server keeps the newest).
        gs.events.setInstance(msg.instance);
        gs.events.fetchRecent(token, () => { dirty = true; });
        // First connection: the whole history the server still holds fills the charts.
        // Later: resume after the last sequence received; the server replays what we missed.
        const since = lastSeq == null ? 0 : lastSeq;
        sock.send(JSON.stringify({ type: 'subscribe', since }));
        break;
      }
      case 'subscribed':
        awaitingAck = false;
        if (msg.since != null) lastSeq = msg.since;
        attempts = 0;
        setConn('connected', 'connected');
        showNotice('');
        break;
      case 'snapshot':
        if (awaitingAck) break;
        if (lastSeq != null && msg.sequence <= lastSeq) break;  // duplicate
        lastSeq = msg.sequence;
        ingestSnapshot(msg);
        break;
      case 'gap':
        if (awaitingAck) break;
        lastSeq = Math.max(lastSeq || 0, msg.after_sequence + msg.missed);
        showNotice('Missed ' + msg.missed + ' snapshot(s) after #' + msg.after_sequence + ': ' +
          msg.reason.replace(/_/g, ' ') + '.');
        break;
      case 'event':
        if (gs.events.add(msg)) dirty = true;
        break;
      case 'error':
        showNotice('Server: ' + msg.code + ': ' + msg.message);
        break;
      default:
        break;  // newer servers may send more
    }
  }

  // ---------------------------------------------------------------------------------------
  // Probe health and cost: /api/v1/stats

  const NO_SAMPLE = 'no sample completed yet';

  async function pollStats() {
    try {
      const headers = token ? { Authorization: 'Bearer ' + token } : {};
      const res = await fetch('/api/v1/stats', { headers, cache: 'no-store' });
      if (res.ok) renderStats(await res.json());
    } catch (e) {
      // The connection state already says the server is away.
    }
    setTimeout(pollStats, STATS_PERIOD_MS);
  }

  function renderStats(stats) {
    const rows = (stats.probes || []).map((p) => {
      const tr = document.createElement('tr');
      const td = (text, cls, title) => {
        const c = document.createElement('td');
        c.textContent = text;
        if (cls) c.className = cls;
        if (title) c.title = title;
        return c;
      };
      const interval = p.interval_ms != null ? p.interval_ms + ' ms' : '—';
      const why = p.reason || p.last_error || '';
      tr.append(
        td(p.probe),
        td(p.state, 'state-' + p.state),
        td(String(p.samples ?? '—'), 'num'),
        td(String(p.failures ?? '—'), 'num'),
        td(String(p.timeouts ?? '—'), 'num'),
        td(String(p.overruns ?? '—'), 'num'),
        td(interval, 'num'),
        td(fmtNs(p.latency_p50_ns), 'num', p.latency_p50_ns == null ? NO_SAMPLE : ''),
        td(fmtNs(p.latency_p99_ns), 'num', p.latency_p99_ns == null ? NO_SAMPLE : ''),
        td(String(p.devices ?? '—'), 'num'),
        td(why, 'wrap'));
      return tr;
    });
    $('probes').tBodies[0].replaceChildren(...rows);
    const s = stats.server;
    if (s) {
      $('server-stats').textContent = 'Server: ' + s.websocket_open + ' WebSocket, ' + s.tcp_open +
        ' TCP and ' + s.http_open + ' HTTP connections · ' + s.snapshots_sent +
        ' snapshots sent, ' + s.snapshots_dropped + ' dropped · ' + s.slow_clients_disconnected +
        ' slow clients disconnected · ' + s.serializations + ' serializations for ' +
        s.snapshots_received + ' snapshots';
    }
  }

  // ---------------------------------------------------------------------------------------

  $('window').addEventListener('change', (ev) => {
    windowMs = Number(ev.target.value) * 1000;
    dirty = true;
  });
  setInterval(() => { dirty = true; }, 1000);  // the time axis moves; staleness shows
  requestAnimationFrame(frame);
  connect();
  pollStats();
})();

