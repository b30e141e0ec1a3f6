// gpustream dashboard — ring buffers of samples and canvas line charts.
// Plain JavaScript, no third-party code; transport/web/embed.cmake inlines the files of this
// folder into the page the server serves.
'use strict';

(() => {
  const gs = (window.gpustream = window.gpustream || {});

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

    // Grid.
    ctx.strokeStyle = 'rgba(139,149,163,0.18)';
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (const f of [0, 0.5, 1]) {
      const yy = Math.round(padTop + plotH * f) + 0.5;
      ctx.moveTo(0, yy);
      ctx.lineTo(w, yy);
    }
    ctx.stroke();

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

    // Labels last, on a backing so that the line does not run through them.
    ctx.font = '10px system-ui, sans-serif';
    ctx.textBaseline = 'alphabetic';
    const text = (t, x0, yBottom) => {
      const tw = ctx.measureText(t).width;
      ctx.fillStyle = 'rgba(29,35,43,0.75)';
      ctx.fillRect(x0 - 1, yBottom - 10, tw + 2, 11);
      ctx.fillStyle = 'rgba(139,149,163,0.95)';
      ctx.fillText(t, x0, yBottom - 1);
    };
    text(opts.label(hi), 2, padTop + 10);
    text(opts.label(lo), 2, padTop + plotH);
    text('−' + Math.round(windowMs / 60000) + ' min', 2, h);
    const nowText = 'now';
    text(nowText, w - ctx.measureText(nowText).width - 2, h);
  }

  gs.chart = { Series, drawChart };
})();
