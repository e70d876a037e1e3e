// sampviz.js: the page script. It uploads dumps, shows what the server
// streams over the websocket, and hands chart options (built by the server
// with go-echarts) to ECharts. It never judges anything itself.
//
// Budget: no main-thread task over 100 ms while hundreds of rows stream in,
// and little CPU taken from the judge, which shares the machine. Messages
// are queued and handled in animation frames; the row table is rebuilt at
// most every tableInterval ms and the charts redrawn at most every
// chartInterval ms, each time from the latest state only; nothing on the
// page animates.
(function () {
  'use strict';

  const tableInterval = 500;
  const chartInterval = 1500;
  // The heatmap is the costliest chart to draw; while rows stream in it is
  // redrawn less often than the others.
  const heatInterval = 4500;

  // ---- charts -------------------------------------------------------------

  const instances = new Map();

  function chartFor(el) {
    let c = instances.get(el);
    if (!c && window.echarts) {
      c = window.echarts.init(el, null, { renderer: 'canvas' });
      instances.set(el, c);
    }
    return c;
  }

  window.addEventListener('resize', function () {
    instances.forEach(function (c) { c.resize(); });
  });

  // Numbers the script writes itself go through numfmt.js, the mirror of
  // the server's formatter (engine.FormatSig): axis labels with 3
  // significant digits, values in tooltips and the row table with 4, as the
  // pages' tables write them.
  const numbers = window.sampvizNumbers;

  function axisLabel(v) { return numbers.sig(v, 3); }

  function num(v) { return numbers.sig(v, 4); }

  // decorate adds what JSON cannot carry: label and tooltip functions.
  function decorate(kind, opt) {
    [].concat(opt.xAxis || [], opt.yAxis || []).forEach(function (ax) {
      // go-echarts writes a label interval as a string; ECharts wants a number.
      if (ax && ax.axisLabel && typeof ax.axisLabel.interval === 'string' && /^\d+$/.test(ax.axisLabel.interval)) {
        ax.axisLabel.interval = +ax.axisLabel.interval;
      }
      if (ax && (ax.type === 'log' || ax.type === 'value')) {
        ax.axisLabel = Object.assign({}, ax.axisLabel, { formatter: axisLabel });
      }
    });
    opt.tooltip = Object.assign({}, opt.tooltip, { confine: true });
    (opt.series || []).forEach(function (s) {
      // Large mode draws a scatter's points as one path: hundreds of rows
      // cost one shape instead of one each.
      if (s.type === 'scatter') { s.large = true; s.largeThreshold = 200; }
    });
    if (kind === 'worst') {
      opt.tooltip.formatter = function (p) {
        const v = p.value || [];
        if (p.seriesName.indexOf('allowed') === 0) return 'row ' + v[0] + ': the tolerance allows ' + num(v[1]);
        if (p.seriesName.indexOf('NaN') === 0) return 'row ' + v[0] + ': NaN or Inf in the output';
        return 'row ' + v[0] + ' (' + p.seriesName.replace('row ', '') + '): error at its worst token ' + num(v[1]) + '<br>click to open the row';
      };
    } else if (kind === 'heat') {
      // Draw the cells 400 a frame, so that no one task draws them all:
      // with the heatmap's code warmed (warmUps) its cost is the cells. The
      // heatmap is redrawn at most every heatInterval, far longer than
      // its few frames, so a draw is never cut short by the next.
      (opt.series || []).forEach(function (s) { s.progressive = 400; s.progressiveThreshold = 800; });
      const xs = (opt.xAxis && opt.xAxis[0] && opt.xAxis[0].data) || [];
      const ys = (opt.yAxis && opt.yAxis[0] && opt.yAxis[0].data) || [];
      opt.tooltip.formatter = function (p) {
        const v = p.value || [];
        const ratio = Math.pow(10, v[2]);
        const words = ratio > 1 ? 'breaks the tolerance' : 'within tolerance';
        return ys[v[1]] + ', ' + xs[v[0]] + ':<br>worst error is ' + num(ratio) + '× what the tolerance allows (' + words + ')';
      };
    } else if (kind === 'hist') {
      opt.tooltip.formatter = function (ps) {
        const p = Array.isArray(ps) ? ps[0] : ps;
        const n = typeof p.value === 'number' ? p.value : 0;
        return n + ' tokens with |error| in bin ' + p.name;
      };
    } else if (kind === 'pvalue') {
      opt.tooltip.formatter = function (p) {
        const v = p.value || [];
        // A row failing another rule carries its own p-value third: it is drawn below the line.
        if (v.length > 2) return 'row ' + v[0] + ' fails another rule; its fit passes (' + numbers.pText(v[2]) + ')<br>click to open the row';
        return 'row ' + v[0] + ' (' + p.seriesName.replace('row ', '') + '): ' + numbers.pText(v[1]) + '<br>click to open the row';
      };
    } else if (kind === 'accept') {
      opt.tooltip.formatter = function (ps) {
        const lines = [];
        (Array.isArray(ps) ? ps : [ps]).forEach(function (p) {
          const v = p.value;
          if (Array.isArray(v)) {
            // The boxplot's value is [index?, lo, lo, rate, hi, hi].
            const n = v.length;
            if (n >= 5) lines.push('95% interval: ' + num(v[n - 5]) + ' to ' + num(v[n - 1]));
          } else if (typeof v === 'number') {
            lines.push(p.seriesName + ': ' + num(v));
          }
        });
        const first = Array.isArray(ps) ? ps[0] : ps;
        return (first ? first.name + '<br>' : '') + lines.join('<br>');
      };
    }
    return opt;
  }

  // timed runs f and records how long it took as a performance measure
  // named sampviz:NAME, so that a slow step can be found in the browser.
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

  // drawChart applies options to a chart. The first options build it; later
  // ones replace the series and merge the rest, which keeps the axes,
  // legend and grid instead of building them again on every update.
  // fresh rebuilds the chart from these options alone (its categories
  // changed).
  function drawChart(el, opt, fresh) {
    const c = chartFor(el);
    if (!c || !opt) return;
    const first = !el.dataset.drawn || fresh;
    el.dataset.drawn = '1';
    timed('chart-' + el.dataset.chart, function () {
      c.setOption(decorate(el.dataset.chart, opt), first ? { notMerge: true } : { replaceMerge: ['series'] });
    });
  }

  // ---- home page ----------------------------------------------------------

  function initHome(form) {
    const zone = document.getElementById('dropzone');
    const input = document.getElementById('dump-input');
    const errEl = document.getElementById('upload-error');
    const progress = document.getElementById('upload-progress');

    function showError(msg) {
      errEl.textContent = msg;
      errEl.hidden = false;
      progress.hidden = true;
    }

    function upload(file) {
      errEl.hidden = true;
      progress.hidden = false;
      progress.textContent = 'Uploading ' + file.name + '…';
      const body = new FormData();
      body.append('dump', file, file.name);
      const tok = document.getElementById('tokenizer-input');
      if (tok && tok.files && tok.files[0]) body.append('tokenizer', tok.files[0], tok.files[0].name);
      const xhr = new XMLHttpRequest();
      const sem = document.getElementById('semantics-input');
      xhr.open('POST', '/api/runs' + (sem && sem.value ? '?semantics=' + encodeURIComponent(sem.value) : ''));
      xhr.responseType = 'json';
      xhr.upload.onprogress = function (e) {
        if (e.lengthComputable) {
          progress.textContent = 'Uploading ' + file.name + ': ' + Math.round(100 * e.loaded / e.total) + '%';
        }
      };
      xhr.onload = function () {
        const res = xhr.response || {};
        if (xhr.status === 201 && res.url) {
          progress.textContent = 'Uploaded; opening the run…';
          window.location.assign(res.url);
          return;
        }
        showError(res.error || ('The upload failed (HTTP ' + xhr.status + ').'));
      };
      xhr.onerror = function () { showError('The upload could not reach the server; is sampviz serve still running?'); };
      xhr.send(body);
    }

    input.addEventListener('change', function () {
      if (input.files && input.files[0]) upload(input.files[0]);
    });
    ['dragenter', 'dragover'].forEach(function (t) {
      zone.addEventListener(t, function (e) { e.preventDefault(); zone.classList.add('over'); });
    });
    ['dragleave', 'drop'].forEach(function (t) {
      zone.addEventListener(t, function (e) { e.preventDefault(); zone.classList.remove('over'); });
    });
    zone.addEventListener('drop', function (e) {
      const f = e.dataTransfer && e.dataTransfer.files && e.dataTransfer.files[0];
      if (f) upload(f);
    });
    form.addEventListener('submit', function (e) {
      e.preventDefault();
      if (input.files && input.files[0]) upload(input.files[0]);
    });
  }

  // ---- run page -----------------------------------------------------------

  function initRun(data) {
    const st = {
      outputs: [],
      rows: new Map(), // row -> array of summaries by output
      status: null,
      summary: null,
      charts: null,
      chartsDirty: false,
      tableDirty: false,
      inbox: [],
      final: false,
      summaryShown: false,
      scheduled: false,
      lastTable: 0,
      lastCharts: 0,
      lastStatus: 0,
      view: data.view || { failing: false, sort: 'row', output: 0 },
    };
    const body = document.getElementById('rows-body');
    const head = document.getElementById('rows-head');
    const empty = document.getElementById('rows-empty');
    const count = document.getElementById('row-count');
    const failing = document.getElementById('filter-failing');
    const sortSel = document.getElementById('sort-rows');
    const outSel = document.getElementById('output-select');
    const outPick = document.getElementById('output-pick');
    const chartNote = document.getElementById('chart-note');
    const chartEls = {
      worst: document.getElementById('chart-worst'),
      pvalue: document.getElementById('chart-pvalue'),
      hist: document.getElementById('chart-hist'),
      accept: document.getElementById('chart-accept'),
      emitted: document.getElementById('chart-emitted'),
      heat: document.getElementById('chart-heat'),
    };

    function rowHref(r) {
      return data.row_base + r + (data.query ? '?' + data.query : '');
    }

    // The view lives in the URL, next to the tolerances, so a link opens it.
    function saveView() {
      const q = new URLSearchParams(window.location.search);
      if (st.view.failing) q.set('failing', '1'); else q.delete('failing');
      if (st.view.sort && st.view.sort !== 'row') q.set('sort', st.view.sort); else q.delete('sort');
      if (st.view.output > 0) q.set('out', String(st.view.output)); else q.delete('out');
      const s = q.toString();
      window.history.replaceState(null, '', window.location.pathname + (s ? '?' + s : ''));
    }

    failing.addEventListener('change', function () { st.view.failing = failing.checked; saveView(); st.tableDirty = true; st.lastTable = 0; schedule(); });
    sortSel.addEventListener('change', function () { st.view.sort = sortSel.value; saveView(); st.tableDirty = true; st.lastTable = 0; schedule(); });
    outSel.addEventListener('change', function () { outputChosen = true; st.view.output = +outSel.value; saveView(); st.chartsDirty = true; st.lastCharts = 0; schedule(); });
    document.getElementById('jump-form').addEventListener('submit', function (e) {
      e.preventDefault();
      const n = document.getElementById('jump-row').value;
      if (n !== '') window.location.assign(rowHref(+n));
    });
    ['worst', 'pvalue'].forEach(function (k) {
      const c = chartFor(chartEls[k]);
      if (c) {
        c.on('click', function (p) {
          if (p.seriesType === 'scatter' && p.value) window.location.assign(rowHref(p.value[0]));
        });
      }
    });

    function setOutputs(outs) {
      st.outputs = outs;
      const tr = document.createElement('tr');
      const what = { probs: ': largest |error| · worst error / allowed', logprobs: ': largest |Δlogprob| (nats) · worst error / allowed', spec: ': acceptance length (theory), p', samples: ': p-value' };
      ['row', 'verdict'].concat(outs.map(function (o) {
        return (o.external ? o.name + ' (dump)' : o.name + ' (ours)') + (what[o.kind] || '');
      }), ['what the judge says']).forEach(function (t) {
        const th = document.createElement('th');
        th.textContent = t;
        tr.appendChild(th);
      });
      head.replaceChildren(tr);
      head.parentNode.style.setProperty('--row-cols', '5em 8em ' + (outs.length ? 'repeat(' + outs.length + ', minmax(14em, 1fr)) ' : '') + 'minmax(20em, 2fr)');
      outSel.replaceChildren();
      outs.forEach(function (o, i) {
        const opt = document.createElement('option');
        opt.value = String(i);
        opt.textContent = o.external ? o.name + ' (from the dump)' : o.name + ' kernel (ours)';
        outSel.appendChild(opt);
      });
      st.rows.forEach(function (e, r) { dirtyRows.add(r); });
      st.tableDirty = true;
      if (st.view.output >= outs.length) st.view.output = 0;
      outSel.value = String(st.view.output);
      outPick.hidden = outs.length < 2;
    }

    // Unless the URL picked an output, the charts follow the first output
    // that fails a row: that is what a person came to see.
    let outputChosen = new URLSearchParams(window.location.search).has('out');

    function addRows(list) {
      list.forEach(function (s) {
        let e = st.rows.get(s.r);
        if (!e) { e = []; st.rows.set(s.r, e); }
        e[s.o] = s;
        dirtyRows.add(s.r);
        if (!s.pass && !outputChosen) {
          outputChosen = true;
          if (s.o !== st.view.output) {
            st.view.output = s.o;
            outSel.value = String(s.o);
            st.chartsDirty = true;
          }
        }
      });
      st.tableDirty = true;
    }

    // badness orders rows for "worst error": the error over what is allowed
    // when known, else the error, failing rows first.
    function badness(e) {
      let b = 0;
      e.forEach(function (s) {
        if (!s) return;
        let v = 0;
        if (s.worst !== undefined) {
          const w = typeof s.worst === 'number' ? s.worst : Infinity;
          v = (s.allowed && typeof s.allowed === 'number') ? w / s.allowed : w;
        }
        if (!s.pass) v += 1e6;
        if (v > b) b = v;
      });
      return b;
    }

    function violations(e) {
      return e.reduce(function (n, s) { return n + (s ? s.nv : 0); }, 0);
    }

    function rowPass(e) {
      return e.every(function (s) { return !s || s.pass; });
    }

    function cellText(s) {
      if (!s) return '…';
      // A padded lane: only its fill is checked.
      if (s.pad) return s.pass ? '—' : '✗ written into';
      if (s.worst !== undefined) {
        // The largest |error| and the worst error over what the tolerance
        // allows there: two tokens, often, so both are shown.
        const big = s.max !== undefined ? s.max : s.worst;
        let text = typeof big === 'number' ? num(big) : String(big);
        if (s.allowed !== undefined) {
          let ratio = String(s.worst);
          if (typeof s.worst === 'number' && typeof s.allowed === 'number') ratio = s.allowed > 0 ? num(s.worst / s.allowed) : (s.worst > 0 ? 'Inf' : '0');
          text += ' · ' + ratio + '× allowed';
        }
        return (s.pass ? '' : '✗ ') + text;
      }
      if (s.mal !== undefined) {
        return (s.pass ? '' : '✗ ') + num(s.mal) + ' (' + num(s.mal_theory) + ')' + (s.p_value !== undefined ? ', ' + numbers.pText(s.p_value) : '');
      }
      // Many draws are judged by their fit: the p-value says more than the
      // first draw's token.
      if (s.p_value !== undefined) return (s.pass ? '' : '✗ ') + numbers.pText(s.p_value);
      if (s.token !== undefined) return (s.pass ? '' : '✗ ') + 'token ' + s.token + (s.ref_token !== undefined && s.ref_token !== s.token ? ' (ref ' + s.ref_token + ')' : '');
      return s.pass ? 'pass' : '✗ fail';
    }

    // The table keeps one <tr> per row and only refills the rows that
    // changed; it moves rows only when the order they should be in changed.
    const trs = new Map();
    const dirtyRows = new Set();
    let shown = [];

    // A padded lane of the batch: greyed and labelled, never judged
    // against the reference (only what an output writes there is).
    function rowPadding(e) {
      return e.some(function (s) { return s && s.pad; });
    }

    function fillRow(tr, r, e) {
      const pass = rowPass(e);
      const pad = rowPadding(e);
      tr.className = (pass ? 'pass' : 'fail') + (pad ? ' padding' : '');
      tr.dataset.row = String(r);
      const cells = [];
      const a = document.createElement('a');
      a.href = rowHref(r);
      a.textContent = String(r);
      a.dataset.testid = 'row-link';
      const td0 = document.createElement('td');
      td0.appendChild(a);
      cells.push(td0);
      const td1 = document.createElement('td');
      const badge = document.createElement('span');
      badge.className = 'badge ' + (pass ? 'pass' : 'fail');
      badge.textContent = pass ? 'pass' : 'fail';
      if (pad && pass) {
        badge.className = 'badge padding';
        badge.textContent = 'padding';
      }
      td1.appendChild(badge);
      if (pad && !pass) {
        const label = document.createElement('span');
        label.className = 'badge padding';
        label.textContent = 'padding';
        td1.appendChild(document.createTextNode(' '));
        td1.appendChild(label);
      }
      cells.push(td1);
      let say = '';
      for (let i = 0; i < st.outputs.length; i++) {
        const td = document.createElement('td');
        td.textContent = cellText(e[i]);
        if (e[i] && !e[i].pass) { td.className = 'bad'; if (!say) say = e[i].say || ''; }
        cells.push(td);
      }
      if (!say) e.forEach(function (s) { if (s && !say && s.say) say = s.say; });
      if (!say && pad) say = 'Padding: this lane holds no request, so it is not judged against the reference; every output holds its fill here.';
      const td2 = document.createElement('td');
      td2.className = 'say';
      td2.textContent = say;
      cells.push(td2);
      tr.replaceChildren.apply(tr, cells);
    }

    function renderTable() {
      dirtyRows.forEach(function (r) {
        let tr = trs.get(r);
        if (!tr) { tr = document.createElement('tr'); trs.set(r, tr); }
        fillRow(tr, r, st.rows.get(r));
      });
      dirtyRows.clear();
      let keys = Array.from(st.rows.keys());
      if (st.view.failing) keys = keys.filter(function (r) { return !rowPass(st.rows.get(r)); });
      if (st.view.sort === 'worst') {
        keys.sort(function (a, b) { return badness(st.rows.get(b)) - badness(st.rows.get(a)) || a - b; });
      } else if (st.view.sort === 'violations') {
        keys.sort(function (a, b) { return violations(st.rows.get(b)) - violations(st.rows.get(a)) || a - b; });
      } else {
        keys.sort(function (a, b) { return a - b; });
      }
      let prefix = shown.length <= keys.length;
      for (let i = 0; prefix && i < shown.length; i++) prefix = shown[i] === keys[i];
      if (prefix) {
        // The usual case while rows stream in order: append the new ones.
        const frag = document.createDocumentFragment();
        for (let i = shown.length; i < keys.length; i++) frag.appendChild(trs.get(keys[i]));
        body.appendChild(frag);
      } else {
        const frag = document.createDocumentFragment();
        keys.forEach(function (r) { frag.appendChild(trs.get(r)); });
        body.replaceChildren(frag);
      }
      shown = keys;
      empty.hidden = st.rows.size > 0;
      let nFail = 0, nPad = 0;
      st.rows.forEach(function (e) { if (!rowPass(e)) nFail++; if (rowPadding(e)) nPad++; });
      count.textContent = st.rows.size + ' rows judged, ' + nFail + ' failing' + (nPad ? ', ' + nPad + ' padding' : '') + (st.view.failing ? ' (showing only those)' : '');
    }

    // renderCharts draws the selected output's charts, one chart per task
    // so that no single task draws them all.
    function renderCharts() {
      if (!st.charts) return;
      const c = st.charts[st.view.output] || st.charts[0] || {};
      let drew = false;
      const queue = [];
      const now = performance.now();
      Object.keys(chartEls).forEach(function (k) {
        const el = chartEls[k];
        if (!el) return;
        if (c[k]) {
          el.hidden = false;
          drew = true;
          // A chart scrolled out of view waits: it is drawn when it comes
          // into view, and every chart once the run is final.
          if (!st.final && !inView(el)) {
            el.dataset.stale = '1';
            return;
          }
          delete el.dataset.stale;
          if (k === 'heat' && !st.final && el.dataset.output === String(st.view.output) && now - (st.lastHeat || 0) < heatInterval) {
            st.chartsDirty = true; // drawn again at a later update
            return;
          }
          if (k === 'heat') st.lastHeat = now;
          el.dataset.output = String(st.view.output);
          queue.push([el, c[k]]);
        } else {
          el.hidden = true;
        }
      });
      (function next() {
        const item = queue.shift();
        if (!item) return;
        // A chart just shown has no size yet: resize once it is laid out.
        const c = chartFor(item[0]);
        if (c && c.getWidth() !== item[0].clientWidth) c.resize();
        drawChart(item[0], item[1]);
        if (queue.length) setTimeout(next, 0);
      })();
      const o = st.outputs[st.view.output];
      let note = 'Charts draw as rows are judged.';
      if (c.hist && o && o.kind === 'logprobs') {
        note = 'Errors are |output − reference| in nats, against the log-softmax of the kind the output was judged as (raw or processed); a point above the dashed line breaks the tolerance. Click a point to open its row.';
      } else if (c.hist) {
        note = 'Errors are |output − reference| in probability; a point above the dashed line breaks the tolerance. Click a point to open its row.';
      } else if (c.accept) {
        note = 'Each point is a row’s smallest p-value: below the dashed line its trials do not follow the speculative-sampling laws. ' +
          'Bars are the measured acceptance by position among the trials that reached it, boxes their 95% intervals, diamonds the theory. Click a point to open its row.';
      } else if (c.pvalue) {
        note = 'Each point is a row’s p-value: below the dashed line its draws do not follow the reference distribution. Click a point to open its row.';
      } else if (drew && o && o.kind === 'logprobs') {
        note = 'Each point is a row’s greatest |Δlogprob| in nats against the reference log-softmax of the output’s kind (raw or processed), red where the row fails. Click a point to open its row.';
      } else if (drew && o && o.kind === 'logits') {
        note = 'Each point is a row’s greatest |Δlogit| against the golden logits, red where the row fails (a real top-1 flip, or logits past the tolerance). Click a point to open its row.';
      } else if (drew) {
        note = 'This output has no elementwise errors (' + (o ? o.kind : 'tokens') + '): the chart shows which rows pass and fail.';
      }
      chartNote.textContent = note;
    }

    function renderStatus() {
      const s = st.status;
      if (!s || st.summary) return;
      const sentence = document.getElementById('verdict-sentence');
      const verdict = document.getElementById('verdict');
      if (s.state === 'failed' || s.state === 'cancelled') {
        verdict.className = 'card verdict error';
        sentence.textContent = s.state === 'failed' ? 'This run failed: ' + s.message : s.message;
        setProgress(0);
        const cancel = document.querySelector('[data-testid="cancel-form"]');
        if (cancel) cancel.hidden = true;
        return;
      }
      if (s.state === 'queued') {
        sentence.textContent = s.ahead > 0 ? 'Waiting: ' + s.ahead + ' run(s) ahead of this one.' : 'Waiting to start.';
      } else if (s.judged > 0) {
        const n = Math.max(st.outputs.length, 1);
        sentence.textContent = 'Judging: ' + Math.floor(s.judged / n) + ' of ' + data.rows + ' rows' +
          (n > 1 ? ', each for ' + n + ' outputs…' : '…');
      } else {
        sentence.textContent = 'Running the kernels…';
      }
      setProgress(s.total > 0 ? Math.round(100 * s.judged / s.total) / 100 : 0);
    }

    // setProgress moves the bar to a fraction, touching the page only when
    // the percent shown changes.
    let progress = -1;
    function setProgress(f) {
      if (f === progress) return;
      progress = f;
      document.getElementById('progress-fill').style.transform = 'scaleX(' + f + ')';
    }

    function renderSummary() {
      const sum = st.summary;
      if (!sum) return;
      const verdict = document.getElementById('verdict');
      verdict.className = 'card verdict ' + (sum.pass ? 'pass' : 'fail');
      document.getElementById('verdict-sentence').textContent = sum.sentence;
      if (sum.time_line) document.getElementById('timing').textContent = sum.time_line;
      const statsEl = document.getElementById('stats-line');
      if (statsEl) statsEl.textContent = sum.stats_line || 'No output of this run was judged statistically.';
      if (sum.tolerances_line) document.getElementById('tolerances').textContent = sum.tolerances_line;
      setProgress(1);
      const cancel = document.querySelector('[data-testid="cancel-form"]');
      if (cancel) cancel.hidden = true;
      const ul = document.getElementById('verdict-outputs');
      ul.replaceChildren();
      (sum.outputs || []).forEach(function (o) {
        const li = document.createElement('li');
        li.className = o.pass ? 'pass' : 'fail';
        const label = o.external ? o.name + ' (from the dump)' : o.name + ' kernel (ours)';
        if (o.line) {
          li.textContent = o.line;
        } else {
          li.textContent = o.pass ? label + ' passes all ' + o.rows + ' rows.' : label + ' fails ' + o.failed_rows + ' of ' + o.rows + ' rows.';
          (o.violations || []).forEach(function (v) { li.textContent += ' Over all rows together: ' + v + '.'; });
        }
        ul.appendChild(li);
        (o.notes || []).forEach(function (n) {
          const li2 = document.createElement('li');
          li2.className = 'note';
          li2.dataset.testid = 'output-note';
          li2.textContent = n;
          ul.appendChild(li2);
        });
      });
      const notes = document.getElementById('verdict-notes');
      notes.replaceChildren();
      (sum.notices || []).forEach(function (n) {
        const li = document.createElement('li');
        li.textContent = n;
        notes.appendChild(li);
      });
      // A page opened before the run finished asks the server once for
      // what comes with the final report.
      if (!data.finished) loadComparison(hasComparison(sum));
      const fields = document.getElementById('rejudge-fields');
      if (fields && fields.disabled && sum.tolerances) {
        const t = sum.tolerances;
        // The server's text of each value ("1e-05"): String() would write
        // 0.00001, and the field would change its spelling.
        const text = sum.tolerance_fields || {};
        const set = function (name, v) {
          const el = fields.querySelector('[name="' + name + '"]');
          if (el && !el.value) el.value = text[name] !== undefined ? text[name] : String(v);
        };
        set('satol', t.strict.atol); set('srtol', t.strict.rtol);
        set('natol', t.native.atol); set('nrtol', t.native.rtol);
        set('pvalue', t.p_value);
        fields.disabled = false;
        const wait = document.getElementById('rejudge-wait');
        if (wait) wait.hidden = true;
      }
    }

    // The comparison sections (mode tables, agreement, gate, padded lanes)
    // come with the final report, and the server renders them: a page that
    // watched the run finish fetches itself and swaps them in.
    function hasComparison(sum) {
      return (sum.drift && sum.drift.length) || (sum.modes && sum.modes.length) || (sum.agreement && sum.agreement.length) ||
        (sum.padding && sum.padding.length) || (sum.matches && sum.matches.length) ||
        (sum.outputs || []).some(function (o) { return o.gate; });
    }

    function loadComparison(sections) {
      const holder = document.getElementById('compare');
      if (!holder) return;
      fetch(window.location.pathname + window.location.search, { headers: { Accept: 'text/html' } })
        .then(function (res) { return res.ok ? res.text() : ''; })
        .then(function (html) { if (html) timed('comparison', function () { swapComparison(html, sections); }); })
        .catch(function () { /* the sections show on the next load */ });
    }

    // swapComparison puts the comparison sections of the page's fresh HTML
    // in place of the empty ones.
    function swapComparison(html, sections) {
      const doc = new DOMParser().parseFromString(html, 'text/html');
      const holder = document.getElementById('compare');
      const fresh = doc.getElementById('compare');
      if (holder && fresh && sections) holder.replaceWith(document.importNode(fresh, true));
      const note = doc.querySelector('[data-testid="padding-note"]');
      const notes = document.getElementById('verdict-notes');
      if (note && notes && !notes.querySelector('[data-testid="padding-note"]')) notes.prepend(document.importNode(note, true));
      const cw = doc.getElementById('compare-with');
      const cwOld = document.getElementById('compare-with');
      if (cw && cwOld) cwOld.replaceWith(document.importNode(cw, true));
      showFocus();
    }

    function frame() {
      st.scheduled = false;
      const inbox = st.inbox;
      st.inbox = [];
      inbox.forEach(function (m) {
        if (m.outputs) setOutputs(m.outputs);
        if (m.rows) addRows(m.rows);
        if (m.status) st.status = m.status;
        if (m.charts) { st.charts = m.charts; st.chartsDirty = true; }
        if (m.summary) st.summary = m.summary;
        if (m.final) st.final = true;
      });
      const now = performance.now();
      // The sentence and the bar follow the table's pace while rows stream.
      if (!st.status || st.status.state !== 'running' || st.final || now - st.lastStatus >= tableInterval) {
        st.lastStatus = now;
        renderStatus();
      } else {
        later(tableInterval - (now - st.lastStatus));
      }
      if (st.tableDirty && (st.final || now - st.lastTable >= tableInterval)) {
        st.tableDirty = false;
        st.lastTable = now;
        timed('table', renderTable);
      } else if (st.tableDirty) {
        later(tableInterval - (now - st.lastTable));
        return;
      }
      if (st.chartsDirty && (st.final || now - st.lastCharts >= chartInterval)) {
        st.chartsDirty = false;
        st.lastCharts = now;
        // Draw in the next frame so the table's layout and the charts'
        // drawing are separate tasks.
        requestAnimationFrame(renderCharts);
      } else if (st.chartsDirty) {
        later(chartInterval - (now - st.lastCharts));
      }
      if (st.final && !st.summaryShown) {
        st.summaryShown = true;
        timed('summary', renderSummary);
      }
    }

    function schedule() {
      if (st.scheduled) return;
      st.scheduled = true;
      requestAnimationFrame(frame);
    }

    let timer = 0;
    function later(ms) {
      if (timer) return;
      timer = setTimeout(function () { timer = 0; schedule(); }, Math.max(16, ms));
    }


    // Which charts are in view: one scrolled out of view is not redrawn
    // while rows stream (see renderCharts). Before the observer's first
    // answer a chart counts as in view.
    const inViewNow = new Map();
    const observer = window.IntersectionObserver ? new IntersectionObserver(function (entries) {
      entries.forEach(function (e) {
        inViewNow.set(e.target, e.isIntersecting);
        if (e.isIntersecting && e.target.dataset.stale) {
          st.chartsDirty = true;
          schedule();
        }
      });
    }, { rootMargin: '100px' }) : null;
    function inView(el) { return !observer || inViewNow.get(el) !== false; }
    Object.keys(chartEls).forEach(function (k) { if (chartEls[k] && observer) observer.observe(chartEls[k]); });

    // Until the first rows arrive, each chart shows its empty axes. This also
    // runs ECharts' common code once before the stream starts, so its first
    // use does not land on the first streamed update.
    const placeholders = {
      worst: { title: 'Worst error per row', x: 'value', y: 'log' },
      pvalue: { title: 'p-value per row', x: 'value', y: 'log' },
      hist: { title: 'How large the errors are', x: 'category', y: 'log' },
      accept: { title: 'Acceptance by position', x: 'category', y: 'value' },
      emitted: { title: 'Emitted length', x: 'category', y: 'value' },
      heat: { title: 'Where the errors are', x: 'category', y: 'category' },
    };
    Object.keys(placeholders).forEach(function (k, i) {
      if (!chartEls[k] || chartEls[k].hidden) return;
      setTimeout(function () {
        const c = chartFor(chartEls[k]);
        if (!c || chartEls[k].dataset.drawn) return;
        const p = placeholders[k];
        timed('placeholder', function () {
          c.setOption({
            animation: false,
            title: { text: p.title, subtext: 'waiting for rows', left: 'center' },
            grid: { left: 70, right: 20, top: 60, bottom: 60 },
            xAxis: { type: p.x, data: p.x === 'category' ? [] : undefined },
            yAxis: { type: p.y, data: p.y === 'category' ? [] : undefined },
            series: [],
          });
        });
      }, i);
    });

    // warmUps are a few points of each series type the run page's charts
    // draw. Off screen, one type per idle task, they make ECharts compile
    // its code for that type before the first streamed draw needs it: a
    // fresh browser's first draw of a type ran 120-215 ms where later ones
    // took 15-60 ms (docs/perf-log.md), and split so, no task carries both.
    const warmUps = {
      worst: { x: 'value', y: 'log', series: [
        // Past decorate's largeThreshold, so that large mode is warmed too.
        { type: 'scatter', data: Array.from({ length: 256 }, function (_, i) { return [i, Math.pow(10, -6 + (i % 7))]; }) },
        { type: 'line', symbol: 'none', lineStyle: { type: 'dashed' }, data: [[0, 1e-5], [1, 1e-5]] }] },
      hist: { x: 'category', y: 'log', cats: ['a', 'b', 'c'], series: [{ type: 'bar', data: [1, 10, 100] }] },
      accept: { x: 'category', y: 'value', cats: ['0', '1'], series: [
        { type: 'bar', data: [0.5, 0.3] },
        { type: 'boxplot', data: [[0.4, 0.4, 0.5, 0.6, 0.6], [0.2, 0.2, 0.3, 0.4, 0.4]] },
        { type: 'scatter', data: [0.5, 0.3] }] },
      // The heatmap's code comes in three steps, each its own task: its
      // cells alone, then a visual map, then past decorate's
      // progressiveThreshold (the progressive path); in one task a fresh
      // browser took 130-210 ms.
      heatCells: { x: 'category', y: 'category', cats: ['a', 'b'], ycats: ['r'],
        series: [{ type: 'heatmap', data: [[0, 0, 1], [1, 0, 2]] }] },
      heatMap: { x: 'category', y: 'category', cats: ['a', 'b'], ycats: ['r'],
        visualMap: { type: 'continuous', min: -6, max: 2, orient: 'horizontal', left: 'center', bottom: 0, inRange: { color: ['#e7f5ff', '#e03131'] } },
        series: [{ type: 'heatmap', data: [[0, 0, -1], [1, 0, 1]] }] },
      heat: { x: 'category', y: 'category',
        cats: Array.from({ length: 40 }, function (_, i) { return String(i); }),
        ycats: Array.from({ length: 24 }, function (_, i) { return String(i); }),
        visualMap: { type: 'continuous', min: -6, max: 2, orient: 'horizontal', left: 'center', bottom: 0, inRange: { color: ['#e7f5ff', '#e03131'] } },
        series: [{ type: 'heatmap', data: Array.from({ length: 960 }, function (_, i) { return [i % 40, Math.floor(i / 40), (i % 9) - 6]; }) }] },
    };
    warmUps.pvalue = warmUps.worst;
    warmUps.emitted = warmUps.accept;
    (function warmUp() {
      const kinds = [];
      Object.keys(chartEls).forEach(function (k) {
        if (!chartEls[k] || chartEls[k].hidden || !warmUps[k]) return;
        if (k === 'heat') kinds.push('heatCells', 'heatMap');
        kinds.push(k);
      });
      if (!kinds.length || !window.echarts) return;
      const idle = window.requestIdleCallback ?
        function (f) { window.requestIdleCallback(f, { timeout: 400 }); } :
        function (f) { setTimeout(f, 0); };
      const box = document.createElement('div');
      box.style.cssText = 'position:absolute;left:-10000px;top:0;width:600px;height:340px';
      box.setAttribute('aria-hidden', 'true');
      document.body.appendChild(box);
      let chart = null;
      const done = [];
      (function step(i) {
        idle(function () {
          if (i >= kinds.length) {
            if (chart) chart.dispose();
            box.remove();
            return;
          }
          const w = warmUps[kinds[i]];
          if (done.indexOf(w) < 0) {
            done.push(w);
            timed('warm-up', function () {
              if (!chart) chart = window.echarts.init(box, null, { renderer: 'canvas' });
              chart.setOption(decorate(kinds[i], {
                animation: false,
                title: { text: ' ', left: 'center' },
                legend: { show: true, bottom: 0 },
                tooltip: { show: true, trigger: 'item' },
                grid: { left: 70, right: 20, top: 60, bottom: 60 },
                xAxis: [{ type: w.x, data: w.cats }],
                yAxis: [{ type: w.y, data: w.ycats }],
                visualMap: w.visualMap,
                series: w.series,
              }), { notMerge: true });
            });
          }
          step(i + 1);
        });
      })(0);
    })();

    let closedFinal = false;
    function connect(attempt) {
      const proto = window.location.protocol === 'https:' ? 'wss://' : 'ws://';
      const ws = new WebSocket(proto + window.location.host + data.ws);
      ws.onopen = function () {
        // Marks when the stream starts, for whoever times the page.
        if (performance.mark) performance.mark('sampviz:stream-open');
      };
      ws.onmessage = function (ev) {
        let m;
        try { m = timed('parse', function () { return JSON.parse(ev.data); }); } catch (e) { return; }
        if (m.final) closedFinal = true;
        st.inbox.push(m);
        schedule();
      };
      ws.onclose = function () {
        if (closedFinal) return;
        // The server restarted or the network blinked: start over, once a
        // second, for a while. The server resends everything on connect.
        if (attempt < 30) {
          setTimeout(function () { connect(attempt + 1); }, 1000);
        } else {
          document.getElementById('verdict-sentence').textContent = 'Lost the connection to the server; reload the page to try again.';
        }
      };
    }
    connect(0);
    document.body.dataset.streaming = 'on';
    showFocus();
  }

  // showFocus brings the comparison section the page opened on (?modes=1,
  // ?agree=1, ?padding=1) into view.
  function showFocus() {
    const el = document.querySelector('section.compare.focus');
    if (el) el.scrollIntoView({ block: 'start' });
  }

  // ---- row page -----------------------------------------------------------

  // initRow draws the row page's charts, one per task, so that no single
  // task draws them all.
  function initRow(chartsData, then) {
    const queue = [];
    document.querySelectorAll('[data-chart]').forEach(function (el) {
      const opt = chartsData[el.dataset.chart];
      if (opt) queue.push([el, opt]);
    });
    (function next() {
      const item = queue.shift();
      if (item) {
        drawChart(item[0], item[1]);
        setTimeout(next, 0);
      } else if (then) {
        then();
      }
    })();
  }

  // typing reports whether a key event belongs to a form field.
  function typing(e) {
    const t = e.target;
    return t && (t.tagName === 'INPUT' || t.tagName === 'SELECT' || t.tagName === 'TEXTAREA' || t.isContentEditable);
  }

  // initTrace steps through a spec_verify row's trace. Every step was put
  // into words by the server; this swaps the one shown, pins the draft and
  // the token drawn on the position's chart, and keeps the step in the URL.
  function initTrace(data) {
    const n = data.items.length;
    if (!n) return;
    const title = document.getElementById('trace-title');
    const cells = document.getElementById('trace-cells');
    const say = document.getElementById('trace-say');
    const prev = document.getElementById('trace-prev');
    const next = document.getElementById('trace-next');
    const chartEl = document.getElementById('chart-position');
    let index = data.index;
    let position = -1;

    function show(i) {
      index = ((i % n) + n) % n;
      const it = data.items[index];
      title.textContent = it.title;
      const tds = it.cells.map(function (c) {
        const td = document.createElement('td');
        td.textContent = c;
        return td;
      });
      cells.replaceChildren.apply(cells, tds);
      cells.className = 'outcome-' + it.outcome;
      say.textContent = it.say;
      prev.href = data.items[(index - 1 + n) % n].url;
      next.href = data.items[(index + 1) % n].url;
      const c = chartFor(chartEl);
      if (c && data.charts[it.position]) {
        if (it.position !== position) {
          drawChart(chartEl, data.charts[it.position], true);
          position = it.position;
        }
        timed('trace-marks', function () {
          // The residual is what a rejection draws from: shown at the
          // rejections, one legend click away at the other steps.
          const res = (c.getOption().series || []).filter(function (s) { return s.id === 'residual'; })[0];
          if (res) {
            const sel = {};
            sel[res.name] = it.outcome === 'rejected';
            c.setOption({ legend: { selected: sel } });
          }
          c.setOption({ series: [{ id: 'p', markPoint: {
            symbol: 'pin', symbolSize: 46,
            label: { show: true, fontSize: 10, formatter: function (p) { return p.name; } },
            data: it.marks.map(function (m) { return { name: m.name, coord: m.coord, itemStyle: { color: m.color } }; }),
          } }] });
        });
      }
      const u = new URL(it.url, window.location.href);
      window.history.replaceState(null, '', u.pathname + u.search);
    }

    prev.addEventListener('click', function (e) { e.preventDefault(); show(index - 1); });
    next.addEventListener('click', function (e) { e.preventDefault(); show(index + 1); });
    document.addEventListener('keydown', function (e) {
      if (typing(e) || e.altKey || e.ctrlKey || e.metaKey) return;
      if (e.key === 'ArrowRight') { e.preventDefault(); show(index + 1); }
      if (e.key === 'ArrowLeft') { e.preventDefault(); show(index - 1); }
    });
    show(index);
  }

  // initTeach runs the teaching page: the step, run and start-over links and
  // the controls fetch the next state from the teach API, which the page
  // swaps in without reloading; the URL follows, so it can be pasted.
  function initTeach(view) {
    const form = document.getElementById('teach-form');
    const links = {
      step: document.getElementById('teach-step'),
      run: document.getElementById('teach-run'),
      reset: document.getElementById('teach-reset'),
    };
    const charts = {
      hist: document.getElementById('chart-teach-hist'),
      tv: document.getElementById('chart-teach-tv'),
    };

    function apply(v) {
      view = v;
      setText('teach-counter', v.counter);
      setText('teach-what', v.what);
      setText('teach-definition', v.definition);
      setText('teach-why-min', v.why_min);
      setText('teach-why-residual', v.why_residual);
      setText('teach-why-p', v.why_p);
      if (links.step) links.step.href = v.step_url;
      if (links.run) links.run.href = v.run_url;
      if (links.reset) links.reset.href = v.reset_url;
      [links.step, links.run].forEach(function (a) { if (a) a.classList.toggle('disabled', v.full); });
      const body = document.getElementById('teach-last-body');
      if (body) {
        body.replaceChildren.apply(body, (v.last || []).map(function (s) {
          const tr = document.createElement('tr');
          tr.className = s.accepted ? 'accepted' : 'rejected';
          [s.step, s.draft, s.q, s.p, s.accept, s.u, s.verdict, s.token].forEach(function (c) {
            const td = document.createElement('td');
            td.textContent = c;
            tr.appendChild(td);
          });
          return tr;
        }));
      }
      if (form && v.controls) {
        const step = form.querySelector('[name="step"]');
        if (step) step.value = String(v.steps);
      }
      Object.keys(charts).forEach(function (k) {
        if (charts[k] && v.charts && v.charts[k]) drawChart(charts[k], v.charts[k], true);
      });
    }

    const load = teachLoader('teach-what', 'The server could not take this step.', function (v) {
      apply(v);
      const p = new URL(v.url, window.location.href);
      window.history.replaceState(null, '', p.pathname + p.search);
    });

    const distance = form && form.querySelector('[name="distance"]');
    const distanceValue = document.getElementById('teach-distance-value');
    if (distance && distanceValue) {
      distance.addEventListener('input', function () { distanceValue.textContent = distance.value; });
    }
    teachControls({
      links: Object.keys(links).map(function (k) { return links[k]; }), form: form, load: load,
      right: function () { if (links.step) links.step.click(); },
    });
    // The first draw, one chart per task.
    const first = Object.keys(charts).filter(function (k) { return charts[k] && view.charts && view.charts[k]; });
    (function next() {
      const k = first.shift();
      if (!k) return;
      drawChart(charts[k], view.charts[k], true);
      setTimeout(next, 0);
    })();
  }

  // setText writes s (or nothing) into the element id names, if the page
  // has it.
  function setText(id, s) {
    const el = document.getElementById(id);
    if (el) el.textContent = s || '';
  }

  // teachLoader returns a teaching page's load(pageURL): it asks the API
  // for the lesson the page URL names, one request at a time, and gives the
  // answer to apply; an error's sentence (or failText) goes into the
  // element whatID names.
  function teachLoader(whatID, failText, apply) {
    let busy = false;
    return function (pageURL) {
      if (busy) return;
      busy = true;
      document.body.classList.add('busy');
      const u = new URL(pageURL, window.location.href);
      fetch('/api' + u.pathname + u.search, { headers: { Accept: 'application/json' } })
        .then(function (res) { return res.json().then(function (b) { return { ok: res.ok, body: b }; }); })
        .then(function (r) {
          if (!r.ok) { setText(whatID, r.body.error || failText); return; }
          apply(r.body);
        })
        .catch(function () { setText(whatID, 'The server could not be reached; is sampviz serve still running?'); })
        .finally(function () { busy = false; document.body.classList.remove('busy'); });
    };
  }

  // teachControls wires a teaching page's controls: each link asks the
  // server for the lesson it names (o.load), the form for the lesson its
  // fields name as they change, and ← → (or o.prev and o.next) call o.left
  // and o.right where given, unless the reader is typing in a field.
  function teachControls(o) {
    o.links.forEach(function (a) {
      if (!a) return;
      a.addEventListener('click', function (e) {
        e.preventDefault();
        if (!a.classList.contains('disabled')) o.load(a.href);
      });
    });
    if (o.form) {
      const submit = function (e) {
        if (e) e.preventDefault();
        const q = new URLSearchParams(new FormData(o.form));
        o.load(o.form.getAttribute('action') + '?' + q.toString());
      };
      o.form.addEventListener('submit', submit);
      o.form.addEventListener('change', function () { submit(null); });
    }
    [[o.prev, o.left], [o.next, o.right]].forEach(function (b) {
      if (b[0] && b[1]) b[0].addEventListener('click', function (e) { e.preventDefault(); b[1](); });
    });
    document.addEventListener('keydown', function (e) {
      if (typing(e) || e.altKey || e.ctrlKey || e.metaKey) return;
      const f = e.key === 'ArrowRight' ? o.right : e.key === 'ArrowLeft' ? o.left : null;
      if (f) { e.preventDefault(); f(); }
    });
  }

  // waitForRun reloads a page waiting for its run once the websocket says
  // the run has ended, or, on a row page (data-row), once every output has
  // judged that row.
  function waitForRun(el, attempt) {
    attempt = attempt || 0;
    const proto = window.location.protocol === 'https:' ? 'wss://' : 'ws://';
    const ws = new WebSocket(proto + window.location.host + el.dataset.wait);
    const row = el.dataset.row === undefined ? -1 : Number(el.dataset.row);
    const judged = {};
    let outputs = 0;
    let ended = false;
    ws.onmessage = function (ev) {
      let m;
      try { m = JSON.parse(ev.data); } catch (e) { return; }
      if (m.outputs) outputs = m.outputs.length;
      (m.rows || []).forEach(function (r) { if (r.r === row) judged[r.o] = true; });
      const done = outputs > 0 && Object.keys(judged).length >= outputs;
      if (m.final || done) { ended = true; ws.close(); window.location.reload(); }
    };
    // The server restarted or the network blinked: wait again, a while.
    ws.onclose = function () {
      if (!ended && attempt < 30) setTimeout(function () { waitForRun(el, attempt + 1); }, 1000);
    };
  }

  // What the other page scripts share (static/tree.js, the draft tree).
  window.sampviz = {
    chartFor: chartFor, drawChart: drawChart, typing: typing, setText: setText,
    teachLoader: teachLoader, teachControls: teachControls,
  };

  // ---- start --------------------------------------------------------------

  function start() {
    const form = document.getElementById('upload-form');
    if (form) initHome(form);
    const run = document.getElementById('run-data');
    if (run) initRun(JSON.parse(run.textContent));
    const row = document.getElementById('row-charts');
    const trace = document.getElementById('row-trace');
    const startTrace = function () { if (trace) initTrace(JSON.parse(trace.textContent)); };
    if (row) initRow(JSON.parse(row.textContent), startTrace); else startTrace();
    const wait = document.querySelector('[data-wait]');
    if (wait && wait.dataset.wait) waitForRun(wait);
    const teach = document.getElementById('teach-data');
    if (teach) initTeach(JSON.parse(teach.textContent));
    const diff = document.getElementById('diff-charts');
    if (diff) initRow(JSON.parse(diff.textContent));
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', start);
  } else {
    start();
  }
})();
