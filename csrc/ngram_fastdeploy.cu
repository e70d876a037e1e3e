// ngram_fastdeploy.cu: ngram_match under FastDeploy's rules (ngram_semantics
// fastdeploy and fastdeploy_hybrid), equal to engine/cpu's fastDeployMatch.
//
// The search is ngram.cu's: one block per row, every thread tests start
// positions s, s + BLOCK, ... and a block minimum gives the leftmost window
// (here tile by tile, stopping at the first tile with a match); the first
// n that matches wins. A row's search needs no budget: the
// budget only cuts the draft, and a window with nothing after it is passed
// over whatever the limit (a limit <= 0 drafts nothing anyway), so each
// block records the match and what the budget needs of the row (FdRow).
// FastDeploy's threshold budget is sequential across rows (a row's room
// depends on every earlier row's draft), so the block that finishes last
// spends it: its threads stage a chunk of rows in shared memory, one thread
// runs the running sum over them, and then every thread writes that
// chunk's outputs: one launch, as ngram.cu (FastDeploy itself launches a
// search kernel and then a one-block kernel for the budget).
#include "common.cuh"

namespace sv {
namespace {

constexpr int kFastDeployBlock = 256;

struct FdMinIntOp {
  __device__ __forceinline__ int operator()(int a, int b) const { return a < b ? a : b; }
};

// FdRow is what the budget needs of a row, written by the row's block.
struct FdRow {
  int src;      // 0: no draft source, 1: prompt, 2: generated tokens
  int start;    // first drafted position in the source
  int want;     // tokens the row would draft with room to spare: min(its limit, tokens after the match), >= 0
  int ori;      // where the draft goes in the row of draft_out (after the current token or the MTP tokens)
  int base;     // the row's seq_lens_this_time before its draft
  int active;   // 1: the row takes its reserved token back and may draft
  int reserved; // 1: the row holds a reserved token at the start
};

// fd_leftmost returns the smallest s with ids[s:s+n] == pat and s + n < len, or INT_MAX.
// The block scans tiles of BLOCK * kFdUnroll positions in order and stops
// after the first tile that holds a match: a short pattern matches early in
// a long haystack, and without the tiles every thread would scan its whole
// share before the block minimum (ngram.cu's search does). Each thread
// loads the first token of its kFdUnroll positions of a tile at once (the
// loads in flight are what a long haystack's scan waits on) and compares
// the rest of the pattern only where the first token matches.
constexpr int kFdUnroll = 8;
template <int BLOCK>
__device__ int fd_leftmost(const int *ids, int len, const int *pat, int n, typename Reduce<BLOCK>::Shared &sh) {
  constexpr int kTile = BLOCK * kFdUnroll;
  const int end = len - n;  // s + n < len
  if (end <= 0) return 0x7fffffff;
  const int first = __ldg(pat);
  for (int t0 = 0; t0 < end; t0 += kTile) {
    int v[kFdUnroll];
#pragma unroll
    for (int k = 0; k < kFdUnroll; k++) {
      const int s = t0 + threadIdx.x + k * BLOCK;
      v[k] = s < end ? __ldg(ids + s) : ~first;
    }
    int best = 0x7fffffff;
#pragma unroll
    for (int k = 0; k < kFdUnroll; k++) {
      const int s = t0 + threadIdx.x + k * BLOCK;
      if (best == 0x7fffffff && v[k] == first) {
        bool eq = true;
        for (int j = 1; j < n && eq; j++) eq = __ldg(ids + s + j) == __ldg(pat + j);
        if (eq) best = s;  // the thread's positions rise with k
      }
    }
    if (__syncthreads_or(best != 0x7fffffff)) {
      int r = cub::BlockReduce<int, BLOCK>(sh.s.i).Reduce(best, FdMinIntOp());
      if (threadIdx.x == 0) sh.i = r;
      __syncthreads();
      r = sh.i;
      __syncthreads();
      return r;
    }
  }
  return 0x7fffffff;
}

// FdInputs are the kernel's inputs, FastDeploy's tensors by their names.
struct FdInputs {
  const int *input_ids;  // [rows, L]
  int L;
  const int *input_len;  // [rows]
  const int *pre_ids;    // [rows, M]
  int M;
  const int *step_idx;             // [rows]
  const int *seq_lens_encoder;     // [rows]
  const int *seq_lens_decoder;     // [rows]
  const int *seq_lens_this_time;   // [rows]
  const long long *max_dec_len;    // [rows]
  const int *draft_token_num;      // [rows]
  int max_ngram, min_ngram, max_draft;
  long long threshold;
  int hybrid;
};

// fastdeploy_kernel: block r searches row r and records its FdRow; the
// block that finishes last spends the budget in row order and writes
// draft_out [rows, max_draft + 1] and seq_lens_out [rows].
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK)
    fastdeploy_kernel(FdInputs in, FdRow *__restrict__ state, unsigned *__restrict__ count, int *__restrict__ draft_out,
                      int *__restrict__ seq_out) {
  __shared__ typename Reduce<BLOCK>::Shared sh;
  __shared__ int last;
  const int row = blockIdx.x, rows = gridDim.x;
  const int enc = in.seq_lens_encoder[row], dec = in.seq_lens_decoder[row], now = in.seq_lens_this_time[row];
  const int step = in.step_idx[row];
  // The row's limit before the budget, and whether it searches at all
  // (the rows FastDeploy reaches, as engine/cpu's loop skips the others).
  long long limit;
  int ori, base, active, reserved;
  if (in.hybrid) {
    ori = now;
    base = now;
    limit = min((long long)(in.max_draft - ori + 1), in.max_dec_len[row] - step - 1);
    active = ori != 0 && limit > 0;
    reserved = dec > 0;
  } else {
    ori = 1;
    base = enc > 0 ? now : dec == 0 ? 0 : 1;
    limit = min((long long)in.draft_token_num[row], in.max_dec_len[row] - step - 1);
    active = enc == 0 && dec > 0;
    reserved = dec > 0 || enc > 0;
  }
  FdRow m{0, 0, 0, ori, base, active, reserved};
  if (active && limit > 0) {
    const int len = in.input_len[row];
    const int *prompt = in.input_ids + (size_t)row * in.L;
    const int *gen = in.pre_ids + (size_t)row * in.M;
    // The pattern ends at the current token gen[step]; the generated
    // haystack is gen[0:step], which never drafts the current token.
    for (int n = min(in.max_ngram, step); n >= in.min_ngram && m.src == 0; n--) {
      const int *pat = gen + step + 1 - n;
      int s = fd_leftmost<BLOCK>(prompt, len, pat, n, sh);
      if (s != 0x7fffffff) {
        m.src = 1, m.start = s + n, m.want = (int)min(limit, (long long)(len - (s + n)));
        break;
      }
      s = fd_leftmost<BLOCK>(gen, step, pat, n, sh);
      if (s != 0x7fffffff) m.src = 2, m.start = s + n, m.want = (int)min(limit, (long long)(step - (s + n)));
    }
  }
  if (threadIdx.x == 0) {
    state[row] = m;
    __threadfence();
    last = atomicAdd(count, 1u) == (unsigned)rows - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();

  // Every row's reservation first: FastDeploy counts them before its loop.
  int held = 0;
  for (int r = threadIdx.x; r < rows; r += BLOCK) held += __ldcg(&state[r].reserved);
  long long unprocessed = Reduce<BLOCK>::sum(sh, held);
  long long sum = 0;  // thread 0's running sum of seq_lens_this_time
  __shared__ int c_base[BLOCK], c_want[BLOCK], c_active[BLOCK], c_len[BLOCK];
  const int width = in.max_draft + 1;
  for (int r0 = 0; r0 < rows; r0 += BLOCK) {
    const int n = min(BLOCK, rows - r0);
    if (threadIdx.x < n) {
      const int r = r0 + threadIdx.x;
      c_base[threadIdx.x] = __ldcg(&state[r].base);
      c_want[threadIdx.x] = __ldcg(&state[r].want);
      c_active[threadIdx.x] = __ldcg(&state[r].active);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int i = 0; i < n; i++) {
        // FastDeploy: the row's own tokens count, its reservation is
        // released, the limit is cut to threshold - sum - unprocessed, and
        // a row with room for fewer than two tokens drafts nothing.
        sum += c_base[i];
        int len = 0;
        if (c_active[i]) {
          unprocessed--;
          const long long room = in.threshold - sum - unprocessed;
          if (room >= 2) len = (int)min((long long)c_want[i], room);
        }
        c_len[i] = len;
        sum += len;
      }
    }
    __syncthreads();
    for (long long e = threadIdx.x; e < (long long)n * width; e += BLOCK) {
      const int i = (int)(e / width), t = (int)(e % width), r = r0 + i;
      const int ori = __ldcg(&state[r].ori), k = t - ori;
      int v = -1;
      if (k >= 0 && k < c_len[i]) {
        const int src = __ldcg(&state[r].src), start = __ldcg(&state[r].start);
        v = src == 1 ? in.input_ids[(size_t)r * in.L + start + k] : in.pre_ids[(size_t)r * in.M + start + k];
      }
      draft_out[(size_t)r * width + t] = v;
    }
    if (threadIdx.x < n) seq_out[r0 + threadIdx.x] = c_base[threadIdx.x] + c_len[threadIdx.x];
    __syncthreads();
  }
  if (threadIdx.x == 0) *count = 0;
}

size_t fd_align256(size_t n) { return (n + 255) & ~(size_t)255; }

}  // namespace

static int launch_ngram_fastdeploy(const FdInputs &in, int rows, int *draft_out, int *seq_out) {
  if (rows < 0 || in.L < 0 || in.M < 0 || in.max_draft < 0)
    return set_error(SV_ERR_INVALID, "ngram_match (FastDeploy): negative size");
  if (rows == 0) return SV_OK;
  if (in.min_ngram < 1) return set_error(SV_ERR_INVALID, "ngram_match (FastDeploy): min_ngram %d, want >= 1", in.min_ngram);
  void *ws = nullptr;
  int st = workspace(fd_align256(sizeof(FdRow) * (size_t)rows), &ws);
  if (st != SV_OK) return st;
  unsigned *count = nullptr;
  st = counters(1, &count);
  if (st != SV_OK) return st;
  if (skip_launch(SV_VARIANT_NGRAM_FASTDEPLOY)) return SV_OK;
  fastdeploy_kernel<kFastDeployBlock>
      <<<rows, kFastDeployBlock, 0, stream()>>>(in, static_cast<FdRow *>(ws), count, draft_out, seq_out);
  return check_launch("ngram_match (FastDeploy)");
}

}  // namespace sv

extern "C" int sv_ngram_fastdeploy(uint64_t input_ids, int L, uint64_t input_len, uint64_t pre_ids, int M,
                                   uint64_t step_idx, uint64_t seq_lens_encoder, uint64_t seq_lens_decoder,
                                   uint64_t seq_lens_this_time, uint64_t max_dec_len, uint64_t draft_token_num,
                                   int rows, int max_ngram, int min_ngram, int max_draft, int64_t threshold,
                                   int hybrid, uint64_t draft_out, uint64_t seq_lens_out) {
  sv::FdInputs in;
  in.input_ids = reinterpret_cast<const int *>(input_ids);
  in.L = L;
  in.input_len = reinterpret_cast<const int *>(input_len);
  in.pre_ids = reinterpret_cast<const int *>(pre_ids);
  in.M = M;
  in.step_idx = reinterpret_cast<const int *>(step_idx);
  in.seq_lens_encoder = reinterpret_cast<const int *>(seq_lens_encoder);
  in.seq_lens_decoder = reinterpret_cast<const int *>(seq_lens_decoder);
  in.seq_lens_this_time = reinterpret_cast<const int *>(seq_lens_this_time);
  in.max_dec_len = reinterpret_cast<const long long *>(max_dec_len);
  in.draft_token_num = reinterpret_cast<const int *>(draft_token_num);
  in.max_ngram = max_ngram;
  in.min_ngram = min_ngram;
  in.max_draft = max_draft;
  in.threshold = threshold;
  in.hybrid = hybrid;
  return sv::launch_ngram_fastdeploy(in, rows, reinterpret_cast<int *>(draft_out), reinterpret_cast<int *>(seq_lens_out));
}
