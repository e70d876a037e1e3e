// ngram.cu: prompt-lookup drafting (ngram_match), equal to engine/cpu's Draft.
//
// The rule searches n = min(max_ngram, step) down to 1, the prompt before
// the generated tokens, the leftmost start first. The pattern of size n is
// the last n generated tokens, so a match of size n ending at position e
// exists iff the backward common length at e (src[e-k] == gen[step-1-k] for
// k = 0, 1, ...) is at least n. One pass therefore gives each candidate end
// e (e + 1 < len in the prompt, e + 1 < step in the generated tokens: a
// match needs a token after it) that length, capped at min(max_ngram, step)
// and at e + 1, and one block-wide max over the key (length, prompt before
// generated, leftmost e) picks the rule's winner: the largest n that
// matches anywhere, then the first source holding it, then its leftmost
// start (for a fixed n the leftmost start is the leftmost end). The
// critical path is one round of independent loads a thread (every thread
// loads all its positions before comparing; only the rare positions whose
// last token matches read further, from lines the block just loaded) and
// one reduction, instead of up to 2 * max_ngram dependent block-wide
// searches. (Not done: one thread per row running the reference loops,
// which leaves a 32k-token prompt to one thread for ~n * 32k steps.)
//
// One block a row and one launch: the block that finishes last (a counter,
// reset by that block; with one row the only block, without the counter)
// spends the budget and writes every draft. The budget is sequential in
// row order but has a closed form: with a_r = min(max_draft, tokens after
// row r's match) (0 without a match), row r drafts
// min(a_r, max(threshold - sum_{q<r} a_q, 0)), so a block-wide exclusive
// sum replaces the row-by-row loop.
#include "common.cuh"

namespace sv {
namespace {

constexpr int kNgramBlock = 512;
// kNgramPer is how many candidate ends a thread loads before comparing any
// of them: one round covers kNgramBlock * kNgramPer ends (a 4096-token
// prompt and 512 generated tokens in one round).
constexpr int kNgramPer = 16;

struct MaxU64Op {
  __device__ __forceinline__ unsigned long long operator()(unsigned long long a, unsigned long long b) const {
    return a > b ? a : b;
  }
};

struct Match {
  int src;    // 0: none, 1: prompt, 2: generated
  int start;  // first drafted position in the source
  int avail;  // tokens after the match in the source
};

// ngram_kernel: block r finds row r's match; the block that finishes last
// spends the budget in row order and writes every row's draft.
template <int BLOCK, int PER>
__global__ void __launch_bounds__(BLOCK)
    ngram_kernel(const int *__restrict__ input_ids, int L, const int *__restrict__ input_len,
                 const int *__restrict__ pre_ids, int M, const int *__restrict__ step_idx, int max_ngram,
                 int max_draft, int threshold, Match *__restrict__ matches, unsigned *__restrict__ count,
                 int *__restrict__ out) {
  __shared__ union {
    typename cub::BlockReduce<unsigned long long, BLOCK>::TempStorage reduce;
    typename cub::BlockScan<long long, BLOCK>::TempStorage scan;
  } sh;
  __shared__ Match mine;
  __shared__ int last;
  __shared__ int sh_len[BLOCK], sh_src[BLOCK], sh_start[BLOCK];
  const int row = blockIdx.x, rows = gridDim.x;
  const int len = max(input_len[row], 0), step = max(step_idx[row], 0);
  const int *prompt = input_ids + (size_t)row * L;
  const int *gen = pre_ids + (size_t)row * M;
  // Candidate ends, prompt first: i < np is prompt end i, else generated
  // end i - np. The key's low word is ~i, so the max prefers the smaller i.
  const int cap = min(max_ngram, step);
  const int np = max(len - 1, 0), total = np + max(step - 1, 0);
  unsigned long long best = 0;
  if (cap > 0) {
    const int p0 = gen[step - 1];
    for (int base = threadIdx.x; base < total; base += BLOCK * PER) {
      int v[PER];
#pragma unroll
      for (int k = 0; k < PER; k++) {
        const int i = base + k * BLOCK;
        v[k] = i < total ? (i < np ? prompt[i] : gen[i - np]) : 0;
      }
#pragma unroll
      for (int k = 0; k < PER; k++) {
        const int i = base + k * BLOCK;
        if (i < total && v[k] == p0) {
          const int *src = i < np ? prompt : gen;
          const int e = i < np ? i : i - np;
          int c = 1;
          while (c < cap && c <= e && src[e - c] == gen[step - 1 - c]) c++;
          const unsigned long long key = (unsigned long long)c << 32 | (0xffffffffu - (unsigned)i);
          best = key > best ? key : best;
        }
      }
    }
  }
  best = cub::BlockReduce<unsigned long long, BLOCK>(sh.reduce).Reduce(best, MaxU64Op());
  if (threadIdx.x == 0) {
    Match m{0, 0, 0};
    if (best != 0) {
      const int i = (int)(0xffffffffu - (unsigned)best);  // the winner's end; its length is best >> 32
      m = i < np ? Match{1, i + 1, len - (i + 1)} : Match{2, i - np + 1, step - (i - np + 1)};
    }
    mine = m;
    if (rows == 1) {
      last = 1;
    } else {
      matches[row] = m;
      __threadfence();
      last = atomicAdd(count, 1u) == (unsigned)rows - 1;
    }
  }
  __syncthreads();
  if (!last) return;
  if (rows > 1) __threadfence();
  long long spent = 0;  // sum of a_q over the rows before this chunk
  for (int r0 = 0; r0 < rows; r0 += BLOCK) {
    const int r = r0 + threadIdx.x;
    Match m{0, 0, 0};
    if (r == row) {
      m = mine;
    } else if (r < rows) {
      m = Match{__ldcg(&matches[r].src), __ldcg(&matches[r].start), __ldcg(&matches[r].avail)};
    }
    const long long a = m.src != 0 ? min(max_draft, m.avail) : 0;
    long long before = 0, chunk = a;  // one row: thread 0's alone, nothing before it
    if (rows > 1) cub::BlockScan<long long, BLOCK>(sh.scan).ExclusiveSum(a, before, chunk);
    const long long budget = max((long long)threshold - spent - before, 0ll);
    sh_len[threadIdx.x] = (int)min(a, budget);
    sh_src[threadIdx.x] = m.src;
    sh_start[threadIdx.x] = m.start;
    spent += chunk;
    __syncthreads();
    const size_t cells = (size_t)min(BLOCK, rows - r0) * max_draft;
    for (size_t e = threadIdx.x; e < cells; e += BLOCK) {
      const int rr = (int)(e / max_draft), t = (int)(e % max_draft);
      const size_t g = (size_t)(r0 + rr);
      int v = -1;
      if (t < sh_len[rr])
        v = sh_src[rr] == 1 ? input_ids[g * L + sh_start[rr] + t] : pre_ids[g * M + sh_start[rr] + t];
      out[g * max_draft + t] = v;
    }
    __syncthreads();
  }
  if (rows > 1 && threadIdx.x == 0) *count = 0;
}

size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

}  // namespace

int launch_ngram(const int *input_ids, int L, const int *input_len, const int *pre_ids, int M,
                 const int *step_idx, int rows, int max_ngram, int max_draft, int threshold, int *out) {
  if (rows < 0 || L < 0 || M < 0 || max_ngram < 0 || max_draft < 0 || threshold < 0)
    return set_error(SV_ERR_INVALID, "ngram_match: negative size");
  if (rows == 0 || max_draft == 0) return SV_OK;
  void *ws = nullptr;
  int st = workspace(align256(sizeof(Match) * (size_t)rows), &ws);
  if (st != SV_OK) return st;
  Match *matches = static_cast<Match *>(ws);
  unsigned *count = nullptr;
  st = counters(1, &count);
  if (st != SV_OK) return st;
  if (skip_launch(SV_VARIANT_NGRAM)) return SV_OK;
  ngram_kernel<kNgramBlock, kNgramPer><<<rows, kNgramBlock, 0, stream()>>>(
      input_ids, L, input_len, pre_ids, M, step_idx, max_ngram, max_draft, threshold, matches, count, out);
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
