"""sampviz_capture: dumps of LLM sampling for sampviz, from one call or from an engine.

Torch only (no safetensors, no numpy): each capture is one dump file of
docs/DUMPS.md, a safetensors file this module writes itself, holding the
inputs of one sampling op and what the engine (or your code) produced from
them, for `sampviz check` or `sampviz serve` to judge against its float64
reference.

Plain calls, one per op (each returns where the dump went):

    import sampviz_capture as sv
    sv.softmax(logits, probs, temperature=0.7)
    sv.renorm(logits, probs, temperature=0.7, top_k=50, top_p=0.9, min_p=0.05)
    sv.sample(logits, samples, top_p=0.9)              # samples: [B, N] draws per row
    sv.argmax(logits, tokens)
    sv.sample(logits, tokens=t, temperature=0.7, logprobs=lp, logprobs_kind="raw")
    sv.sample(logits, tokens=t, top_k=50, logprobs=vals, logprob_token_ids=ids,
              logprobs_kind="processed")   # a top-N: values and token ids [B, N]
    sv.spec_verify(target_logits, draft_tokens, draft_probs, spec_trials=trials)
    sv.ngram_match(input_ids, input_ids_len, pre_ids, step_idx, draft_out)

Engines (each returns a Capture; .remove() undoes the patch):

    sv.hf_capture(model, steps=range(4))        # transformers: a LogitsProcessor after the warpers
    sv.hf_speculative_capture(trials=1000)      # transformers' _speculative_sampling
    sv.vllm_capture(steps=range(4))             # vLLM V1: Sampler and RejectionSampler forward
    sv.sglang_capture(steps=range(4))           # SGLang: Sampler.forward

Where captures go: the folder `out` (a path ending in .safetensors names
the file itself), else $SAMPVIZ_DIR, else ./sampviz-captures. When
$SAMPVIZ_URL is set (a running `sampviz serve`, e.g. http://127.0.0.1:8080)
each capture is sent there instead (PUT /api/runs/NAME, with
"Authorization: Bearer $SAMPVIZ_TOKEN" when that is set) and shows up live
in its browser; a server that does not answer, or refuses a dump, never
stops the engine: the capture goes to the folder, with one warning.

Named outputs: name="eager" writes each output as `probs@eager`,
`tokens@eager`, ... (DUMPS.md's `<output>@<name>`; a name is letters,
digits, "_", "-" and "."), so several captures of one input (eager and
CUDA graph, rank 0 and rank 1) can be compared side by side. Outputs are
written under a name only when name is given; a sampviz that predates named
outputs ignores them with a notice.

Logprobs: softmax, renorm, sample and argmax take logprobs= (every
token's [B, V], or a top-N [B, N] with its token ids logprob_token_ids=
[B, N], most probable first) and logprobs_kind= ("raw": log_softmax of the
logits before temperature and filters, vLLM's default raw_logprobs;
"processed": after them, -inf where a filter drops a token; vLLM's names
raw_logprobs and processed_logprobs are taken too). The kind is written as
the metadata logprobs_kind (logprobs_kind@NAME with name=).

Bad input raises before anything is written: TypeError or ValueError with
one sentence naming the tensor and the rule (a shape that does not fit, a
dtype a dump cannot hold, tensors on different devices). Engine hooks never
raise into the engine: a capture that fails is skipped with one warning.
"""

from __future__ import annotations

import ctypes
import importlib
import inspect
import itertools
import json
import os
import re
import struct
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings

import torch

__all__ = [
    "Capture", "argmax", "hf_capture", "hf_speculative_capture", "load", "ngram_match", "renorm",
    "sample", "save", "sglang_capture", "softmax", "spec_verify", "to_safetensors", "vllm_capture",
]

# --- safetensors -------------------------------------------------------------

# The dtypes a dump holds, by their safetensors names (DUMPS.md).
_DTYPES = {
    torch.bfloat16: "BF16", torch.float16: "F16", torch.float32: "F32", torch.float64: "F64",
    torch.int32: "I32", torch.int64: "I64", torch.uint8: "U8", torch.bool: "BOOL",
}
_FLOATS = (torch.bfloat16, torch.float16, torch.float32, torch.float64)
_INTS = (torch.int32, torch.int64, torch.uint8)
_DTYPE_LIST = "bf16, f16, f32, f64, int32, int64, uint8 or bool"
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def _raw(t: torch.Tensor) -> bytes:
    """Returns a tensor's bytes in row-major order and little-endian."""
    t = t.detach().to("cpu").contiguous()
    n = t.numel() * t.element_size()
    return ctypes.string_at(t.data_ptr(), n) if n else b""


def to_safetensors(tensors: dict, metadata: dict | None = None) -> bytes:
    """Returns the safetensors bytes of tensors (name → tensor, in order) and
    metadata (a string map): an 8-byte little-endian header length, a JSON
    header padded with spaces to a multiple of 8 bytes, then the data."""
    if sys.byteorder != "little":
        raise RuntimeError("sampviz_capture writes dumps on little-endian machines only")
    header: dict = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    parts, offset = [], 0
    for name, t in tensors.items():
        if t.dtype not in _DTYPES:
            raise TypeError(f"{name} has dtype {t.dtype}, which a dump cannot hold ({_DTYPE_LIST})")
        raw = _raw(t)
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        parts.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(parts)


_BY_NAME = {v: k for k, v in _DTYPES.items()}


def load(path: str | os.PathLike) -> tuple[dict, dict]:
    """Reads a safetensors dump: (name → tensor on the CPU, metadata)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path} is {len(data)} bytes, shorter than a safetensors header length")
    n = struct.unpack("<Q", data[:8])[0]
    if n > len(data) - 8:
        raise ValueError(f"{path}: its header is {n} bytes, past the end of the file")
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {}) or {}
    body = data[8 + n:]
    tensors = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        if e["dtype"] not in _BY_NAME or not 0 <= begin <= end <= len(body):
            raise ValueError(f"{path}: tensor {name} has dtype {e['dtype']} or offsets {e['data_offsets']} this reader does not take")
        dtype = _BY_NAME[e["dtype"]]
        raw = bytearray(body[begin:end])
        t = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        tensors[name] = t.reshape(e["shape"])
    return tensors, meta


# --- where captures go -------------------------------------------------------

_DEFAULT_DIR = "sampviz-captures"
_seq = itertools.count()
_warned: set = set()
_lock = threading.Lock()


def _warn_once(key, message: str) -> None:
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, RuntimeWarning, stacklevel=3)


class _Server:
    """Running `sampviz serve`s by $SAMPVIZ_URL. After a failure to reach one,
    captures go to the folder for `retry` seconds before it is tried again."""

    retry = 30.0

    def __init__(self):
        self.down_until: dict = {}  # url → time.monotonic() it may be tried again

    def send(self, url: str, file_name: str, body: bytes) -> str | None:
        """Returns the run's URL, or None when the capture must go to the folder."""
        if time.monotonic() < self.down_until.get(url, 0.0):
            return None
        req = urllib.request.Request(
            url.rstrip("/") + "/api/runs/" + urllib.parse.quote(file_name), data=body, method="PUT",
            headers={"Content-Type": "application/octet-stream"})
        token = os.environ.get("SAMPVIZ_TOKEN")
        if token:
            req.add_header("Authorization", "Bearer " + token)
        timeout = float(os.environ.get("SAMPVIZ_TIMEOUT", "5"))
        try:
            with urllib.request.urlopen(req, timeout=timeout) as res:
                run = json.loads(res.read() or b"{}")
            self.down_until.pop(url, None)
            return url.rstrip("/") + run.get("url", "/")
        except urllib.error.HTTPError as e:
            try:
                why = json.loads(e.read() or b"{}").get("error", "")
            except ValueError:
                why = ""
            if e.code == 401:
                self.down_until[url] = time.monotonic() + self.retry
                _warn_once(("sampviz-url", url, 401), f"sampviz_capture: {url} refused the capture without the right token (set SAMPVIZ_TOKEN); captures go to the folder")
            else:
                warnings.warn(f"sampviz_capture: {url} refused {file_name} (HTTP {e.code}: {why or e.reason}); it was written to the folder", RuntimeWarning, stacklevel=4)
            return None
        except (OSError, ValueError) as e:
            self.down_until[url] = time.monotonic() + self.retry
            _warn_once(("sampviz-url", url), f"sampviz_capture: {url} does not answer ({e}); captures go to the folder and the server is tried again every {self.retry:.0f} s")
            return None


_server = _Server()


def save(tensors: dict, metadata: dict | None = None, *, out: str | os.PathLike | None = None, tag: str = "capture") -> str:
    """Writes one dump and returns where it went: the run's URL when
    $SAMPVIZ_URL answered, else the file's path. out is a folder (default
    $SAMPVIZ_DIR, else ./sampviz-captures) or a path ending in .safetensors."""
    body = to_safetensors(tensors, metadata)
    out = os.fspath(out) if out is not None else os.environ.get("SAMPVIZ_DIR", _DEFAULT_DIR)
    if out.endswith(".safetensors"):
        folder, file_name = os.path.dirname(out) or ".", os.path.basename(out)
    else:
        folder, file_name = out, f"{tag}-{os.getpid()}-{next(_seq):04d}.safetensors"
    url = os.environ.get("SAMPVIZ_URL")
    if url:
        sent = _server.send(url, file_name, body)
        if sent:
            return sent
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, file_name)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(body)
    os.replace(tmp, path)
    return path


# --- one dump: tensors checked by name ---------------------------------------

class _Dump:
    """The tensors of one dump, each checked as it is added: a torch tensor,
    of a dtype a dump holds, on the device of the others, of its shape."""

    def __init__(self, op: str, name: str | None = None, source: str | None = None, metadata: dict | None = None):
        if name is not None and not _NAME.match(name):
            raise ValueError(f"output name {name!r} must be letters, digits, '_', '-' and '.' only")
        self.op, self.name = op, name
        self.tensors: dict = {}
        self.meta = {"op": op, "source": source or f"sampviz_capture (torch {torch.__version__})"}
        self.meta.update({k: str(v) for k, v in (metadata or {}).items()})
        self.device = None  # (tensor name, device) of the first tensor

    def _check(self, key: str, t, kind: str | None) -> torch.Tensor:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{key} is a {type(t).__name__}, not a torch.Tensor")
        if t.dtype not in _DTYPES:
            raise TypeError(f"{key} has dtype {t.dtype}, which a dump cannot hold ({_DTYPE_LIST})")
        if kind == "float" and t.dtype not in _FLOATS:
            raise TypeError(f"{key} has dtype {t.dtype}, but {key} must be a float tensor (bf16, f16, f32 or f64)")
        if kind == "int" and t.dtype not in _INTS:
            raise TypeError(f"{key} has dtype {t.dtype}, but {key} must be an integer tensor (int32, int64 or uint8)")
        if self.device is None:
            self.device = (key, t.device)
        elif t.device != self.device[1]:
            raise ValueError(f"{key} is on {t.device}, but {self.device[0]} is on {self.device[1]}: every tensor of one capture must be on one device")
        return t

    def add(self, key: str, t, kind: str | None = None, shape=None, *, output: bool = False) -> torch.Tensor:
        """Adds tensor t as key. shape lists the wanted sizes (None: any size
        there), each with the tensor and dim it comes from for the message."""
        t = self._check(key, t, kind)
        if shape is not None:
            sizes = [s if s is None or isinstance(s, int) else s[0] for s in shape]
            fits = t.dim() == len(shape) and all(s is None or t.shape[i] == s for i, s in enumerate(sizes))
            if not fits:
                want = ", ".join("·" if s is None else str(s) for s in sizes)
                names = ", ".join(s[1] for s in shape if isinstance(s, tuple))
                raise ValueError(f"{key} has shape {tuple(t.shape)}, but it must be [{want}] ({names})")
        if output and self.name:
            key = f"{key}@{self.name}"
        self.tensors[key] = t
        return t

    def param(self, key: str, value, rows: int, ref: str, kind: str) -> None:
        """Adds a sampling parameter: a number (one for every row) or a tensor
        of one value per row."""
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, (int, float, torch.Tensor)):
            raise TypeError(f"{key} is a {type(value).__name__}: give a number or a tensor of one value per row")
        if not isinstance(value, torch.Tensor):
            dtype = torch.float32 if kind == "float" else torch.int64
            value = torch.tensor(value, dtype=dtype, device=self.device[1] if self.device else None)
        if value.dim() == 2 and value.shape[1] == 1:
            value = value.reshape(-1)
        self._check(key, value, kind)
        if not (value.dim() == 0 or (value.dim() == 1 and value.shape[0] == rows)):
            raise ValueError(f"{key} has shape {tuple(value.shape)}, but it must be one value, or one per row of {ref} ({rows})")
        self.tensors[key] = value

    def write(self, out, tag: str | None = None) -> str:
        return save(self.tensors, self.meta, out=out, tag=tag or self.op)


def _rows_vocab(d: _Dump, key: str, logits) -> tuple[int, int]:
    t = d.add(key, logits, "float")
    if t.dim() != 2 or t.shape[0] == 0 or t.shape[1] == 0:
        hint = " (add a batch dimension: logits[None])" if t.dim() == 1 else ""
        raise ValueError(f"{key} has shape {tuple(t.shape)}, but it must be [B, V] with B and V at least 1{hint}")
    return t.shape[0], t.shape[1]


def _filters(d: _Dump, b: int, temperature, top_k, top_p, min_p, filter_order, top_k_ties) -> None:
    d.param("temperature", temperature, b, "logits", "float")
    d.param("top_k", top_k, b, "logits", "int")
    d.param("top_p", top_p, b, "logits", "float")
    d.param("min_p", min_p, b, "logits", "float")
    if filter_order is not None:
        d.meta["filter_order"] = filter_order
    if top_k_ties is not None:
        d.meta["top_k_ties"] = top_k_ties


# What logprobs_kind= takes: DUMPS.md's kinds, and vLLM's logprobs_mode names
# of the two that are log probabilities.
_LOGPROBS_KINDS = {"raw": "raw", "processed": "processed", "raw_logprobs": "raw", "processed_logprobs": "processed"}


def _logprobs(d: _Dump, b: int, v: int, logprobs, logprob_token_ids, logprobs_kind) -> None:
    """Adds logprobs ([B, V], or [B, N] beside logprob_token_ids [B, N]) and
    their kind (metadata logprobs_kind, or logprobs_kind@NAME)."""
    if logprobs is None:
        if logprob_token_ids is not None:
            raise ValueError("logprob_token_ids were given without logprobs: a top-N is its values [B, N] and their token ids [B, N]")
        return
    if logprob_token_ids is None:
        d.add("logprobs", logprobs, "float", [(b, "B of logits"), (v, "V of logits: every token's logprob, or give logprob_token_ids")], output=True)
    else:
        ids = d._check("logprob_token_ids", logprob_token_ids, "int")
        if ids.dim() != 2 or ids.shape[0] != b or not 1 <= ids.shape[1] <= v:
            raise ValueError(f"logprob_token_ids has shape {tuple(ids.shape)}, but it must be [{b}, N] with N in [1, {v}] (B and V of logits)")
        d.add("logprobs", logprobs, "float", [(b, "B of logits"), (ids.shape[1], "N of logprob_token_ids")], output=True)
        d.add("logprob_token_ids", ids, "int", output=True)
    if logprobs_kind is not None:
        kind = _LOGPROBS_KINDS.get(logprobs_kind) if isinstance(logprobs_kind, str) else None
        if kind is None:
            raise ValueError(f"logprobs_kind {logprobs_kind!r} must be 'raw' or 'processed' (vLLM's raw_logprobs or processed_logprobs)")
        d.meta["logprobs_kind@" + d.name if d.name else "logprobs_kind"] = kind


# --- plain calls -------------------------------------------------------------

def softmax(logits, probs=None, *, temperature=None, logprobs=None, logprob_token_ids=None, logprobs_kind=None,
            name=None, out=None, source=None, metadata=None) -> str:
    """Dumps a softmax: logits [B, V] and, when given, the probs [B, V] that
    your code made of them at temperature (a number or one per row), and
    its logprobs (see the module's docstring)."""
    d = _Dump("softmax", name, source, metadata)
    b, v = _rows_vocab(d, "logits", logits)
    d.param("temperature", temperature, b, "logits", "float")
    if probs is not None:
        d.add("probs", probs, "float", [(b, "B of logits"), (v, "V of logits")], output=True)
    _logprobs(d, b, v, logprobs, logprob_token_ids, logprobs_kind)
    return d.write(out)


def renorm(logits, probs=None, *, temperature=None, top_k=None, top_p=None, min_p=None,
           filter_order=None, top_k_ties=None, logprobs=None, logprob_token_ids=None, logprobs_kind=None,
           name=None, out=None, source=None, metadata=None) -> str:
    """Dumps a filtered softmax: logits [B, V], the filters (numbers or one
    per row) and, when given, the probs [B, V] your code made (filtered
    tokens exact zeros), and its logprobs."""
    d = _Dump("renorm", name, source, metadata)
    b, v = _rows_vocab(d, "logits", logits)
    _filters(d, b, temperature, top_k, top_p, min_p, filter_order, top_k_ties)
    if probs is not None:
        d.add("probs", probs, "float", [(b, "B of logits"), (v, "V of logits")], output=True)
    _logprobs(d, b, v, logprobs, logprob_token_ids, logprobs_kind)
    return d.write(out)


def sample(logits, samples=None, *, tokens=None, temperature=None, top_k=None, top_p=None, min_p=None,
           seed=None, offset=None, filter_order=None, top_k_ties=None, logprobs=None, logprob_token_ids=None,
           logprobs_kind=None, name=None, out=None, source=None, metadata=None) -> str:
    """Dumps sampling: logits [B, V], the filters, and your sampler's draws:
    samples [B, N] (N draws per row, judged statistically) and/or tokens [B],
    and the logprobs it returned."""
    d = _Dump("sample", name, source, metadata)
    b, v = _rows_vocab(d, "logits", logits)
    _filters(d, b, temperature, top_k, top_p, min_p, filter_order, top_k_ties)
    d.param("seed", seed, b, "logits", "int")
    d.param("offset", offset, b, "logits", "int")
    if samples is not None:
        d.add("samples", samples, "int", [(b, "B of logits"), None], output=True)
    if tokens is not None:
        d.add("tokens", tokens, "int", [(b, "B of logits")], output=True)
    _logprobs(d, b, v, logprobs, logprob_token_ids, logprobs_kind)
    return d.write(out)


def argmax(logits, tokens=None, *, logprobs=None, logprob_token_ids=None, logprobs_kind=None,
           name=None, out=None, source=None, metadata=None) -> str:
    """Dumps greedy decoding: logits [B, V] and your tokens [B], and the
    logprobs your code returned."""
    d = _Dump("argmax", name, source, metadata)
    b, v = _rows_vocab(d, "logits", logits)
    if tokens is not None:
        d.add("tokens", tokens, "int", [(b, "B of logits")], output=True)
    _logprobs(d, b, v, logprobs, logprob_token_ids, logprobs_kind)
    return d.write(out)


def logits_gate(golden, modes: dict, *, out=None, source=None, metadata=None) -> str:
    """Dumps the golden-logits gate: the golden logits [B, V] (Hugging Face
    in fp32, say) and, per mode, an engine's logits for the same rows
    ({"eager": t, "graph": u}, each [B, V], any float dtype), written as
    logits and logits@MODE. sampviz judges every mode against the golden:
    |Δlogit|, KL at T = 1 and every top-1 flip, real or fragile."""
    d = _Dump("logits_gate", None, source, metadata)
    b, v = _rows_vocab(d, "logits", golden)
    if not isinstance(modes, dict) or not modes:
        raise ValueError("modes must be a dict of at least one mode name to its logits tensor")
    for mode, t in modes.items():
        if not isinstance(mode, str) or not _NAME.fullmatch(mode) or len(mode) > 64:
            raise ValueError(f"mode {mode!r} is not a name: 1 to 64 letters, digits, '_', '-' or '.'")
        d.add(f"logits@{mode}", t, "float", [(b, "B of logits"), (v, "V of logits")])
    return d.write(out)


def spec_verify(target_logits, draft_tokens, draft_probs=None, *, spec_tokens=None, spec_emitted=None,
                spec_accepted=None, spec_trials=None, temperature=None, top_k=None, top_p=None, min_p=None,
                seed=None, offset=None, filter_order=None, top_k_ties=None, name=None, out=None, source=None,
                metadata=None) -> str:
    """Dumps chain speculative verification: target_logits [B, K+1, V],
    draft_tokens [B, K], draft_probs [B, K, V] (None: one-hot drafts), and
    your verifier's output: spec_tokens [B, K+1] (-1 after the first
    rejection) with spec_emitted [B] and spec_accepted [B], and/or
    spec_trials [T, B, K+1] (T repeated verifications, judged statistically)."""
    d = _Dump("spec_verify", name, source, metadata)
    t = d.add("target_logits", target_logits, "float")
    if t.dim() != 3 or 0 in t.shape:
        raise ValueError(f"target_logits has shape {tuple(t.shape)}, but it must be [B, K+1, V] with B, K+1 and V at least 1")
    b, k1, v = t.shape
    d.add("draft_tokens", draft_tokens, "int", [(b, "B of target_logits"), (k1 - 1, "K of target_logits")])
    if draft_probs is not None:
        d.add("draft_probs", draft_probs, "float", [(b, "B"), (k1 - 1, "K"), (v, "V of target_logits")])
    _filters(d, b, temperature, top_k, top_p, min_p, filter_order, top_k_ties)
    d.param("seed", seed, b, "target_logits", "int")
    d.param("offset", offset, b, "target_logits", "int")
    if spec_tokens is not None:
        d.add("spec_tokens", spec_tokens, "int", [(b, "B"), (k1, "K+1 of target_logits")], output=True)
    if spec_emitted is not None:
        d.add("spec_emitted", spec_emitted, "int", [(b, "B of target_logits")], output=True)
    if spec_accepted is not None:
        d.add("spec_accepted", spec_accepted, "int", [(b, "B of target_logits")], output=True)
    if spec_trials is not None:
        d.add("spec_trials", spec_trials, "int", [None, (b, "B"), (k1, "K+1 of target_logits")], output=True)
    return d.write(out)


def ngram_match(input_ids, input_ids_len, pre_ids, step_idx, draft_out=None, *, max_ngram_size=None,
                max_draft_tokens=None, threshold=None, name=None, out=None, source=None, metadata=None) -> str:
    """Dumps prompt-lookup drafting: input_ids [B, L] with input_ids_len [B],
    pre_ids [B, M] with step_idx [B], and your drafts draft_out [B, D]
    (-1 padded; D is max_draft_tokens, 8 unless given)."""
    d = _Dump("ngram_match", name, source, metadata)
    ids = d.add("input_ids", input_ids, "int")
    if ids.dim() != 2 or ids.shape[0] == 0:
        raise ValueError(f"input_ids has shape {tuple(ids.shape)}, but it must be [B, L] with B at least 1")
    b = ids.shape[0]
    d.add("input_ids_len", input_ids_len, "int", [(b, "B of input_ids")])
    d.add("pre_ids", pre_ids, "int", [(b, "B of input_ids"), None])
    d.add("step_idx", step_idx, "int", [(b, "B of input_ids")])
    for key, value in (("max_ngram_size", max_ngram_size), ("max_draft_tokens", max_draft_tokens), ("threshold", threshold)):
        if value is not None:
            d.meta[key] = str(int(value))
    if draft_out is not None:
        width = int(max_draft_tokens) if max_draft_tokens is not None else 8
        d.add("draft_out", draft_out, "int", [(b, "B of input_ids"), (width, "max_draft_tokens")], output=True)
    return d.write(out)


# --- engine hooks: shared parts ----------------------------------------------

class Capture:
    """An installed hook. remove() (or leaving a `with` block) undoes it;
    written lists where each capture went."""

    def __init__(self, what: str):
        self.what = what
        self.written: list[str] = []
        self._undo: list = []

    def remove(self) -> None:
        while self._undo:
            self._undo.pop()()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()

    def __repr__(self):
        return f"<sampviz_capture {self.what}: {len(self.written)} captures>"


class _Steps:
    """Which calls of a hook are captured: None (all), an int, an iterable of
    ints or a predicate, counted from 0 for each hook."""

    def __init__(self, steps):
        if steps is None or callable(steps):
            self.want = steps
        elif isinstance(steps, int):
            self.want = {steps}.__contains__
        else:
            self.want = set(int(s) for s in steps).__contains__
        self.n = 0
        self.lock = threading.Lock()

    def next(self) -> tuple[int, bool]:
        with self.lock:
            n, self.n = self.n, self.n + 1
        return n, self.want is None or bool(self.want(n))


def _guard(cap: Capture, what: str, fn) -> None:
    """Runs one capture: a failure is a warning, never the engine's error."""
    try:
        where = fn()
        if where:
            cap.written.append(where)
    except Exception as e:  # noqa: BLE001 - the engine must keep running
        _warn_once(("capture", what, type(e).__name__), f"sampviz_capture: a {what} capture failed and was skipped: {e}")


def _version(module: str) -> str:
    try:
        return str(getattr(importlib.import_module(module), "__version__", "unknown"))
    except Exception:  # noqa: BLE001
        return "unknown"


def _params_of(fn) -> list[str]:
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


def _mismatch(engine: str, version: str, what: str, source: str) -> RuntimeError:
    return RuntimeError(f"sampviz_capture cannot hook {engine} {version}: {what}, unlike {source}, which this hook was written for")


def _per_row(t, b: int, dtype) -> torch.Tensor | None:
    if t is None:
        return None
    if not isinstance(t, torch.Tensor):
        t = torch.tensor(t)
    return t.detach().reshape(-1)[:b].to("cpu", dtype).clone()


# --- Hugging Face transformers ------------------------------------------------
#
# Read against huggingface/transformers src/transformers/generation/utils.py
# (commit 000034a, the 4.5x line): generate() builds its processors in
# _get_logits_processor, with the processors given to generate() merged
# before the warpers (TemperatureLogitsWarper, TopKLogitsWarper,
# TopPLogitsWarper, MinPLogitsWarper, then typical, epsilon, eta), and
# _assisted_decoding calls the module function _speculative_sampling(
# candidate_input_ids, candidate_logits, candidate_length, new_logits,
# is_done_candidate) -> (valid_tokens, n_matches) on the processed scores.

_HF_WARPERS = {  # class name → the dump parameter it sets (None: not expressible)
    "TemperatureLogitsWarper": "temperature", "TopKLogitsWarper": "top_k", "TopPLogitsWarper": "top_p",
    "MinPLogitsWarper": "min_p", "TypicalLogitsWarper": None, "EpsilonLogitsWarper": None,
    "EtaLogitsWarper": None, "TopHLogitsWarper": None,
}
_hf_cache: dict = {}


def _hf_base():
    try:
        from transformers.generation.logits_process import LogitsProcessor
    except ImportError as e:
        raise RuntimeError(f"sampviz_capture's Hugging Face hooks need transformers ({e})") from e
    return LogitsProcessor


def _hf_warper(p) -> tuple[str, str | None] | None:
    """Returns (class name, dump parameter) when p is one of the warpers."""
    for cls in type(p).__mro__:
        if cls.__name__ in _HF_WARPERS:
            return cls.__name__, _HF_WARPERS[cls.__name__]
    return None


class _HFState:
    """What a generate() call's tap and recorder share."""

    def __init__(self, cap: Capture, steps, out, name, procs):
        self.cap, self.steps, self.out, self.name, self.procs = cap, _Steps(steps), out, name, procs
        self.pending = None  # (step, scores at the tap)


def _hf_classes():
    """Builds the transformers LogitsProcessor subclasses once transformers
    is importable: the tap before the warpers and SampvizLogitsProcessor."""
    if _hf_cache:
        return _hf_cache["tap"], _hf_cache["rec"]
    base = _hf_base()

    class SampvizTap(base):
        """Keeps the scores that enter the warpers at a captured step."""

        def __init__(self, state):
            self.state = state

        def __call__(self, input_ids, scores):
            step, want = self.state.steps.next()
            if want:
                self.state.pending = (step, scores.detach().clone())
            return scores

    class SampvizLogitsProcessor(base):
        """The last processor: at a captured step it dumps the scores the tap
        kept as `logits`, the warpers' parameters, and softmax of the scores it
        receives (what transformers samples from) as `probs`. It returns the
        scores unchanged. hf_capture installs it with its tap."""

        def __init__(self, state):
            self.state = state

        def __call__(self, input_ids, scores):
            st = self.state
            if st.pending is not None:
                step, logits = st.pending
                st.pending = None
                _guard(st.cap, "transformers", lambda: _hf_record(st, step, logits, scores))
            return scores

    _hf_cache.update(tap=SampvizTap, rec=SampvizLogitsProcessor)
    return SampvizTap, SampvizLogitsProcessor


def __getattr__(attr):  # PEP 562: SampvizLogitsProcessor exists once transformers does
    if attr == "SampvizLogitsProcessor":
        return _hf_classes()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")


def _hf_record(st: _HFState, step: int, logits, scores) -> str | None:
    params, notes, names = {}, [], []
    started = False
    for p in st.procs:
        kind = _hf_warper(p)
        names.append(type(p).__name__)
        if type(p).__name__.startswith("Sampviz"):
            continue
        if kind is None:
            if started:
                notes.append(type(p).__name__)
            continue
        started = True
        cls, key = kind
        if key is None:
            _warn_once(("hf", cls), f"sampviz_capture: {cls} has no counterpart in the dump format, so generation steps through it are not captured")
            return None
        params[key] = getattr(p, key)
    filtered = any(k in params for k in ("top_k", "top_p", "min_p"))
    meta = {"transformers_processors": ", ".join(names)}
    if notes:
        meta["note"] = "processors after the warpers, outside the dump's filters: " + ", ".join(notes)
    probs = torch.softmax(scores.detach().float(), dim=-1)
    source = f"transformers {_version('transformers')} generate, step {step}"
    op = renorm if filtered else softmax
    kwargs = {k: params[k] for k in ("top_k", "top_p", "min_p") if k in params} if filtered else {}
    return op(logits, probs, temperature=params.get("temperature"), name=st.name, out=st.out,
              source=source, metadata=meta, **kwargs)


def hf_capture(model, *, steps=None, out=None, name=None) -> Capture:
    """Captures the sampling steps of model.generate(): for every generate()
    call, a tap before transformers' warpers keeps the scores that enter them
    (the raw logits, after any processors such as a repetition penalty), and
    SampvizLogitsProcessor after the last one dumps those scores as `logits`
    with the warpers' temperature, top_k, top_p and min_p, and softmax of the
    scores the warpers produced as `probs`: a renorm dump (softmax when no
    filter is on) that says whether transformers' warpers follow DUMPS.md.
    steps picks the generation steps (None: all). Not for assisted
    generation: use hf_speculative_capture."""
    _hf_classes()
    get = getattr(model, "_get_logits_processor", None)
    if not callable(get):
        raise _mismatch("transformers", _version("transformers"), f"{type(model).__name__} has no _get_logits_processor",
                        "generation/utils.py's GenerationMixin")
    cap = Capture("transformers generate")
    had = "_get_logits_processor" in vars(model)
    tap_cls, rec_cls = _hf_classes()

    def wrapped(*args, **kwargs):
        procs = get(*args, **kwargs)
        try:
            st = _HFState(cap, steps, out, name, procs)
            at = next((i for i, p in enumerate(procs) if _hf_warper(p)), len(procs))
            procs.insert(at, tap_cls(st))
            procs.append(rec_cls(st))
        except Exception as e:  # noqa: BLE001
            _warn_once(("hf", "install"), f"sampviz_capture: could not add the capture to generate()'s processors ({e}); generation goes on uncaptured")
        return procs

    model._get_logits_processor = wrapped

    def undo():
        if had:
            model._get_logits_processor = get
        else:
            vars(model).pop("_get_logits_processor", None)

    cap._undo.append(undo)
    return cap


_HF_SPEC_PARAMS = ["candidate_input_ids", "candidate_logits", "candidate_length", "new_logits", "is_done_candidate"]


def hf_speculative_capture(*, trials=1000, steps=None, out=None, name=None) -> Capture:
    """Captures transformers' speculative verification: each captured call of
    transformers.generation.utils._speculative_sampling is dumped as a
    spec_verify dump: target_logits [1, K+1, V] (the processed scores, so
    softmax of them is p), draft_tokens [1, K], draft_probs q [1, K, V], and
    spec_trials [T, 1, K+1]: the engine's own verification, then `trials`
    more of the same inputs by the same function, run on a forked RNG so the
    generation's random stream is left as it was."""
    module = importlib.import_module("transformers.generation.utils")
    orig = getattr(module, "_speculative_sampling", None)
    version = _version("transformers")
    if orig is None or _params_of(orig)[:5] != _HF_SPEC_PARAMS:
        raise _mismatch("transformers", version, "transformers.generation.utils._speculative_sampling is missing or takes other arguments",
                        "_speculative_sampling(candidate_input_ids, candidate_logits, candidate_length, new_logits, is_done_candidate)")
    cap = Capture("transformers _speculative_sampling")
    counter = _Steps(steps)

    def wrapped(candidate_input_ids, candidate_logits, candidate_length, new_logits, is_done_candidate, *args, **kwargs):
        result = orig(candidate_input_ids, candidate_logits, candidate_length, new_logits, is_done_candidate, *args, **kwargs)
        step, want = counter.next()
        if want:
            _guard(cap, "transformers speculative", lambda: _hf_spec_record(
                orig, step, trials, out, name, version, result, is_done_candidate,
                candidate_input_ids, candidate_logits, candidate_length, new_logits, args, kwargs))
        return result

    module._speculative_sampling = wrapped
    cap._undo.append(lambda: setattr(module, "_speculative_sampling", orig))
    return cap


def _spec_row(valid, k1: int) -> torch.Tensor:
    row = torch.full((valid.shape[0], k1), -1, dtype=torch.int64, device=valid.device)
    row[:, :valid.shape[1]] = valid.to(torch.int64)
    return row


def _hf_spec_record(orig, step, trials, out, name, version, result, is_done, cand_ids, cand_logits, k, new_logits, args, kwargs):
    k = int(k)
    if k < 1 or cand_logits is None:
        return None
    if cand_logits.shape[-1] != new_logits.shape[-1] or cand_logits.shape[1] < k:
        raise ValueError(f"the drafter's logits {tuple(cand_logits.shape)} do not fit the target's {tuple(new_logits.shape)}")
    runs = [] if is_done else [_spec_row(result[0], k + 1)]
    devices = [new_logits.device.index or 0] if new_logits.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        for _ in range(int(trials)):
            valid, _ = orig(cand_ids, cand_logits, k, new_logits, False, *args, **kwargs)
            runs.append(_spec_row(valid, k + 1))
    if not runs:
        return None
    q = torch.softmax(cand_logits[:, :k].float(), dim=-1)
    return spec_verify(new_logits[:, :k + 1].float(), cand_ids[:, -k:].to(torch.int64), q,
                       spec_trials=torch.stack(runs), name=name, out=out,
                       source=f"transformers {version} _speculative_sampling, call {step}",
                       metadata={"note": "target_logits are transformers' processed scores: temperature and filters are applied in them"})


# --- vLLM ------------------------------------------------------------------
#
# Read against vllm-project/vllm's V1 engine: vllm/v1/sample/sampler.py
# (commit 3e34265): Sampler.forward(logits, sampling_metadata,
# predict_bonus_token=False) applies the logits processors and penalties,
# then self.sample(logits, sampling_metadata), which applies temperature,
# the argmax-invariant processors (min-p: MinPLogitsProcessor of
# logits_processor/builtin.py, commit bf17660) and top-k/top-p, and returns
# SamplerOutput(sampled_token_ids [B, 1]); vllm/v1/sample/metadata.py
# (commit 82ac55c) SamplingMetadata(temperature, all_greedy, all_random,
# top_p, top_k, generators, logitsprocs, ...);
# vllm/v1/sample/rejection_sampler.py (commit 7f6fc1c)
# RejectionSampler.forward(metadata: SpecDecodeMetadata, draft_probs,
# logits, sampling_metadata) samples the bonus tokens through self.sampler,
# processes the target logits with self.apply_logits_processors, then
# temperature, top-k and top-p, and returns sampled_token_ids [B, K+1] with
# -1 after a rejection; vllm/v1/spec_decode/metadata.py (commit bed874f).

_tls = threading.local()
_EPS = 1e-5  # vLLM's _SAMPLING_EPS: a temperature below it is greedy


def _vllm_temperature(md, b: int) -> torch.Tensor:
    if md.all_greedy or md.temperature is None:
        return torch.zeros(b)
    t = _per_row(md.temperature, b, torch.float32)
    return torch.where(t < _EPS, torch.zeros_like(t), t)


def _vllm_filters(md, rows, v: int) -> dict:
    out = {}
    if md.top_k is not None:
        k = md.top_k.detach().reshape(-1).cpu()[rows].to(torch.int64)
        out["top_k"] = torch.where((k <= 0) | (k >= v), torch.zeros_like(k), k)
    if md.top_p is not None:
        out["top_p"] = md.top_p.detach().reshape(-1).cpu()[rows].to(torch.float32)
    return out


def _vllm_min_p(md, b: int):
    """min-p per row from the MinPLogitsProcessor, and the names of other
    argmax-invariant processors (applied where sampviz has no counterpart)."""
    procs = getattr(getattr(md, "logitsprocs", None), "argmax_invariant", None) or []
    min_p, others = None, []
    for p in procs:
        if type(p).__name__ == "MinPLogitsProcessor":
            if getattr(p, "min_p_count", 0):
                min_p = torch.tensor([float(p.get_min_p_by_index(i)) for i in range(b)])
        else:
            others.append(type(p).__name__)
    return min_p, others


def _vllm_meta(md) -> dict:
    meta = {}
    gens = getattr(md, "generators", None) or {}
    if gens:
        meta["engine_seeds"] = json.dumps({str(i): g.initial_seed() for i, g in sorted(gens.items())})
    return meta


def vllm_capture(*, steps=None, out=None, name=None) -> Capture:
    """Captures vLLM's (V1) sampler: each captured Sampler.forward call is a
    sample dump of the logits that Sampler.sample receives (after vLLM's
    penalties and processors, before temperature), temperature, top_k, top_p
    and min_p per row (torch generators' seeds as metadata engine_seeds),
    and the sampled tokens, with the logprobs vLLM returned when requests
    asked for them (logprobs_mode raw_logprobs or processed_logprobs; the
    top-N without its first column, the sampled token's); each captured RejectionSampler.forward call is a
    spec_verify dump of the rows with the full K drafts: target logits at
    the K positions and the bonus, draft tokens, draft probs (absent for
    n-gram drafts), temperature, top_k, top_p, and the output (spec_tokens,
    spec_emitted). Install it before the engine starts, at the top of the
    script, so that vLLM's worker processes inherit it (or set
    VLLM_ENABLE_V1_MULTIPROCESSING=0). Raises RuntimeError, in one sentence,
    when the installed vLLM's internals are not the ones read."""
    version = _version("vllm")
    try:
        sampler_mod = importlib.import_module("vllm.v1.sample.sampler")
        rejection_mod = importlib.import_module("vllm.v1.sample.rejection_sampler")
        metadata_mod = importlib.import_module("vllm.v1.sample.metadata")
    except ImportError as e:
        raise _mismatch("vLLM", version, f"vllm.v1.sample cannot be imported ({e})", "vllm/v1/sample of the V1 engine") from e
    sampler_cls = getattr(sampler_mod, "Sampler", None)
    rejection_cls = getattr(rejection_mod, "RejectionSampler", None)
    md_cls = getattr(metadata_mod, "SamplingMetadata", None)
    src = "vllm/v1/sample/sampler.py (commit 3e34265) and rejection_sampler.py (commit 7f6fc1c)"
    checks = [
        (sampler_cls is not None and _params_of(sampler_cls.forward)[1:3] == ["logits", "sampling_metadata"],
         "Sampler.forward does not take (logits, sampling_metadata)"),
        (sampler_cls is not None and callable(getattr(sampler_cls, "sample", None)), "Sampler has no sample method"),
        (rejection_cls is not None and _params_of(rejection_cls.forward)[1:5] == ["metadata", "draft_probs", "logits", "sampling_metadata"],
         "RejectionSampler.forward does not take (metadata, draft_probs, logits, sampling_metadata)"),
        (rejection_cls is not None and callable(getattr(rejection_cls, "apply_logits_processors", None)),
         "RejectionSampler has no apply_logits_processors method"),
        (md_cls is not None and all(f in getattr(md_cls, "__dataclass_fields__", {}) for f in
                                    ("temperature", "all_greedy", "top_p", "top_k", "generators", "logitsprocs")),
         "SamplingMetadata lacks temperature, all_greedy, top_p, top_k, generators or logitsprocs"),
    ]
    for ok, what in checks:
        if not ok:
            raise _mismatch("vLLM", version, what, src)
    cap = Capture("vLLM sampler")
    sample_steps, spec_steps = _Steps(steps), _Steps(steps)
    orig_forward, orig_rejection = sampler_cls.forward, rejection_cls.forward

    def forward(self, logits, sampling_metadata, *args, **kwargs):
        bonus = getattr(_tls, "bonus", None)
        if getattr(_tls, "in_rejection", False):
            if bonus is None:  # the bonus tokens of a verification that is not captured
                return orig_forward(self, logits, sampling_metadata, *args, **kwargs)
            slot, step = bonus, None
        else:
            step, want = sample_steps.next()
            if not want:
                return orig_forward(self, logits, sampling_metadata, *args, **kwargs)
            slot = {}
        bound = self.sample

        def sample(logits_, md_, *a, **kw):
            slot["logits"] = logits_.detach().clone()
            return bound(logits_, md_, *a, **kw)

        if bonus is None and getattr(sampling_metadata, "max_num_logprobs", None) is not None:
            # Raw logprobs are taken from the logits as forward receives them,
            # before vLLM's penalties and processors.
            slot["raw_logits"] = logits.detach().float().clone()
            slot["logprobs_mode"] = getattr(self, "logprobs_mode", "raw_logprobs")
        self.sample = sample
        try:
            result = orig_forward(self, logits, sampling_metadata, *args, **kwargs)
        finally:
            vars(self).pop("sample", None)
        if bonus is None:
            _guard(cap, "vLLM sampler", lambda: _vllm_sample(slot, sampling_metadata, result, step, out, name, version))
        return result

    def rejection_forward(self, metadata, draft_probs, logits, sampling_metadata, *args, **kwargs):
        step, want = spec_steps.next()
        _tls.in_rejection = True
        slot = {}
        if want:
            _tls.bonus = slot
            bound = self.apply_logits_processors

            def apply_logits_processors(*a, **kw):
                target = bound(*a, **kw)
                slot["target"] = target.detach().clone()
                return target

            self.apply_logits_processors = apply_logits_processors
        try:
            result = orig_rejection(self, metadata, draft_probs, logits, sampling_metadata, *args, **kwargs)
        finally:
            _tls.in_rejection, _tls.bonus = False, None
            vars(self).pop("apply_logits_processors", None)
        if want:
            _guard(cap, "vLLM rejection sampler", lambda: _vllm_spec(
                slot, metadata, draft_probs, sampling_metadata, result, step, out, name, version))
        return result

    sampler_cls.forward, rejection_cls.forward = forward, rejection_forward

    def undo():
        sampler_cls.forward, rejection_cls.forward = orig_forward, orig_rejection

    cap._undo.append(undo)
    return cap


def _vllm_logprobs(slot, md, result, logits, meta) -> dict:
    """The logprobs vLLM returned (result.logprobs_tensors) as sample()'s
    keywords, or {} with the reason in meta["logprobs_note"]: every token's
    when max_num_logprobs is -1, else the top-N without the first column
    (gather_logprobs puts the sampled token there: it is the dump's tokens).
    Raw logprobs are of the logits before vLLM's penalties and processors:
    they are written only when those left the logits as they were."""
    lt = getattr(result, "logprobs_tensors", None)
    mode = slot.get("logprobs_mode")
    if lt is None or mode is None:
        return {}
    why = None
    if getattr(md, "logprobs_mode_override", None) is not None:
        why = "requests override logprobs_mode"
    elif mode not in ("raw_logprobs", "processed_logprobs"):
        why = f"logprobs_mode {mode} returns logits, not log probabilities"
    elif mode == "raw_logprobs" and not torch.equal(slot["raw_logits"], logits.float()):
        why = "raw logprobs are of the logits before vLLM's penalties and processors, which changed them"
    if why is not None:
        meta["logprobs_note"] = "logprobs not written: " + why
        return {}
    ids, values = lt.logprob_token_ids.detach(), lt.logprobs.detach()
    kind = "raw" if mode == "raw_logprobs" else "processed"
    if ids.numel() == 0:
        return {"logprobs": values.float().cpu(), "logprobs_kind": kind}
    return {"logprobs": values[:, 1:].float().cpu(), "logprob_token_ids": ids[:, 1:].to(torch.int64).cpu(), "logprobs_kind": kind}


def _vllm_sample(slot, md, result, step, out, name, version):
    logits = slot.get("logits")
    if logits is None:
        raise ValueError("Sampler.forward never called Sampler.sample")
    b, v = logits.shape
    rows = torch.arange(b)
    min_p, others = _vllm_min_p(md, b)
    meta = _vllm_meta(md)
    meta["semantics"] = "vllm"  # min-p before top-k and top-p (docs/SEMANTICS.md)
    if others:
        meta["note"] = "argmax-invariant processors outside the dump's filters: " + ", ".join(others)
    tokens = result.sampled_token_ids.detach().reshape(b, -1)[:, 0].to(torch.int64)
    filters = {k: t.cpu() for k, t in _vllm_filters(md, rows, v).items()}
    if md.all_greedy:
        # An all-greedy batch is not filtered (Sampler.sample returns before
        # top-k and top-p): nor are its processed logprobs.
        filters, min_p = {}, None
    lp = _vllm_logprobs(slot, md, result, logits, meta)
    return sample(logits.cpu(), tokens=tokens.cpu(), temperature=_vllm_temperature(md, b), min_p=min_p,
                  name=name, out=out, source=f"vLLM {version} Sampler.forward, call {step}", metadata=meta,
                  **filters, **lp)


def _vllm_spec(slot, metadata, draft_probs, md, result, step, out, name, version):
    target, bonus = slot.get("target"), slot.get("logits")
    if target is None or bonus is None:
        raise ValueError("RejectionSampler.forward did not process target logits and bonus logits as expected")
    counts = list(metadata.num_draft_tokens)
    k = max(counts) if counts else 0
    starts = [sum(counts[:i]) for i in range(len(counts))]
    rows = [i for i, n in enumerate(counts) if n == k and k >= 1]
    if not rows:
        return None
    v = target.shape[-1]
    draft_ids = metadata.draft_token_ids.detach()
    tl = torch.stack([torch.cat([target[starts[i]:starts[i] + k], bonus[i:i + 1]]) for i in rows]).float()
    dt = torch.stack([draft_ids[starts[i]:starts[i] + k] for i in rows]).to(torch.int64)
    dp = None
    if draft_probs is not None:
        dp = torch.stack([draft_probs.detach()[starts[i]:starts[i] + k] for i in rows]).float()
    tokens = result.sampled_token_ids.detach()[rows].to(torch.int64)
    emitted = (tokens != -1).sum(dim=1) - 1
    sel = torch.tensor(rows)
    meta = _vllm_meta(md)
    min_p, _ = _vllm_min_p(md, len(counts))
    if min_p is not None and bool((min_p[sel] > 0).any()):
        meta["note"] = "min_p is not written: vLLM applies it to the bonus token only"
    if len(rows) < len(counts):
        meta["skipped_rows"] = ", ".join(str(i) for i in range(len(counts)) if i not in rows)
    return spec_verify(tl.cpu(), dt.cpu(), None if dp is None else dp.cpu(), spec_tokens=tokens.cpu(),
                       spec_emitted=emitted.cpu(), temperature=_vllm_temperature(md, len(counts))[sel],
                       name=name, out=out, source=f"vLLM {version} RejectionSampler.forward, call {step}", metadata=meta,
                       **{key: t.cpu() for key, t in _vllm_filters(md, sel, v).items()})


# --- SGLang ------------------------------------------------------------------
#
# Read against sgl-project/sglang python/sglang/srt/layers/sampler.py
# (commit 584f55d): Sampler.forward(logits_output, sampling_info, ...) takes
# logits_output.next_token_logits, divides it in place by
# sampling_info.temperatures [B, 1], softmaxes it in place, and samples with
# top_ks, top_ps (flashinfer's filter_apply_order="joint") and, when
# need_min_p_sampling, top-k and top-p renormalisation then min_ps; it
# returns batch_next_token_ids [B]. All-greedy batches (is_all_greedy) take
# the argmax.

def sglang_capture(*, steps=None, out=None, name=None) -> Capture:
    """Captures SGLang's sampler: each captured Sampler.forward call is a
    sample dump of next_token_logits (copied before the sampler changes them
    in place), temperatures, top_ks, top_ps, min_ps and the tokens it
    returns. Install it at the top of the script that starts the engine, so
    that SGLang's scheduler processes inherit or re-import it. Raises
    RuntimeError, in one sentence, when the installed SGLang's internals are
    not the ones read."""
    version = _version("sglang")
    src = "sglang/srt/layers/sampler.py (commit 584f55d)"
    try:
        sampler_cls = importlib.import_module("sglang.srt.layers.sampler").Sampler
    except (ImportError, AttributeError) as e:
        raise _mismatch("SGLang", version, f"sglang.srt.layers.sampler.Sampler cannot be imported ({e})", src) from e
    if _params_of(sampler_cls.forward)[1:3] != ["logits_output", "sampling_info"]:
        raise _mismatch("SGLang", version, "Sampler.forward does not take (logits_output, sampling_info)", src)
    cap = Capture("SGLang sampler")
    counter = _Steps(steps)
    orig = sampler_cls.forward

    def forward(self, logits_output, sampling_info, *args, **kwargs):
        step, want = counter.next()
        if not want:
            return orig(self, logits_output, sampling_info, *args, **kwargs)
        logits = None
        try:
            logits = logits_output.next_token_logits.detach().clone()
        except Exception as e:  # noqa: BLE001
            _warn_once(("sglang", "logits"), f"sampviz_capture: SGLang's logits_output has no next_token_logits ({e}); not captured")
        result = orig(self, logits_output, sampling_info, *args, **kwargs)
        if logits is not None:
            _guard(cap, "SGLang sampler", lambda: _sglang_sample(logits, sampling_info, result, step, out, name, version))
        return result

    sampler_cls.forward = forward
    cap._undo.append(lambda: setattr(sampler_cls, "forward", orig))
    return cap


def _sglang_sample(logits, si, result, step, out, name, version):
    b, v = logits.shape
    greedy = bool(getattr(si, "is_all_greedy", False))
    temperature = torch.zeros(b) if greedy else _per_row(si.temperatures, b, torch.float32)
    top_k = _per_row(getattr(si, "top_ks", None), b, torch.int64)
    if top_k is not None:
        top_k = torch.where((top_k <= 0) | (top_k >= v), torch.zeros_like(top_k), top_k)
    use_min_p = bool(getattr(si, "need_min_p_sampling", False))
    min_p = _per_row(si.min_ps, b, torch.float32) if use_min_p else None
    meta = {"filter_order": "top_k_first" if use_min_p else "joint"}
    if getattr(si, "has_custom_logit_processor", False):
        meta["note"] = "custom logit processors changed the logits after this capture"
    tokens = result if isinstance(result, torch.Tensor) and result.dim() == 1 and result.shape[0] == b else None
    return sample(logits.cpu(), tokens=None if tokens is None else tokens.detach().to(torch.int64).cpu(),
                  temperature=temperature.cpu(), top_k=None if top_k is None else top_k.cpu(),
                  top_p=_per_row(getattr(si, "top_ps", None), b, torch.float32), min_p=min_p,
                  name=name, out=out, source=f"SGLang {version} Sampler.forward, call {step}", metadata=meta)


if __name__ == "__main__":  # pragma: no cover
    print(__doc__)
