// tree.js: the draft tree of a spec_tree_verify row and the tree teaching
// page. It draws the tree from the ECharts options the server built,
// recolours it, highlights on it the accepted path of the trace's step, and
// swaps the steps the server put into words, keeping the step in the URL.
// It never judges anything. It needs sampviz.js (window.sampviz), which
// loads first.
(function () {
  'use strict';

  const amber = '#f08c00';
  const red = '#e03131';

  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c];
    });
  }

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

  // stages returns a function that runs its tasks after the current one,
  // one per main-thread task, in order, dropping the tasks of an earlier
  // call not yet run: a step's words show at once, its charts follow, and a
  // key held down never queues a backlog of charts.
  function stages() {
    let gen = 0;
    return function (tasks) {
      const mine = ++gen;
      (function next(i) {
        if (i >= tasks.length || mine !== gen) return;
        setTimeout(function () {
          if (mine !== gen) return;
          tasks[i]();
          next(i + 1);
        }, 0);
      })(0);
    };
  }

  // setText is sampviz.js's.
  function setText(id, s) { window.sampviz.setText(id, s); }

  // withParam returns url with its query parameter name set to value
  // (removed when value is '').
  function withParam(url, name, value) {
    const u = new URL(url, window.location.href);
    if (value === '') u.searchParams.delete(name); else u.searchParams.set(name, value);
    return u.pathname + u.search;
  }

  // markPoint pins marks (name, coord, color) on a bar chart's series.
  function markPoint(marks) {
    return {
      symbol: 'pin', symbolSize: 46,
      label: { show: true, fontSize: 10, formatter: function (p) { return p.name; } },
      data: (marks || []).map(function (m) { return { name: m.name, coord: m.coord, itemStyle: { color: m.color } }; }),
    };
  }

  // drawPinned draws a bar chart's options in el afresh with marks pinned
  // on its series p, in one drawing.
  function drawPinned(el, opt, marks) {
    const o = Object.assign({}, opt);
    o.series = (opt.series || []).map(function (s) {
      return s.id === 'p' ? Object.assign({}, s, { markPoint: markPoint(marks) }) : s;
    });
    timed('tree-pin', function () { window.sampviz.drawChart(el, o, true); });
  }

  // pin moves the pins of a chart already drawn.
  function pin(chart, marks) {
    timed('tree-pin', function () { chart.setOption({ series: [{ id: 'p', markPoint: markPoint(marks) }] }); });
  }

  // treeOption adds what JSON cannot carry to the tree's options: the node
  // labels, edge labels and tooltips read the fields the server wrote.
  function treeOption(opt) {
    const s = opt.series[0];
    s.label = Object.assign({}, s.label, { formatter: function (p) { return p.data.text || ''; } });
    s.edgeLabel = Object.assign({}, s.edgeLabel, { formatter: function (p) { return p.data.text || ''; } });
    opt.tooltip = Object.assign({}, opt.tooltip, {
      formatter: function (p) {
        if (p.dataType === 'edge') return 'node ' + p.data.node + ': ' + esc(p.data.text);
        return esc(p.data.tip || '').replace(/\n/g, '<br>');
      },
    });
    return opt;
  }

  // treePainter draws the tree in el and returns how to repaint it: in a
  // colouring (setMode) and with a step's path, rejected children and
  // current node outlined (setStep).
  function treePainter(el, script) {
    const sv = window.sampviz;
    const opt = treeOption(script.chart);
    const nodes = opt.series[0].data;
    const links = opt.series[0].links;
    sv.drawChart(el, opt, true);
    const chart = sv.chartFor(el);
    let mode = script.color;
    let step = null;

    function paint() {
      if (!chart) return;
      const colors = script.modes[mode];
      const onPath = new Set(step ? step.path : []);
      const rejected = new Set(step ? step.rejected : []);
      const here = step ? (step.child >= 0 ? step.child : step.node) : -1;
      const data = nodes.map(function (n, i) {
        const d = Object.assign({}, n);
        const style = Object.assign({}, n.itemStyle, { color: colors.fill[i] });
        if (onPath.has(n.node)) { style.borderColor = amber; style.borderWidth = 3; }
        if (rejected.has(n.node)) { style.borderColor = red; style.borderWidth = 3; }
        if (n.node === here) { style.borderType = 'dashed'; style.borderWidth = 4; style.shadowBlur = 10; style.shadowColor = 'rgba(240,140,0,0.6)'; }
        d.itemStyle = style;
        d.label = Object.assign({}, n.label, { color: colors.text[i] });
        return d;
      });
      const lk = links.map(function (l) {
        const d = Object.assign({}, l);
        if (onPath.has(l.node)) d.lineStyle = { color: amber, width: 4, opacity: 1 };
        else if (rejected.has(l.node)) d.lineStyle = { color: red, width: 1.5, type: 'dashed', opacity: 1 };
        return d;
      });
      timed('tree-paint', function () { chart.setOption({ series: [{ id: 'tree', data: data, links: lk }] }); });
    }

    return {
      setMode: function (m) { if (script.modes[m]) { mode = m; paint(); } },
      setStep: function (s) { step = s; paint(); },
      mode: function () { return mode; },
    };
  }

  // ---- row page -------------------------------------------------------------

  // initRowTree draws a tree row's tree, switches its colouring, and steps
  // through its trace.
  function initRowTree(script) {
    const sv = window.sampviz;
    const el = document.querySelector('[data-chart="tree"]');
    if (!el || !script.chart) return;
    const painter = treePainter(el, script);
    const tr = script.trace;
    let index = tr ? tr.index : 0;

    // The colouring: in place, its legend follows, and the URL keeps it.
    function legend(m) {
      const l = script.legends[m];
      if (!l) return;
      const g = document.getElementById('tree-gradient');
      if (g) g.style.background = l.gradient;
      const ticks = document.getElementById('tree-ticks');
      if (ticks) {
        ticks.replaceChildren.apply(ticks, l.ticks.map(function (t) {
          const s = document.createElement('span');
          s.textContent = t;
          return s;
        }));
      }
      setText('tree-legend-title', l.title);
    }
    document.querySelectorAll('[data-color]').forEach(function (a) {
      a.addEventListener('click', function (e) {
        e.preventDefault();
        const m = a.dataset.color;
        painter.setMode(m);
        document.querySelectorAll('[data-color]').forEach(function (b) { b.classList.toggle('active', b === a); });
        legend(m);
        const here = window.location.pathname + window.location.search;
        window.history.replaceState(null, '', withParam(here, 'color', m === 'accept' ? '' : m));
      });
    });

    if (!tr || !tr.items.length) return;
    const n = tr.items.length;
    const prev = document.getElementById('tree-prev');
    const next = document.getElementById('tree-next');
    const cells = document.getElementById('tree-cells');
    const nodeEl = document.getElementById('chart-tree-node');
    const teach = document.getElementById('tree-teach-link');
    const charts = stages();
    let shownNode = -1;

    function show(i) { timed('tree-step', function () { showStep(i); }); }

    function showStep(i) {
      index = ((i % n) + n) % n;
      const it = tr.items[index];
      setText('tree-title', it.title);
      setText('tree-say', it.say);
      cells.replaceChildren.apply(cells, it.cells.map(function (c) {
        const td = document.createElement('td');
        td.textContent = c;
        return td;
      }));
      cells.className = 'outcome-' + it.outcome;
      const color = painter.mode() === 'accept' ? '' : painter.mode();
      prev.href = withParam(tr.items[(index - 1 + n) % n].url, 'color', color);
      next.href = withParam(tr.items[(index + 1) % n].url, 'color', color);
      if (teach) teach.href = withParam(script.teach, 'trial', String(it.trial));
      window.history.replaceState(null, '', withParam(it.url, 'color', color));
      charts([
        function () { painter.setStep(it); },
        function () {
          const chart = nodeEl && sv.chartFor(nodeEl);
          const opt = tr.charts[String(it.node)];
          if (!chart || !opt) return;
          if (it.node !== shownNode) {
            drawPinned(nodeEl, opt, it.marks);
            shownNode = it.node;
          } else {
            pin(chart, it.marks);
          }
        },
      ]);
    }

    prev.addEventListener('click', function (e) { e.preventDefault(); show(index - 1); });
    next.addEventListener('click', function (e) { e.preventDefault(); show(index + 1); });
    document.addEventListener('keydown', function (e) {
      if (sv.typing(e) || e.altKey || e.ctrlKey || e.metaKey) return;
      if (e.key === 'ArrowRight') { e.preventDefault(); show(index + 1); }
      if (e.key === 'ArrowLeft') { e.preventDefault(); show(index - 1); }
    });
    show(index);
  }

  // ---- tree teaching page ---------------------------------------------------

  // initTreeTeach steps through one walk of the tree teaching page: its
  // steps swap in place; another trial or seed comes from the teach API.
  function initTreeTeach(view) {
    const sv = window.sampviz;
    const chartEl = document.getElementById('chart-tree-teach');
    const body = document.getElementById('tree-teach-body');
    const prev = document.getElementById('tree-teach-prev');
    const next = document.getElementById('tree-teach-next');
    const form = document.getElementById('tree-teach-form');
    const trials = {
      prev: document.getElementById('tree-teach-prev-trial'),
      next: document.getElementById('tree-teach-next-trial'),
    };
    let index = view.index;
    const treeEl = document.getElementById('chart-tree-teach-tree');
    const painter = treeEl && view.tree ? treePainter(treeEl, view.tree) : null;
    const charts = stages();

    function show(i) { timed('tree-teach-step', function () { showStep(i); }); }

    function showStep(i) {
      if (!view.items || !view.items.length) return;
      index = Math.min(Math.max(i, 0), view.items.length - 1);
      const it = view.items[index];
      setText('tree-teach-title', it.title);
      setText('tree-teach-what', it.what);
      setText('tree-teach-walk', it.walk);
      if (body) {
        body.replaceChildren.apply(body, view.items.slice(0, index + 1).map(function (s) {
          const tr = document.createElement('tr');
          tr.className = 'outcome-' + s.outcome;
          s.cells.forEach(function (c) {
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
      charts([
        function () {
          if (chartEl && it.chart) drawPinned(chartEl, it.chart, it.marks);
        },
        function () { if (painter) painter.setStep(it); },
      ]);
    }

    // apply swaps in another walk (another trial or seed).
    function apply(v) {
      view = v;
      setText('tree-teach-trial', String(v.trial));
      setText('tree-teach-outcome', v.outcome);
      setText('tree-teach-why-residual', v.why_residual);
      setText('tree-teach-why-lossless', v.why_lossless);
      const back = document.querySelector('[data-testid="back-to-row"]');
      if (back) back.href = v.row_url;
      [['prev', v.prev_trial_url], ['next', v.next_trial_url]].forEach(function (p) {
        const a = trials[p[0]];
        if (!a) return;
        a.href = p[1] || '';
        a.classList.toggle('disabled', !p[1]);
      });
      if (form) {
        form.querySelector('[name="trial"]').value = String(v.trial);
        form.querySelector('[name="seed"]').value = v.seed;
      }
      if (v.invalid) {
        setText('tree-teach-what', v.invalid);
        return;
      }
      show(v.index);
    }

    const load = sv.teachLoader('tree-teach-what', 'The server could not show this walk.', apply);

    sv.teachControls({
      links: Object.keys(trials).map(function (k) { return trials[k]; }), form: form, load: load, prev: prev, next: next,
      left: function () { show(index - 1); }, right: function () { show(index + 1); },
    });
    show(index);
  }

  function start() {
    if (!window.sampviz || !window.echarts) return;
    const row = document.getElementById('row-tree');
    if (row) initRowTree(JSON.parse(row.textContent));
    const teach = document.getElementById('tree-teach-data');
    if (teach) initTreeTeach(JSON.parse(teach.textContent));
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', start);
  } else {
    start();
  }
})();
