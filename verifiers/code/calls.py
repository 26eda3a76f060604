"""Function-call tests: the JavaScript harness that evaluates calls inside the sandbox and reports plain
values, and the parent's side that decodes and compares them (Python calls become CodeVerifier value tests).

Example:
    >>> same(decode_js({"$": "array", "v": [1, {"$": "nan"}]}), [1.0, float("nan")], 1e-9)
    True
    >>> python_assert("add(1, 2)", 3, 1e-6)
    'assert add(1, 2) == 3'
"""

from __future__ import annotations

import json
import math
from typing import Any

_JS_CALL_HARNESS = r"""'use strict';
// Evaluates the candidate (main.js) as a script, then each call expression; reports plain values tagged
// with the run's nonce. Everything it uses is captured before the candidate runs.
const fs = require('fs'), vm = require('vm');
const writeSync = fs.writeSync, readFileSync = fs.readFileSync, closeSync = fs.closeSync;
const parse = JSON.parse, stringify = JSON.stringify, isArray = Array.isArray;
const getPrototypeOf = Object.getPrototypeOf, keys = Object.keys, ObjectPrototype = Object.prototype;
const run = vm.runInThisContext, String_ = String;
const payloadFd = Number(process.argv[2]), resultFd = Number(process.argv[3]);
const job = parse(readFileSync(payloadFd, 'utf8'));
closeSync(payloadFd);
const nonce = job.nonce, calls = job.calls;
function emit(kind, index, value) { writeSync(resultFd, nonce + ' ' + kind + ' ' + index + ' ' + stringify(value) + '\n'); }
function describe(e) {
  try { return (e && e.name ? String_(e.name) + ': ' : '') + String_(e && e.message !== undefined ? e.message : e); }
  catch (_) { return 'an exception'; }
}
function enc(v, depth) {
  if (depth > 64) return {$: 'deep'};
  const t = typeof v;
  if (v === null || t === 'boolean' || t === 'string') return v;
  if (t === 'number') {
    if (v !== v) return {$: 'nan'};
    if (v === Infinity) return {$: 'inf'};
    if (v === -Infinity) return {$: '-inf'};
    return v;
  }
  if (t === 'undefined') return {$: 'undefined'};
  if (t === 'bigint') return {$: 'bigint', v: String_(v)};
  if (t === 'object') {
    if (isArray(v)) {
      const out = {$: 'array', v: []}, n = v.length;
      for (let i = 0; i < n && i < 100000; i++) out.v.push(enc(v[i], depth + 1));
      return out;
    }
    const proto = getPrototypeOf(v);
    if (proto === ObjectPrototype || proto === null) {
      const out = {$: 'object', v: []}, ks = keys(v);
      for (let i = 0; i < ks.length && i < 100000; i++) out.v.push([ks[i], enc(v[ks[i]], depth + 1)]);
      return out;
    }
  }
  return {$: 'opaque', type: t};
}
globalThis.require = require;
globalThis.module = {exports: {}};
globalThis.exports = globalThis.module.exports;
try { run(readFileSync(job.file, 'utf8'), {filename: job.file}); } catch (e) { emit('C', 0, describe(e)); }
for (let i = 0; i < calls.length; i++) {
  let value;
  try { value = run(calls[i], {filename: 'test'}); } catch (e) { emit('X', i, describe(e)); continue; }
  let encoded;
  try { encoded = enc(value, 0); } catch (e) { emit('X', i, describe(e)); continue; }
  emit('V', i, encoded);
}
emit('E', 0, 'end');
"""
CALL_HARNESSES = {"javascript": ("harness.js", _JS_CALL_HARNESS)}


def call_records(raw: bytes, nonce: str) -> dict[tuple[str, int], Any]:
    found: dict[tuple[str, int], Any] = {}
    for line in raw.decode("utf-8", "replace").splitlines():
        parts = line.split(" ", 3)
        if len(parts) != 4 or parts[0] != nonce or parts[1] not in "VXCE" or not parts[2].isdigit():
            continue
        try:
            found.setdefault((parts[1], int(parts[2])), json.loads(parts[3]))
        except ValueError:
            continue
    return found


class _Opaque:
    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __repr__(self) -> str:
        return self.kind


def decode_js(value: Any) -> Any:
    """A reported JavaScript value as plain Python data (objects as dicts, arrays as lists)."""
    if isinstance(value, dict):
        tag = value.get("$")
        if tag == "array" and isinstance(value.get("v"), list):
            return [decode_js(v) for v in value["v"]]
        if tag == "object" and isinstance(value.get("v"), list):
            return {str(k): decode_js(v) for k, v in value["v"] if isinstance(k, str)}
        if tag in ("nan", "inf", "-inf"):
            return float(tag)
        if tag == "bigint":
            try:
                return int(value.get("v"))
            except (TypeError, ValueError):
                return _Opaque("a bigint")
        if tag == "undefined":
            return _Opaque("undefined")
        return _Opaque(f"an object of type {value.get('type', '?')}")
    return value


def same(got: Any, want: Any, tolerance: float) -> bool:
    """Plain-data equality: booleans only equal booleans, numbers compare numerically (within
    ``tolerance`` for non-integers), lists element-wise, objects key-wise."""
    if isinstance(got, _Opaque):
        return False
    if isinstance(want, bool) or isinstance(got, bool):
        return type(got) is type(want) and got == want
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        if isinstance(want, int) and isinstance(got, int):
            return got == want
        if math.isnan(got) or math.isnan(want):
            return math.isnan(got) and math.isnan(want)
        return got == want or abs(got - want) <= tolerance * max(1.0, abs(want))
    if isinstance(want, list) and isinstance(got, list):
        return len(got) == len(want) and all(same(g, w, tolerance) for g, w in zip(got, want))
    if isinstance(want, dict) and isinstance(got, dict):
        return got.keys() == want.keys() and all(same(got[k], want[k], tolerance) for k in want)
    return type(got) is type(want) and got == want


def python_assert(call: str, expected: Any, tolerance: float) -> str:
    """A call test as a value test CodeVerifier judges outside (a float within ``tolerance``)."""
    if isinstance(expected, float):
        return f"assert math.isclose({call}, {expected!r}, rel_tol={tolerance!r}, abs_tol={tolerance!r})"
    return f"assert {call} == {expected!r}"


def shown(value: Any) -> str:
    try:
        return json.dumps(value) if not isinstance(value, _Opaque) else repr(value)
    except (TypeError, ValueError):
        return repr(value)


__all__ = ["CALL_HARNESSES", "call_records", "decode_js", "python_assert", "same", "shown"]
