// gpustream dashboard — formatting and the metric helpers.
// Plain JavaScript, no third-party code; transport/web/embed.cmake inlines the files of this
// folder into the page the server serves.
'use strict';

(() => {
  const gs = (window.gpustream = window.gpustream || {});

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

  function fmtBytes(b) {
    if (b == null) return '—';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    let v = b;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (v >= 100 || i === 0 ? v.toFixed(0) : v.toFixed(1)) + ' ' + units[i];
  }
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
    const source = m.source ? ' (source: ' + m.source + ')' : '';
    return name + ': absent — ' + reasonText(m.reason) + source;
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

  gs.format = { fmtBytes, fmtNs, reasonText, metric, absentTitle, setMetric };
})();
