// numfmt.js: the numbers the page's script writes itself (chart axes,
// tooltips, the row table as rows stream), written as the server writes
// every other number. It mirrors engine/format.go: sig is FormatSig,
// percent is FormatPercent, storedP is FormatStoredP; web's
// TestNumfmtMirrorsGo runs one table of values through both and fails on
// any difference. It never formats what the server already sent as text.
(function (root) {
  'use strict';

  // sigDigits rounds a > 0 to n significant digits, ties to even as Go's
  // strconv does (toExponential rounds ties up): the digits, and the power
  // of ten of the first.
  function sigDigits(a, n) {
    const long = a.toExponential(Math.min(100, n + 30)).split('e');
    const all = long[0].replace('.', '');
    let exp = +long[1];
    let keep = all.slice(0, n);
    const rest = all.slice(n);
    const last = +keep[keep.length - 1];
    const up = rest[0] > '5' || (rest[0] === '5' && (/[1-9]/.test(rest.slice(1)) || last % 2 === 1));
    if (up) {
      const d = keep.split('');
      let i = d.length - 1;
      while (i >= 0 && d[i] === '9') { d[i] = '0'; i--; }
      if (i < 0) {
        d.unshift('1');
        d.pop();
        exp++;
      } else {
        d[i] = String(+d[i] + 1);
      }
      keep = d.join('');
    }
    return [keep, exp];
  }

  function trimZeros(s) { return s.replace(/0+$/, ''); }

  // sig writes v with at most digits significant digits, plain from 1e-4
  // up to 1e6 (a whole part kept whole), in exponent form outside
  // ("3.1e-07"), as engine.FormatSig.
  function sig(v, digits) {
    if (typeof v !== 'number') return String(v);
    digits = Math.max(1, Math.min(17, digits | 0));
    if (Number.isNaN(v)) return 'NaN';
    if (v === Infinity) return '+Inf';
    if (v === -Infinity) return '-Inf';
    if (v === 0) return '0';
    const a = Math.abs(v);
    let r = sigDigits(a, digits);
    if (r[1] >= digits && r[1] < 6) {
      const first = r[1];
      r = sigDigits(a, r[1] + 1);
      // Rounded up a decade at the digits asked for but not at exp+1
      // digits (99.7 to 2): round to the units of its own decade (100).
      if (r[1] < first) r = sigDigits(a, r[1] + 1);
    }
    let keep = r[0];
    const exp = r[1];
    const sign = v < 0 ? '-' : '';
    if (exp >= -4 && exp < 6) {
      let whole, frac;
      if (exp >= 0) {
        while (keep.length < exp + 1) keep += '0';
        whole = keep.slice(0, exp + 1);
        frac = keep.slice(exp + 1);
      } else {
        whole = '0';
        frac = '0'.repeat(-exp - 1) + keep;
      }
      frac = trimZeros(frac);
      return sign + whole + (frac ? '.' + frac : '');
    }
    const m = trimZeros(keep.slice(1));
    const e = Math.abs(exp);
    return sign + keep[0] + (m ? '.' + m : '') + 'e' + (exp < 0 ? '-' : '+') + (e < 10 ? '0' : '') + e;
  }

  // percent writes a fraction as a percentage, as engine.FormatPercent.
  function percent(frac) {
    if (frac > 0 && frac < 1e-6) return '< 0.0001%';
    let s = sig(100 * frac, 3);
    for (let d = 4; s === '100' && frac < 1 && d <= 6; d++) s = sig(100 * frac, d);
    if (s === '100' && frac < 1) return '> 99.9999%';
    return s + '%';
  }

  // storedP writes a report's p-value, 0 (an underflow) and anything below
  // 1e-300 as "< 1e-300", as engine.FormatStoredP.
  function storedP(p) {
    if (p >= 0 && p < 1e-300) return '< 1e-300';
    return sig(p, 2);
  }

  // pText writes "p = 0.012" or "p < 1e-300", as engine.StoredPText.
  function pText(p) {
    const s = storedP(p);
    return s[0] === '<' ? 'p ' + s : 'p = ' + s;
  }

  root.sampvizNumbers = { sig: sig, percent: percent, storedP: storedP, pText: pText };
})(typeof window !== 'undefined' ? window : globalThis);
