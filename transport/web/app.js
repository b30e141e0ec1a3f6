// gpustream dashboard: live snapshots over /ws, probe health from /api/v1/stats.
// Plain JavaScript, no third-party code. The server embeds this file into the page it serves.
'use strict';

(() => {
  const HISTORY_POINTS = 3600;       // per series (15 min at 4 Hz)
  const STATS_PERIOD_MS = 2000;      // /api/v1/stats poll
  const RECONNECT_INITIAL_MS = 500;
  const RECONNECT_MAX_MS = 10000;
  const STALE_MIN_MS = 5000;

  const params = new URLSearchParams(location.search);
  const token = params.get('token');

  const REASONS = {
    unsupported: 'not provided by this device or source',
    no_permission: 'the source refused (permissions)',
    not_yet_seeded: 'a rate whose first sample only seeded the counters',
    suspended: 'the device is suspended and was not woken',
    tool_failed: 'the tool or library call failed for this sample',
    stale: 'the source stopped producing fresh values',
    lost: 'the device vanished',
    not_collected: 'not collected by the probe',
  };

  const $ = (id) => document.getElementById(id);

  // ---------------------------------------------------------------------------------------
  // Formatting

  function fmtBytes(b) {
    if (b == null) return '—';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    let v = b;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (v >= 100 || i === 0 ? v.toFixed(0) : v.toFixed(1)) + ' ' + units[i];
  }
  function fmtNum(v, digits) { return v == null ? '—' : v.toFixed(digits); }
  function fmtNs(ns) {
    if (ns == null) return '—';
    if (ns < 1e3) return ns + ' ns';
    if (ns < 1e6) return (ns / 1e3).toFixed(1) + ' µs';
    if (ns < 1e9) return (ns / 1e6).toFixed(1) + ' ms';
    return (ns / 1e9).toFixed(2) + ' s';
  }
  function reasonText(reason) { return REASONS[reason] || reason || 'unknown'; }

  /// A metric of a device in the snapshot JSON: {value, source} or {value: null, reason}.
  function metric(dev, name) {
    if (dev.metrics && Object.prototype.hasOwnProperty.call(dev.metrics, name)) {
      return { value: dev.metrics[name], source: (dev.sources || {})[name] };
    }
    return {
      value: null,
      reason: (dev.absent || {})[name] || 'not_collected',
      source: (dev.absent_sources || {})[name],
    };
  }

  function absentTitle(name, m) {
    return name + ': absent — ' + reasonText(m.reason) + (m.source ? ' (source: ' + m.source + ')' : '');
  }

  /// Sets an element to a value (with unit) or to "—" with the reason in its tooltip.
  function setMetric(el, name, m, format, unit, extra) {
    el.replaceChildren();
    if (m.value == null) {
      el.textContent = '—';
      el.title = absentTitle(name, m);
      el.classList.add('absent');
      return;
    }
    el.classList.remove('absent');
    el.title = name + ' (source: ' + (m.source || 'unknown') + ')';
    el.append(format(m.value));
    if (unit) {
      const u = document.createElement('span');
      u.className = 'unit';
      u.textContent = unit;
      el.append(u);
    }
    if (extra) {
      const x = document.createElement('span');
      x.className = 'extra';
      x.textContent = extra;
      el.append(x);
    }
  }

  // ---------------------------------------------------------------------------------------
  // Series (ring buffers) and charts (canvas)

  class Series {
    constructor(capacity) {
      this.t = new Float64Array(capacity);  // ms since the epoch
      this.v = new Float64Array(capacity);  // NaN: absent
      this.start = 0;
      this.size = 0;
    }
    push(t, v) {
      const cap = this.t.length;
      if (this.size > 0 && t < this.at(this.size - 1).t) return;  // out of order: drop
      const i = (this.start + this.size) % cap;
      this.t[i] = t;
      this.v[i] = v == null ? NaN : v;
      if (this.size < cap) this.size++; else this.start = (this.start + 1) % cap;
    }
    at(k) {
      const i = (this.start + k) % this.t.length;
      return { t: this.t[i], v: this.v[i] };
    }
  }

  /// A line chart of one series over the last `windowMs`, with a fixed or automatic range.
  function drawChart(canvas, series, opts, nowMs, windowMs) {
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth;
    const h = canvas.clientHeight;
    if (w === 0 || h === 0) return;
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(h * dpr);
    }
    const ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);

    const t0 = nowMs - windowMs;
    let lo = opts.min;
    let hi = opts.max;
    if (lo == null || hi == null) {
      let mn = Infinity;
      let mx = -Infinity;
      for (let k = 0; k < series.size; k++) {
        const p = series.at(k);
        if (p.t < t0 || Number.isNaN(p.v)) continue;
        mn = Math.min(mn, p.v);
        mx = Math.max(mx, p.v);
      }
      if (mn === Infinity) { mn = 0; mx = 1; }
      if (lo == null) lo = Math.min(opts.floor != null ? opts.floor : mn, mn);
      if (hi == null) hi = mx + (mx - lo) * 0.1;
      if (hi <= lo) hi = lo + 1;
    }
    const padTop = 4;
    const padBottom = 12;
    const plotH = h - padTop - padBottom;
    const x = (t) => ((t - t0) / windowMs) * w;
    const y = (v) => padTop + plotH - ((v - lo) / (hi - lo)) * plotH;

    // Grid and labels.
    ctx.strokeStyle = 'rgba(139,149,163,0.18)';
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (const f of [0, 0.5, 1]) {
      const yy = Math.round(padTop + plotH * f) + 0.5;
      ctx.moveTo(0, yy);
      ctx.lineTo(w, yy);
    }
    ctx.stroke();
    ctx.fillStyle = 'rgba(139,149,163,0.9)';
    ctx.font = '10px system-ui, sans-serif';
    ctx.textBaseline = 'top';
    ctx.fillText(opts.label(hi), 2, padTop);
    ctx.textBaseline = 'bottom';
    ctx.fillText(opts.label(lo), 2, padTop + plotH);
    ctx.fillText('−' + Math.round(windowMs / 60000) + ' min', 2, h);
    const nowText = 'now';
    ctx.fillText(nowText, w - ctx.measureText(nowText).width - 2, h);

    // An optional reference line (e.g. the power limit).
    if (opts.ref != null && opts.ref >= lo && opts.ref <= hi) {
      ctx.strokeStyle = 'rgba(255,107,107,0.5)';
      ctx.setLineDash([4, 3]);
      ctx.beginPath();
      ctx.moveTo(0, y(opts.ref));
      ctx.lineTo(w, y(opts.ref));
      ctx.stroke();
      ctx.setLineDash([]);
    }

    // The line; absent values break it.
    ctx.strokeStyle = opts.color;
    ctx.fillStyle = opts.color + '22';
    ctx.lineWidth = 1.5;
    let run = [];
    const flush = () => {
      if (run.length === 0) return;
      ctx.beginPath();
      ctx.moveTo(run[0][0], run[0][1]);
      for (const [px, py] of run) ctx.lineTo(px, py);
      ctx.stroke();
      if (run.length > 1) {
        ctx.lineTo(run[run.length - 1][0], padTop + plotH);
        ctx.lineTo(run[0][0], padTop + plotH);
        ctx.closePath();
        ctx.fill();
      }
      run = [];
    };
    for (let k = 0; k < series.size; k++) {
      const p = series.at(k);
      if (p.t < t0 - windowMs * 0.02) continue;
      if (Number.isNaN(p.v)) { flush(); continue; }
      run.push([x(p.t), y(Math.min(Math.max(p.v, lo), hi))]);
    }
    flush();
  }

  // ---------------------------------------------------------------------------------------
  // GPU cards

  const cards = new Map();  // "probe/device id" → Card
  let windowMs = 300000;

  class Card {
    constructor(key, probe, dev) {
      this.key = key;
      this.probe = probe;
      this.index = dev.index;
      this.series = {
        utilization: new Series(HISTORY_POINTS),
        memory: new Series(HISTORY_POINTS),
        power: new Series(HISTORY_POINTS),
        temperature: new Series(HISTORY_POINTS),
      };
      this.dev = dev;
      this.updates = 0;
      this.lastWall = 0;       // performance.now() of the last update
      this.lastTime = 0;       // sample time of the last update (ms)
      this.intervalMs = 1000;  // estimated sampling interval
      this.present = true;     // in the probe's last snapshot
      this.errors = [];
      const node = $('card-template').content.firstElementChild.cloneNode(true);
      node.dataset.device = dev.id;
      node.dataset.probe = probe;
      this.node = node;
      this.el = {
        name: node.querySelector('.name'),
        sub: node.querySelector('.sub'),
        badges: node.querySelector('.badges'),
        details: node.querySelector('.details'),
        errors: node.querySelector('.errors'),
        procs: node.querySelector('.procs tbody'),
        tiles: {},
      };
      for (const tile of node.querySelectorAll('.tile')) {
        this.el.tiles[tile.dataset.metric] = {
          value: tile.querySelector('.value'),
          canvas: tile.querySelector('canvas'),
        };
      }
    }

    ingest(dev, timeMs, errors) {
      if (this.lastTime > 0 && timeMs > this.lastTime) {
        this.intervalMs = 0.8 * this.intervalMs + 0.2 * (timeMs - this.lastTime);
      }
      this.dev = dev;
      this.lastTime = timeMs;
      this.lastWall = performance.now();
      this.present = true;
      this.errors = errors;
      this.updates++;
      const m = (name) => metric(dev, name).value;
      this.series.utilization.push(timeMs, m('utilization_percent'));
      this.series.memory.push(timeMs, m('memory_used_bytes'));
      this.series.power.push(timeMs, m('power_watts'));
      this.series.temperature.push(timeMs, m('temperature_celsius'));
    }

    stale() {
      return performance.now() - this.lastWall > Math.max(STALE_MIN_MS, 3 * this.intervalMs);
    }

    render() {
      const dev = this.dev;
      const el = this.el;
      this.node.dataset.updates = String(this.updates);
      el.name.textContent = dev.name || dev.id;
      el.sub.textContent = [dev.vendor, 'probe ' + this.probe, dev.pci_bus_id, dev.id]
        .filter(Boolean).join(' · ');

      const badges = [];
      if (dev.power_state && dev.power_state !== 'unknown') {
        badges.push([dev.power_state, dev.power_state === 'active' ? 'good' : 'warn']);
      }
      for (const r of dev.throttle_reasons || []) badges.push(['throttle: ' + r, 'warn']);
      if (!this.present) badges.push(['not in the last sample', 'bad']);
      else if (this.stale()) badges.push(['stale', 'warn']);
      this.node.classList.toggle('stale', !this.present || this.stale());
      el.badges.replaceChildren(...badges.map(([text, cls]) => {
        const b = document.createElement('span');
        b.className = 'badge ' + cls;
        b.textContent = text;
        return b;
      }));

      const util = metric(dev, 'utilization_percent');
      setMetric(el.tiles.utilization.value, 'utilization_percent', util, (v) => v.toFixed(0), '%');
      const used = metric(dev, 'memory_used_bytes');
      const total = metric(dev, 'memory_total_bytes');
      setMetric(el.tiles.memory.value, 'memory_used_bytes', used, fmtBytes, '',
        total.value != null ? 'of ' + fmtBytes(total.value) +
          (used.value != null && total.value > 0
            ? ' (' + (100 * used.value / total.value).toFixed(0) + ' %)' : '') : '');
      const power = metric(dev, 'power_watts');
      const limit = metric(dev, 'power_limit_watts');
      setMetric(el.tiles.power.value, 'power_watts', power, (v) => v.toFixed(1), 'W',
        limit.value != null ? 'limit ' + limit.value.toFixed(0) + ' W' : '');
      const temp = metric(dev, 'temperature_celsius');
      setMetric(el.tiles.temperature.value, 'temperature_celsius', temp, (v) => v.toFixed(0), '°C');

      this.renderDetails(dev);
      el.errors.replaceChildren(...this.errors.map((e) => {
        const d = document.createElement('div');
        d.textContent = '⚠ ' + e.code + ': ' + e.message;
        return d;
      }));
      this.renderProcesses(dev.processes || []);
    }

    renderDetails(dev) {
      const rows = [];
      const clocks = ['clock_graphics_mhz', 'clock_sm_mhz', 'clock_memory_mhz'];
      rows.push(['clocks', clocks.map((n) => [n.replace('clock_', '').replace('_mhz', ''), n])
        .map(([label, n]) => [label, metric(dev, n), (v) => v.toFixed(0) + ' MHz', n])]);
      rows.push(['fan', [['', metric(dev, 'fan_percent'), (v) => v.toFixed(0) + ' %', 'fan_percent']]]);
      const energyUnit = dev.energy_kind === 'integrated' ? ' (integrated)' : '';
      rows.push(['energy', [['', metric(dev, 'energy_joules'),
        (v) => (v / 1000).toFixed(1) + ' kJ' + energyUnit, 'energy_joules']]]);
      rows.push(['power avg', [['', metric(dev, 'power_average_watts'),
        (v) => v.toFixed(1) + ' W', 'power_average_watts']]]);
      const frag = document.createDocumentFragment();
      for (const [label, parts] of rows) {
        const dt = document.createElement('dt');
        dt.textContent = label;
        const dd = document.createElement('dd');
        parts.forEach(([name, m, fmt, metricName], i) => {
          if (i > 0) dd.append('  ·  ');
          if (name) dd.append(name + ' ');
          const s = document.createElement('span');
          if (m.value == null) {
            s.textContent = '—';
            s.className = 'absent';
            s.title = absentTitle(metricName, m);
          } else {
            s.textContent = fmt(m.value);
            s.title = metricName + ' (source: ' + (m.source || 'unknown') + ')';
          }
          dd.append(s);
        });
        frag.append(dt, dd);
      }
      if ((dev.engines || []).length > 0) {
        const dt = document.createElement('dt');
        dt.textContent = 'engines';
        const dd = document.createElement('dd');
        dev.engines.forEach((e, i) => {
          if (i > 0) dd.append('  ·  ');
          dd.append(e.name + ' ');
          const s = document.createElement('span');
          if (e.utilization_percent == null) {
            s.textContent = '—';
            s.className = 'absent';
            s.title = e.name + ': absent — ' + reasonText(e.absent || 'not_collected');
          } else {
            s.textContent = e.utilization_percent.toFixed(0) + ' %';
            s.title = e.name + ' (source: ' + (e.source || 'unknown') + ')';
          }
          dd.append(s);
        });
        frag.append(dt, dd);
      }
      this.el.details.replaceChildren(frag);
    }

    renderProcesses(procs) {
      const sorted = procs.slice().sort((a, b) =>
        (b.gpu_memory_bytes || 0) - (a.gpu_memory_bytes || 0) || a.pid - b.pid);
      const cell = (text, cls, title) => {
        const td = document.createElement('td');
        td.textContent = text;
        if (cls) td.className = cls;
        if (title) td.title = title;
        return td;
      };
      const nullable = (v, fmt, what) => (v == null
        ? cell('—', 'num absent', what + ': not reported by the source')
        : cell(fmt(v), 'num'));
      const rows = sorted.map((p) => {
        const tr = document.createElement('tr');
        tr.append(
          cell(String(p.pid), 'num'),
          cell(p.name || '?', 'name', (p.name || '') + (p.container_id ? ' · container ' + p.container_id : '')),
          nullable(p.gpu_memory_bytes, fmtBytes, 'GPU memory'),
          nullable(p.gpu_utilization_percent, (v) => v.toFixed(0) + ' %' +
            (p.per_process_exact === false ? '*' : ''), 'GPU utilization'),
          nullable(p.host_rss_bytes, fmtBytes, 'host RSS'));
        return tr;
      });
      if (rows.length === 0) {
        const tr = document.createElement('tr');
        const td = cell('no processes', 'muted');
        td.colSpan = 5;
        tr.append(td);
        rows.push(tr);
      }
      this.el.procs.replaceChildren(...rows);
    }

    draw(nowMs) {
      const dev = this.dev;
      const total = metric(dev, 'memory_total_bytes').value;
      const limit = metric(dev, 'power_limit_watts').value;
      const t = this.el.tiles;
      drawChart(t.utilization.canvas, this.series.utilization,
        { min: 0, max: 100, color: '#4fb3ff', label: (v) => v.toFixed(0) + ' %' }, nowMs, windowMs);
      drawChart(t.memory.canvas, this.series.memory,
        { min: 0, max: total != null ? total : null, floor: 0, color: '#b48cff', label: fmtBytes },
        nowMs, windowMs);
      drawChart(t.power.canvas, this.series.power,
        { min: 0, max: limit != null ? limit * 1.05 : null, floor: 0, ref: limit, color: '#f5b942',
          label: (v) => v.toFixed(0) + ' W' }, nowMs, windowMs);
      drawChart(t.temperature.canvas, this.series.temperature,
        { min: null, max: null, floor: 20, color: '#ff7f6b', label: (v) => v.toFixed(0) + ' °C' },
        nowMs, windowMs);
    }
  }

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
    for (const p of h.processes || []) row('pid ' + p.pid + ' ' + p.name + ' RSS', p.rss_bytes, fmtBytes);
    frag.append(dl);
    $('host').replaceChildren(frag);
  }

  // ---------------------------------------------------------------------------------------
  // Snapshots

  let lastSeq = null;          // resume cursor: last sequence received (or skipped by a gap)
  let awaitingAck = true;      // snapshots before the subscribe's ack are replayed after it
  const arrivals = [];         // performance.now() of recent snapshots, for the rate
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
    arrivals.push(performance.now());
    dirty = true;
  }

  function placeCards() {
    const sorted = [...cards.values()].sort((a, b) =>
      a.probe.localeCompare(b.probe) || a.index - b.index || a.key.localeCompare(b.key));
    $('no-gpus').hidden = sorted.length > 0;
    $('cards').replaceChildren($('no-gpus'), ...sorted.map((c) => c.node));
    $('gpu-count').textContent = sorted.length ? '(' + sorted.length + ')' : '';
  }

  function render() {
    dirty = false;
    const now = performance.now();
    while (arrivals.length && now - arrivals[0] > 10000) arrivals.shift();
    $('rate').textContent = arrivals.length ? (arrivals.length / 10).toFixed(1) : '0';
    $('last-seq').textContent = lastSeq == null ? '—' : String(lastSeq);
    const nowMs = Date.now();
    for (const card of cards.values()) {
      card.render();
      card.draw(nowMs);
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
    return scheme + '//' + location.host + '/ws' + (token ? '?token=' + encodeURIComponent(token) : '');
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
      case 'error':
        showNotice('Server: ' + msg.code + ': ' + msg.message);
        break;
      default:
        break;  // newer servers may send more
    }
  }

  // ---------------------------------------------------------------------------------------
  // Probe health and cost: /api/v1/stats

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
        td(fmtNs(p.latency_p50_ns), 'num', p.latency_p50_ns == null ? 'no sample completed yet' : ''),
        td(fmtNs(p.latency_p99_ns), 'num', p.latency_p99_ns == null ? 'no sample completed yet' : ''),
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
