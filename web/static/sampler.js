// sampler.js: the sampler teaching page. It steps through one draw of a
// sample row that the server put into words and charts (the rejection
// sampler's rounds, the Gumbel-max race, or the inverse CDF), pins the
// step's token on its chart, keeps the step in the URL, and fetches
// another method, draw or seed from the teach API. It never computes a
// draw. It needs sampviz.js (window.sampviz), which loads first.
(function () {
  'use strict';

  // timed runs f and records how long it took as the performance measure
  // sampviz:NAME, as sampviz.js does.
  function timed(name, f) {
    const t0 = performance.now();
    try {
      return f();
    } finally {
      if (performance.measure) {
        try { performance.measure('sampviz:' + name, { start: t0, end: performance.now() }); } catch (e) { /* old browsers */ }
      }
    }
  }

  // setText is sampviz.js's.
  function setText(id, s) { window.sampviz.setText(id, s); }

  // markPoint pins marks (name, coord, color) on a chart's series.
  function markPoint(marks) {
    return {
      symbol: 'pin', symbolSize: 46,
      label: { show: true, fontSize: 10, formatter: function (p) { return p.name; } },
      data: (marks || []).map(function (m) { return { name: m.name, coord: m.coord, itemStyle: { color: m.color } }; }),
    };
  }

  // drawPinned draws a chart's options in el afresh, with marks pinned on
  // its series "p".
  function drawPinned(el, opt, marks) {
    const o = Object.assign({}, opt);
    o.series = (opt.series || []).map(function (s) {
      return s.id === 'p' ? Object.assign({}, s, { markPoint: markPoint(marks) }) : s;
    });
    window.sampviz.drawChart(el, o, true);
  }

  function initSampleTeach(view) {
    const sv = window.sampviz;
    const chartEl = document.getElementById('chart-sample-teach');
    const body = document.getElementById('sample-teach-body');
    const prev = document.getElementById('sample-teach-prev');
    const next = document.getElementById('sample-teach-next');
    const form = document.getElementById('sample-teach-form');
    const draws = {
      prev: document.getElementById('sample-teach-prev-draw'),
      next: document.getElementById('sample-teach-next-draw'),
    };
    let index = view.index;
    let pending = 0;

    function show(i) { timed('sample-teach-step', function () { showStep(i); }); }

    function showStep(i) {
      if (!view.items || !view.items.length) return;
      index = Math.min(Math.max(i, 0), view.items.length - 1);
      const it = view.items[index];
      setText('sample-teach-title', it.title);
      setText('sample-teach-what', it.what);
      if (body) {
        body.replaceChildren.apply(body, view.table.slice(0, it.rows).map(function (row, j) {
          const tr = document.createElement('tr');
          tr.className = 'row-' + ((view.classes || [])[j] || '');
          row.forEach(function (c) {
            const td = document.createElement('td');
            td.textContent = c;
            tr.appendChild(td);
          });
          return tr;
        }));
      }
      if (prev) { prev.href = view.items[Math.max(index - 1, 0)].url; prev.classList.toggle('disabled', index === 0); }
      if (next) { next.href = view.items[Math.min(index + 1, view.items.length - 1)].url; next.classList.toggle('disabled', index === view.items.length - 1); }
      window.history.replaceState(null, '', it.url);
      // The chart follows in a task of its own, so the words show at once
      // and a key held down never queues a backlog of charts.
      const mine = ++pending;
      setTimeout(function () {
        if (mine !== pending || !chartEl || !it.chart) return;
        timed('sample-teach-chart', function () { drawPinned(chartEl, it.chart, it.marks); });
      }, 0);
    }

    // apply swaps in another draw (another method, draw or seed).
    function apply(v) {
      view = v;
      setText('sample-teach-name', v.name);
      setText('sample-teach-draw', String(v.draw));
      setText('sample-teach-intro', v.intro);
      setText('sample-teach-params', v.params);
      setText('sample-teach-outcome', v.outcome);
      setText('sample-teach-kernel', v.kernel);
      const kernel = document.getElementById('sample-teach-kernel');
      if (kernel) kernel.className = 'kernel-' + v.match;
      const why = document.getElementById('sample-teach-why');
      if (why) {
        why.replaceChildren.apply(why, (v.why || []).map(function (s) {
          const p = document.createElement('p');
          p.textContent = s;
          return p;
        }));
      }
      const head = document.querySelector('table.sample-steps thead tr');
      if (head) {
        head.replaceChildren.apply(head, (v.header || []).map(function (h) {
          const th = document.createElement('th');
          th.textContent = h;
          return th;
        }));
      }
      (v.methods || []).forEach(function (m) {
        const a = document.querySelector('a[data-method="' + m.method + '"]');
        if (!a) return;
        a.href = m.url;
        a.classList.toggle('active', m.active);
      });
      [['prev', v.prev_draw_url], ['next', v.next_draw_url]].forEach(function (p) {
        const a = draws[p[0]];
        if (!a) return;
        a.href = p[1] || '';
        a.classList.toggle('disabled', !p[1]);
      });
      if (form) {
        form.querySelector('[name="method"]').value = v.method;
        form.querySelector('[name="draw"]').value = String(v.draw);
        form.querySelector('[name="seed"]').value = v.seed;
      }
      if (v.invalid) {
        setText('sample-teach-what', v.invalid);
        return;
      }
      show(v.index);
    }

    const load = sv.teachLoader('sample-teach-what', 'The server could not show this draw.', apply);

    sv.teachControls({
      links: [draws.prev, draws.next].concat(Array.prototype.slice.call(document.querySelectorAll('a[data-method]'))), form: form, load: load, prev: prev, next: next,
      left: function () { show(index - 1); }, right: function () { show(index + 1); },
    });
    show(index);
  }

  function start() {
    if (!window.sampviz || !window.echarts) return;
    const teach = document.getElementById('sample-teach-data');
    if (teach) initSampleTeach(JSON.parse(teach.textContent));
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', start);
  } else {
    start();
  }
})();
