// gpustream dashboard — one card per GPU: values, charts, details, processes.
// Plain JavaScript, no third-party code; transport/web/embed.cmake inlines the files of this
// folder into the page the server serves.
'use strict';

(() => {
  const gs = (window.gpustream = window.gpustream || {});
  const { fmtBytes, reasonText, metric, absentTitle, setMetric } = gs.format;
  const { Series, drawChart } = gs.chart;

  const HISTORY_POINTS = 3600;  // per series (15 min at 4 Hz)
  const STALE_MIN_MS = 5000;    // a card is stale after max(this, 3 sampling intervals)

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
      const template = document.getElementById('card-template');
      const node = template.content.firstElementChild.cloneNode(true);
      node.dataset.device = dev.id;
      node.dataset.probe = probe;
      // A MIG instance: shown under its physical GPU (app.js orders the cards).
      if (dev.parent) {
        node.classList.add('mig-instance');
        node.dataset.parent = dev.parent;
      }
      this.node = node;
      this.el = {
        name: node.querySelector('.name'),
        sub: node.querySelector('.sub'),
        badges: node.querySelector('.badges'),
        details: node.querySelector('.details'),
        errors: node.querySelector('.errors'),
        events: node.querySelector('.events'),
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
      el.sub.textContent = [dev.vendor, 'probe ' + this.probe, dev.pci_bus_id, dev.id,
        dev.parent ? 'MIG instance of ' + dev.parent : '']
        .filter(Boolean).join(' · ');

      const badges = [];
      if (dev.power_state && dev.power_state !== 'unknown') {
        badges.push([dev.power_state, dev.power_state === 'active' ? 'good' : 'warn']);
      }
      if (dev.mig) {
        badges.push(['MIG ' + dev.mig.profile + ' · GI ' + dev.mig.gpu_instance_id + ' · CI ' +
          dev.mig.compute_instance_id, 'good']);
      }
      if (dev.partitioned) badges.push(['MIG mode: partitioned', 'good']);
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
      setMetric(el.tiles.temperature.value, 'temperature_celsius', temp, (v) => v.toFixed(0),
        '°C');

      this.renderDetails(dev);
      el.errors.replaceChildren(...this.errors.map((e) => {
        const d = document.createElement('div');
        d.textContent = '⚠ ' + e.code + ': ' + e.message;
        return d;
      }));
      if (gs.events) gs.events.renderCard(this.key, el.events);
      this.renderProcesses(dev.processes || []);
    }

    renderDetails(dev) {
      const rows = [];
      const clocks = ['clock_graphics_mhz', 'clock_sm_mhz', 'clock_memory_mhz'];
      rows.push(['clocks', clocks.map((n) => [n.replace('clock_', '').replace('_mhz', ''), n])
        .map(([label, n]) => [label, metric(dev, n), (v) => v.toFixed(0) + ' MHz', n])]);
      rows.push(['fan',
        [['', metric(dev, 'fan_percent'), (v) => v.toFixed(0) + ' %', 'fan_percent']]]);
      const energyUnit = dev.energy_kind === 'integrated' ? ' (integrated)' : '';
      rows.push(['energy', [['', metric(dev, 'energy_joules'),
        (v) => (v / 1000).toFixed(1) + ' kJ' + energyUnit, 'energy_joules']]]);
      rows.push(['power avg', [['', metric(dev, 'power_average_watts'),
        (v) => v.toFixed(1) + ' W', 'power_average_watts']]]);
      // Activity (NVML GPM; AMD gpu_metrics): only the figures the device reports, and no row
      // when it reports none (most GPUs have a few of the eight at most).
      const pct = (v) => v.toFixed(0) + ' %';
      const activity = [['graphics', 'graphics_activity_percent'], ['SM', 'sm_activity_percent'],
        ['SM occupancy', 'sm_occupancy_percent'], ['tensor', 'tensor_activity_percent'],
        ['DRAM', 'dram_activity_percent'], ['FP64', 'fp64_activity_percent'],
        ['FP32', 'fp32_activity_percent'], ['FP16', 'fp16_activity_percent']]
        .map(([name, n]) => [name, metric(dev, n), pct, n]).filter(([, m]) => m.value != null);
      if (activity.length > 0) rows.push(['activity', activity]);
      // Interconnect and health: a row only when the device reports some of it.
      const rate = (v) => fmtBytes(v) + '/s';
      const count = (v) => v.toFixed(0);
      const flag = (v) => (v ? 'yes' : 'no');
      const optional = [
        ['pcie', [['gen', 'pcie_link_generation', count], ['of', 'pcie_link_generation_max', count],
          ['width x', 'pcie_link_width', count], ['of x', 'pcie_link_width_max', count],
          ['rx', 'pcie_rx_bytes_per_second', rate], ['tx', 'pcie_tx_bytes_per_second', rate]]],
        ['nvlink', [['rx', 'nvlink_rx_bytes_per_second', rate],
          ['tx', 'nvlink_tx_bytes_per_second', rate]]],
        ['ecc volatile', [['corrected', 'ecc_corrected_volatile', count],
          ['uncorrected', 'ecc_uncorrected_volatile', count]]],
        ['ecc aggregate', [['corrected', 'ecc_corrected_aggregate', count],
          ['uncorrected', 'ecc_uncorrected_aggregate', count]]],
        ['retired pages', [['single-bit', 'retired_pages_single_bit', count],
          ['double-bit', 'retired_pages_double_bit', count],
          ['pending', 'retired_pages_pending', flag]]],
        ['remapped rows', [['corrected', 'remapped_rows_corrected', count],
          ['uncorrected', 'remapped_rows_uncorrected', count],
          ['pending', 'remapped_rows_pending', flag], ['failed', 'remapped_rows_failed', flag]]],
      ];
      for (const [label, parts] of optional) {
        const ms = parts.map(([name, n, fmt]) => [name, metric(dev, n), fmt, n]);
        if (ms.some(([, m]) => m.value != null)) rows.push([label, ms]);
      }
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
      // The process's container (docs/protocol.md, "Containers"), for the name's tooltip.
      const containerText = (p) => {
        const c = p.container;
        if (!c) return '';
        let t = ' · ' + (c.runtime || 'container') + (c.id ? ' ' + c.id.slice(0, 12) : '');
        if (c.pod_uid) t += ' · pod ' + c.pod_uid + (c.qos ? ' (' + c.qos + ')' : '');
        return t;
      };
      const rows = sorted.map((p) => {
        const tr = document.createElement('tr');
        tr.append(
          cell(String(p.pid), 'num'),
          cell(p.name || '?', 'name',
            (p.name || '') + containerText(p)),
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

    draw(nowMs, windowMs) {
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

  gs.Card = Card;
})();
