// ngram.cu: prompt-lookup drafting (ngram_match), equal to engine/cpu's Draft.
//
// The search is parallel across the sequence: one block per row, every
// thread tests start positions s, s + BLOCK, ... and a block minimum gives
// the leftmost match; the first n that matches wins. Only the draft budget
// is sequential (it is shared across the batch in row order). (Not done:
// one thread per row running the reference loops, which leaves a 32k-token
// prompt to one thread for ~n * 32k steps.) One launch: the block that
// finishes last (a counter, reset by that block) spends the budget and
// writes every draft.
#include "common.cuh"

namespace sv {
namespace {

constexpr int kNgramBlock = 256;

struct MinIntOp {
  __device__ __forceinline__ int operator()(int a, int b) const { return a < b ? a : b; }
};

struct Match {
  int src;    // 0: none, 1: prompt, 2: generated
  int start;  // first drafted position in the source
  int avail;  // tokens after the match in the source
};

// leftmost returns the smallest s with ids[s:s+n] == pat and s + n < len, or INT_MAX.
template <int BLOCK>
__device__ int leftmost(const int *ids, int len, const int *pat, int n, typename Reduce<BLOCK>::Shared &sh) {
  int best = 0x7fffffff;
  for (int s = threadIdx.x; s + n < len; s += BLOCK) {
    bool eq = true;
    for (int j = 0; j < n && eq; j++) eq = ids[s + j] == pat[j];
    if (eq) {
      best = s;
      break;  // later s of this thread are larger
    }
  }
  int r = cub::BlockReduce<int, BLOCK>(sh.s.i).Reduce(best, MinIntOp());
  if (threadIdx.x == 0) sh.i = r;
  __syncthreads();
  r = sh.i;
  __syncthreads();
  return r;
}

// ngram_kernel: block r finds row r's match; the block that finishes last
// spends the budget in row order (one thread: the budget is sequential) and
// writes every row's draft.
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK)
    ngram_kernel(const int *__restrict__ input_ids, int L, const int *__restrict__ input_len,
                 const int *__restrict__ pre_ids, int M, const int *__restrict__ step_idx, int max_ngram,
                 int max_draft, int threshold, Match *__restrict__ matches, int *__restrict__ lens,
                 unsigned *__restrict__ count, int *__restrict__ out) {
  __shared__ typename Reduce<BLOCK>::Shared sh;
  __shared__ int last;
  const int row = blockIdx.x, rows = gridDim.x;
  const int len = input_len[row], step = step_idx[row];
  const int *prompt = input_ids + (size_t)row * L;
  const int *gen = pre_ids + (size_t)row * M;
  Match m{0, 0, 0};
  for (int n = min(max_ngram, step); n >= 1 && m.src == 0; n--) {
    const int *pat = gen + step - n;
    int s = leftmost<BLOCK>(prompt, len, pat, n, sh);
    if (s != 0x7fffffff) {
      m = Match{1, s + n, len - (s + n)};
      break;
    }
    s = leftmost<BLOCK>(gen, step, pat, n, sh);
    if (s != 0x7fffffff) m = Match{2, s + n, step - (s + n)};
  }
  if (threadIdx.x == 0) {
    matches[row] = m;
    __threadfence();
    last = atomicAdd(count, 1u) == (unsigned)rows - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  if (threadIdx.x == 0) {
    int budget = threshold;
    for (int r = 0; r < rows; r++) {
      const int limit = min(max_draft, budget);
      const int src = __ldcg(&matches[r].src), avail = __ldcg(&matches[r].avail);
      int n = 0;
      if (limit > 0 && step_idx[r] > 0 && src != 0) n = min(limit, avail);
      lens[r] = n;
      budget -= n;
    }
    *count = 0;
  }
  __syncthreads();
  const size_t total = (size_t)rows * max_draft;
  for (size_t e = threadIdx.x; e < total; e += BLOCK) {
    const int r = (int)(e / max_draft), t = (int)(e % max_draft);
    int v = -1;
    if (t < lens[r]) {
      const int src = __ldcg(&matches[r].src), start = __ldcg(&matches[r].start);
      v = src == 1 ? input_ids[(size_t)r * L + start + t] : pre_ids[(size_t)r * M + start + t];
    }
    out[e] = v;
  }
}

size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

}  // namespace

int launch_ngram(const int *input_ids, int L, const int *input_len, const int *pre_ids, int M,
                 const int *step_idx, int rows, int max_ngram, int max_draft, int threshold, int *out) {
  if (rows < 0 || L < 0 || M < 0 || max_ngram < 0 || max_draft < 0 || threshold < 0)
    return set_error(SV_ERR_INVALID, "ngram_match: negative size");
  if (rows == 0 || max_draft == 0) return SV_OK;
  void *ws = nullptr;
  const size_t mbytes = align256(sizeof(Match) * (size_t)rows);
  int st = workspace(mbytes + sizeof(int) * (size_t)rows, &ws);
  if (st != SV_OK) return st;
  Match *matches = static_cast<Match *>(ws);
  int *lens = reinterpret_cast<int *>(static_cast<char *>(ws) + mbytes);
  unsigned *count = nullptr;
  st = counters(1, &count);
  if (st != SV_OK) return st;
  if (skip_launch(SV_VARIANT_NGRAM)) return SV_OK;
  ngram_kernel<kNgramBlock><<<rows, kNgramBlock, 0, stream()>>>(input_ids, L, input_len, pre_ids, M, step_idx, max_ngram,
                                                               max_draft, threshold, matches, lens, count, out);
  return check_launch("ngram_match");
}

}  // namespace sv

extern "C" int sv_ngram_match(uint64_t input_ids, int L, uint64_t input_len, uint64_t pre_ids, int M,
                              uint64_t step_idx, int rows, int max_ngram, int max_draft, int threshold,
                              uint64_t draft_out) {
  return sv::launch_ngram(reinterpret_cast<const int *>(input_ids), L, reinterpret_cast<const int *>(input_len),
                          reinterpret_cast<const int *>(pre_ids), M, reinterpret_cast<const int *>(step_idx),
                          rows, max_ngram, max_draft, threshold, reinterpret_cast<int *>(draft_out));
}
