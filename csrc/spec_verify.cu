// spec_verify.cu: spec_verify's launcher: with filters, the top-k fast
// path, the prepare for the positions it flagged and the chain; without, a
// prepare (one block a position, bf16 rows with staging tiles for their
// second read, or a cluster a position where they are few) and the lean
// chain. The kernels are spec_verify.cuh's.
#include "spec_verify.cuh"

namespace sv {
namespace {

size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

// split_layout says whether an unfiltered launch of slots positions takes
// spec_split_kernel, and with which cluster size and chunk: only when the
// slots alone do not fill the GPU (one block each, as spec_prepare_kernel
// runs them), on a device that runs clusters.
bool split_layout(int slots, int vocab, int &csize, int &chunk) {
  if (!cluster_path() || slots > device_sms()) return false;
  const int leaves = (vocab + 255) / 256;
  csize = min(kMaxCluster, leaves);
  chunk = (leaves + csize - 1) / csize * 256;
  csize = (vocab + chunk - 1) / chunk;
  return chunk <= kSplitMaxChunk && (long long)slots * csize <= 0x7fffffff;
}

// staged_ready says whether the lean prepare kern takes its staging tiles
// (kStageBytes of dynamic shared memory, staged_sum): where the device
// gives them and two blocks with them still share an SM, as without them
// (an H100's 228 KB an SM does; an A100's 164 KB would halve its blocks).
bool staged_ready(const void *kern) {
  static KernelMemo<bool> memo;
  bool ok;
  if (memo.find(kern, ok)) return ok;
  int n = 0;
  ok = smem_ready(kern, kStageBytes) &&
       cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kern, kSpecBlock, kStageBytes) == cudaSuccess && n >= 2;
  if (!ok) cudaGetLastError();
  memo.put(kern, ok);
  return ok;
}

// split_launch launches spec_split_kernel, or returns -1 (nothing launched)
// when the device cannot hold one of its clusters.
template <typename T>
int split_launch(SpecSplitKernel<T> kern, int slots, int csize, int chunk, const T *target, int k, int vocab,
                 const RowParams &rp, const int *drafts, const void *qprobs, int qdtype, PosStat *stats,
                 unsigned long long *totals) {
  int leaves = 1;
  while (leaves < (vocab + 255) / 256) leaves <<= 1;
  const size_t smem = sizeof(float) * ((size_t)chunk + 2 * leaves);
  if (!cluster_ready((const void *)kern, true) || max_clusters((const void *)kern, csize, kSplitBlock, smem) < 1)
    return -1;
  return launch_cluster(SV_VARIANT_SPEC_SPLIT, kern, csize * slots, kSplitBlock, smem, csize,
                        "spec_verify (split prepare)", target, k, vocab, chunk, rp, drafts, qprobs, qdtype, stats,
                        totals);
}

}  // namespace

int launch_spec_verify(const void *target, int rows, int k, int vocab, uint64_t params, int flags,
                       const int *drafts, const void *qprobs, int trials, int *tokens, int *emitted,
                       int *accepted, int trace_trials, void *trace) {
  if (rows < 0 || k < 0 || vocab < 1 || trials < 1 || trace_trials < 0 || trace_trials > trials)
    return set_error(SV_ERR_INVALID, "spec_verify: bad shape (%d rows, k %d, %d tokens, %d trials)", rows, k,
                     vocab, trials);
  if (vocab > kMaxExactVocab)
    return set_error(SV_ERR_UNSUPPORTED, "spec_verify: vocabulary %d over %d", vocab, kMaxExactVocab);
  if (rows == 0) return SV_OK;
  const size_t slots = (size_t)rows * (k + 1);
  if (slots > 0x7fffffff || (size_t)rows * trials > 0x7fffffff)
    return set_error(SV_ERR_UNSUPPORTED, "spec_verify: too many rows, positions or trials");
  const int tdtype = (flags >> SV_SPEC_TARGET_SHIFT) & 15;
  const int qdtype = (flags >> SV_SPEC_DRAFT_SHIFT) & 15;
  const bool filtered = flags & SV_HAS_FILTERS;
  if (filtered && slots > 65535) return set_error(SV_ERR_UNSUPPORTED, "spec_verify: over 65535 positions");
  const size_t sbytes = align256(sizeof(PosStat) * slots);
  const size_t wbytes = filtered ? align256(sizeof(float) * slots * wstride(vocab)) : 0;
  const size_t lbytes = filtered ? align256(sizeof(int) * slots * kFastList) : 0;
  int chunks = 1, chunk = vocab;
  if (filtered) fast_layout((int)slots, vocab, chunks, chunk);
  int split_c = 0, split_chunk = 0;
  const bool split = !filtered && split_layout((int)slots, vocab, split_c, split_chunk);
  const size_t tbytes = split ? align256(sizeof(unsigned long long) * slots * 2 * split_c * (kSplitBlock / 32)) : 0;
  void *ws = nullptr;
  int st = workspace(sbytes + wbytes + 2 * lbytes + tbytes + (filtered ? fast_bytes((int)slots, chunks) : 0), &ws);
  if (st != SV_OK) return st;
  char *base = static_cast<char *>(ws);
  PosStat *stats = reinterpret_cast<PosStat *>(base);
  float *wbuf = filtered ? reinterpret_cast<float *>(base + sbytes) : nullptr;
  SpecLists lists{nullptr, nullptr};
  if (filtered) {
    lists.idx = reinterpret_cast<int *>(base + sbytes + wbytes);
    lists.p = reinterpret_cast<float *>(base + sbytes + wbytes + lbytes);
  }
  const RowParams rp = row_params(params, rows);
  unsigned long long *totals =
      split ? reinterpret_cast<unsigned long long *>(base + sbytes + wbytes + 2 * lbytes) : nullptr;
  FastArgs fa{};
  if (filtered) {
    st = fast_args(base + sbytes + wbytes + 2 * lbytes + tbytes, (int)slots, vocab, rp, flags, nullptr, fa);
    if (st != SV_OK) return st;
  }
  ChainArgs a;
  a.rows = rows;
  a.k = k;
  a.vocab = vocab;
  a.rp = rp;
  a.drafts = drafts;
  a.qprobs = qprobs;
  a.qdtype = qdtype;
  a.stats = stats;
  a.wbuf = wbuf;
  a.lists = lists;
  a.split = SplitTotals{nullptr, split_c * (kSplitBlock / 32), split_chunk / (kSplitBlock / 32)};
  a.wide_table = false;
  a.tokens = tokens;
  a.emitted = emitted;
  a.accepted = accepted;
  a.trace_trials = trace_trials;
  const size_t tn = (size_t)trace_trials * rows * (k + 1);
  char *tr = static_cast<char *>(trace);
  a.tu = trace ? reinterpret_cast<float *>(tr) : nullptr;
  a.tp = trace ? reinterpret_cast<float *>(tr + 4 * tn) : nullptr;
  a.tq = trace ? reinterpret_cast<float *>(tr + 8 * tn) : nullptr;
  a.tacc = trace ? reinterpret_cast<int *>(tr + 12 * tn) : nullptr;
  a.tres = trace ? reinterpret_cast<int *>(tr + 16 * tn) : nullptr;
  if (!trace) a.trace_trials = 0;
  SV_DISPATCH_DTYPE(tdtype, T, {
    const T *x = static_cast<const T *>(target);
    const unsigned chains = (unsigned)((size_t)rows * trials);
    const SpecFullKernels<T> kk = spec_full_kernels(x);
    if (filtered) {
      const SpecFastKernels<T> fk = spec_fast_kernels(x);
      const bool cluster = fast_cluster(fk.cluster, fa);
      st = fast_launch(cluster ? SV_VARIANT_SPEC_FAST_CLUSTER : SV_VARIANT_SPEC_FAST, cluster ? fk.cluster : fk.plain,
                       dim3(fa.chunks, (unsigned)slots), cluster, "spec_verify (top-k fast path)", x, fa, k, drafts,
                       stats, lists);
      if (st != SV_OK) return st;
      st = launch_after(SV_VARIANT_SPEC_PREPARE_FLAGGED, (flags & SV_ALL_FAST) != 0, kk.prepare_filtered,
                        dim3(flagged_grid((const void *)kk.prepare_filtered, kSpecBlock, (int)slots)), kSpecBlock, 0,
                        "spec_verify prepare", x, k, vocab, (int)slots, rp, flags, drafts, wbuf, stats,
                        (const int *)fa.todo);
      if (st != SV_OK) return st;
      return launch_after(SV_VARIANT_SPEC_CHAIN_FILTERED, true, kk.chain_filtered, dim3(chains), kSpecBlock, 0,
                          "spec_verify chain", x, a);
    } else {
      st = split ? split_launch<T>(kk.split, (int)slots, split_c, split_chunk, x, k, vocab, rp, drafts, qprobs, qdtype,
                                   stats, totals)
                 : -1;
      if (st > 0) return st;
      if (st == SV_OK) {
        a.split.tot = totals;
      } else {
        // bf16 rows read their second pass through staging tiles where
        // the device holds them (staged_ready), with or without draft
        // distributions (their chain reads its rows coalesced,
        // ptable.cuh segment_sums).
        const size_t stage = tabled<T>() && staged_ready((const void *)kk.prepare_lean) ? kStageBytes : 0;
        st = launch_after(SV_VARIANT_SPEC_PREPARE_LEAN, false, kk.prepare_lean, dim3((unsigned)slots), kSpecBlock,
                          stage, "spec_verify prepare", x, k, vocab, (int)slots, rp, flags, drafts, wbuf, stats,
                          (const int *)nullptr);
        if (st != SV_OK) return st;
      }
      a.wide_table = tabled<T>() && !split && !qprobs && smem_ready((const void *)kk.chain_lean, kWideTableBytes);
      return launch_after(a.wide_table ? SV_VARIANT_SPEC_CHAIN_LEAN_TABLE : SV_VARIANT_SPEC_CHAIN_LEAN, true,
                          kk.chain_lean, dim3(chains), kSpecBlock, a.wide_table ? kWideTableBytes : 0,
                          "spec_verify chain", x, a);
    }
  });
  return SV_OK;
}

}  // namespace sv

extern "C" int sv_spec_verify(uint64_t target, int rows, int k, int vocab, uint64_t params, int flags,
                              uint64_t draft_tokens, uint64_t draft_probs, int trials, uint64_t tokens,
                              uint64_t emitted, uint64_t accepted, int trace_trials, uint64_t trace) {
  if (!params) return sv::set_error(SV_ERR_INVALID, "spec_verify: no parameters");
  if (k > 0 && !draft_tokens) return sv::set_error(SV_ERR_INVALID, "spec_verify: no draft tokens");
  return sv::launch_spec_verify(reinterpret_cast<const void *>(target), rows, k, vocab, params, flags,
                                reinterpret_cast<const int *>(draft_tokens),
                                reinterpret_cast<const void *>(draft_probs), trials,
                                reinterpret_cast<int *>(tokens), reinterpret_cast<int *>(emitted),
                                reinterpret_cast<int *>(accepted), trace_trials,
                                reinterpret_cast<void *>(trace));
}
