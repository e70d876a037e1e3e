// sample.cu: sample's launcher: the greedy rows through the indexed
// argmax, then the sampled rows by the top-k fast path (single draws by
// inverse CDF, with filters; under top-p alone from bf16 logits,
// topp_held_kernel or topp_kernel) and the full-row kernel for the rows it
// flagged, or by a full-row kernel for every sampled row (unfiltered
// Gumbel-max single draws: gumbel_kernel; unfiltered bf16 single draws by
// inverse CDF: table_kernel); with many draws, draws_kernel after them, or
// guide_kernel and counts_kernel where the draws are counted on the
// device. The kernels are sample.cuh's.
#include "sample.cuh"

namespace sv {

int launch_argmax(int dtype, const void *logits, int rows, int vocab, const int *row_idx, int n_idx,
                  int flags, int *tokens);

namespace {

// cdf_search is the first token of a row's inclusive CDF c (vocab
// entries) whose entry exceeds t, the last token where none does: the
// inverse CDF's ordered search by halving.
__device__ __forceinline__ int cdf_search(const unsigned long long *c, int vocab, unsigned long long t) {
  int lo = 0, hi = vocab - 1;
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (c[mid] > t)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

// draws_kernel writes draw d of every listed row: the inverse CDF of the
// sampled rows' written CDFs, the token itself for greedy and invalid rows.
__global__ void draws_kernel(const int *__restrict__ row_idx, int n_greedy, int vocab, int draws,
                             RowParams rp, const int *__restrict__ tokens,
                             const unsigned long long *__restrict__ cdf,
                             const unsigned long long *__restrict__ totals, int *__restrict__ samples) {
  const int slot = blockIdx.y;
  const int row = row_idx[slot];
  const int d = blockIdx.x * blockDim.x + threadIdx.x;
  if (d >= draws) return;
  int *out = samples + (size_t)row * draws;
  const int s = slot - n_greedy;
  const unsigned long long total = s >= 0 ? totals[s] : 0ull;
  if (total == 0) {
    out[d] = tokens[row];
    return;
  }
  const Stream rng(rp.seed[row], rp.offset[row], row, d);
  out[d] = cdf_search(cdf + (size_t)s * vocab, vocab, pick(rng.u64(0), total));
}

// kGuideBits is the number of top bits of a draw's uniform that index the
// guide table (engine/cpu's CDF indexes its own by 12): 2^15 buckets, so
// that on a flat row (T = 1 on normal logits) about 44% of the draws land
// in a bucket of one token and need no search, and the rest search a
// bucket of a few tokens (one or two sectors of the CDF).
constexpr int kGuideBits = 15;
constexpr int kGuideSize = 1 << kGuideBits;
// kCountsScan: the search halves a bucket until at most this many tokens
// remain, then counts the CDF entries <= t among them with independent
// loads (one L2 round trip where halving takes three).
constexpr int kCountsScan = 8;
// kCountsBlock threads each make a block's share of one row's draws:
// kCountsPerThread where a row has many (so a block's draws pay for its copy
// of the guide, and the rows being counted at once stay few), a quarter of
// that where it has few (so that the blocks of fewer rows fill the device,
// and their CDFs fit the L2). A block makes at most 1024 * 63 = 64512
// draws, so a bucket's count fits 16 bits.
constexpr int kCountsBlock = 1024;
constexpr int kCountsPerThread = 63;
// The shared guide: bases[j] = guide[64 j] (j <= kGuideSize / 64, the
// last being guide[kGuideSize] = vocab - 1), offs[g] = guide[g] - bases[g
// / 64] clamped to kOffClamp; and a 16-bit count a bucket, two to a word.
// 130 KB in all: one block an SM, within sm_80's 163 KB as well.
constexpr int kGroupBits = 6;
constexpr int kGroups = kGuideSize >> kGroupBits;
constexpr unsigned kOffClamp = 0xffffu;
constexpr size_t kCountsSmem =
    sizeof(int) * (kGroups + 1) + sizeof(unsigned short) * kGuideSize + sizeof(unsigned short) * kGuideSize;
static_assert(kCountsBlock * kCountsPerThread < 65536, "a bucket's count fits 16 bits");

// guide_bounds: [lo, hi] holds the token of every draw in bucket g: the
// guide's entries g and g + 1, unless an offset was clamped, then the
// group's base and the next group's.
__device__ __forceinline__ void guide_bounds(const int *bases, const unsigned short *offs, unsigned g, int &lo,
                                             int &hi) {
  lo = bases[g >> kGroupBits] + offs[g];
  const unsigned g1 = g + 1;
  const unsigned o1 = (g1 & ((1u << kGroupBits) - 1)) ? offs[g1] : 0u;
  hi = bases[(g1 >> kGroupBits) + (o1 == kOffClamp)] + (o1 == kOffClamp ? 0 : (int)o1);
}
// bucket_count is bucket g's count in the packed shared counts.
__device__ __forceinline__ unsigned bucket_count(const unsigned *bcount, int g) {
  return (bcount[g >> 1] >> (16 * (g & 1))) & 0xffffu;
}
constexpr int kFewDraws = 1 << 20;
int counts_per_block(int draws) { return kCountsBlock * (draws >= kFewDraws ? kCountsPerThread : kCountsPerThread / 4); }

// guide_kernel writes each sampled row's guide table: guide[g] (g <
// kGuideSize) is the first token whose inclusive prefix sum exceeds the
// target of the smallest uniform with top bits g; guide[kGuideSize] is the
// last token. A draw
// whose uniform has top bits g lands in [guide[g], guide[g+1]]: the targets
// are monotone in the uniform, so a search between those two finds the token
// the whole-row search finds, in about log2(V/kGuideSize) steps on average
// (each bucket holds 1/kGuideSize of the mass, whatever the row's shape).
__global__ void guide_kernel(int vocab, const unsigned long long *__restrict__ cdf,
                             const unsigned long long *__restrict__ totals, int *__restrict__ guide) {
  const int s = blockIdx.y;
  const int g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g > kGuideSize) return;
  int *out = guide + (size_t)s * (kGuideSize + 1);
  const unsigned long long total = totals[s];
  if (g == kGuideSize || total == 0) {
    out[g] = g == kGuideSize ? vocab - 1 : 0;
    return;
  }
  out[g] = cdf_search(cdf + (size_t)s * vocab, vocab, pick((unsigned long long)g << (64 - kGuideBits), total));
}

// counts_kernel makes the draws draws_kernel makes (the same stream, pick and
// first-exceeding search, so the same tokens) and counts them per token in
// counts[row, :] instead of writing them. Block (x, y) makes draws
// [x * per_block, ...) of listed row y: blocks run x-fastest, so the
// rows being counted at any moment are few and keep their CDF, guide and
// counts in L2. A draw whose bucket holds one token needs no search and is
// counted in the block's shared count of that bucket; the block adds those
// once a token per warp of buckets when it ends. The other draws' lanes of
// a warp that drew the same token add once (__match_any_sync), so a peaked
// row costs one atomic per warp, not 32.
// Greedy and invalid rows count every draw on tokens[row]; a token outside
// [0, vocab) is counted nowhere, so the row's counts sum to fewer than draws.
__global__ void __launch_bounds__(kCountsBlock)
    counts_kernel(const int *__restrict__ row_idx, int n_greedy, int vocab, int draws, int per_block, RowParams rp,
                  const int *__restrict__ tokens, const unsigned long long *__restrict__ cdf,
                  const unsigned long long *__restrict__ totals, const int *__restrict__ guide,
                  unsigned *__restrict__ counts) {
  extern __shared__ int counts_smem[];
  int *bases = counts_smem;
  // bcount[g / 2] holds bucket g's count in its low (g even) or high half.
  unsigned *bcount = reinterpret_cast<unsigned *>(counts_smem + kGroups + 1);
  unsigned short *offs = reinterpret_cast<unsigned short *>(bcount + kGuideSize / 2);
  const int slot = blockIdx.y;
  const int row = row_idx[slot];
  unsigned *out = counts + (size_t)row * vocab;
  const int s = slot - n_greedy;
  const unsigned long long total = s >= 0 ? totals[s] : 0ull;
  if (total == 0) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      const int tok = tokens[row];
      if (tok >= 0 && tok < vocab) atomicAdd(out + tok, (unsigned)draws);
    }
    return;
  }
  const int *gs = guide + (size_t)s * (kGuideSize + 1);
  for (int i = threadIdx.x; i <= kGroups; i += blockDim.x) bases[i] = gs[i << kGroupBits];
  for (int i = threadIdx.x; i < kGuideSize; i += blockDim.x)
    offs[i] = (unsigned short)min((unsigned)(gs[i] - gs[i & ~((1 << kGroupBits) - 1)]), kOffClamp);
  for (int i = threadIdx.x; i < kGuideSize / 2; i += blockDim.x) bcount[i] = 0;
  __syncthreads();
  const unsigned long long *c = cdf + (size_t)s * vocab;
  const uint64_t seed = rp.seed[row], offset = rp.offset[row];
  const int begin = blockIdx.x * per_block;
  const int end = min(begin + per_block, draws);
  const int lane = threadIdx.x & 31;
  // base is the same for a warp's lanes, so every lane takes each turn of
  // the loop and __match_any_sync sees the full warp.
  for (int base = begin + (threadIdx.x & ~31); base < end; base += blockDim.x) {
    const int d = base + lane;
    int tok = -1;
    if (d < end) {
      const unsigned long long u = Stream(seed, offset, row, d).u64(0);
      const unsigned long long t = pick(u, total);
      const unsigned g = (unsigned)(u >> (64 - kGuideBits));
      int lo, hi;
      guide_bounds(bases, offs, g, lo, hi);
      if (lo == hi) {  // a bucket of one token: counted in shared memory
        atomicAdd(bcount + (g >> 1), 1u << (16 * (g & 1)));
      } else {
        while (hi - lo > kCountsScan) {
          const int mid = (lo + hi) >> 1;
          if (__ldg(c + mid) > t)
            hi = mid;
          else
            lo = mid + 1;
        }
        // The first entry > t in [lo, hi), else hi: the CDF is monotone, so
        // lo plus the number of entries <= t there.
        int below = 0;
#pragma unroll
        for (int k = 0; k < kCountsScan; k++) below += lo + k < hi && __ldg(c + lo + k) <= t;
        tok = lo + below;
      }
    }
    const unsigned peers = __match_any_sync(0xffffffffu, tok);
    if (tok >= 0 && lane == __ffs(peers) - 1) atomicAdd(out + tok, (unsigned)__popc(peers));
  }
  // Each warp adds its 32 buckets' counts once a token: the buckets of one
  // token are adjacent, so a heavy token costs an atomic per 32 buckets.
  __syncthreads();
  for (int i = threadIdx.x; i < kGuideSize; i += blockDim.x) {
    int lo, hi;
    guide_bounds(bases, offs, (unsigned)i, lo, hi);
    const int key = lo == hi && bucket_count(bcount, i) != 0 ? lo : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, key);
    if (key >= 0 && lane == __ffs(peers) - 1) {
      unsigned sum = 0;
      for (unsigned m = peers; m; m &= m - 1) sum += bucket_count(bcount, i - lane + __ffs(m) - 1);
      atomicAdd(out + key, sum);
    }
  }
}

size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

// launch_flagged launches the full-row kernel on the slots that todo flags,
// behind the fast or the top-p kernel that flagged them (early: as soon as
// that kernel triggers, for launches that expect few).
template <typename T>
int launch_flagged(const SampleFullKernels<T> &pk, const SampleFullKernels<T> &tk, bool early, const T *x,
                   const SampleArgs &a, const int *todo, int n_sampled) {
  const auto full = full_row_variant<kSampleBlock>(pk.flagged, tk.flagged, sizeof(T) == 2);
  const dim3 grid(flagged_grid((const void *)full.kern, kSampleBlock, n_sampled, full.smem));
  return launch_after(full.smem ? SV_VARIANT_SAMPLE_FLAGGED_PATTERN : SV_VARIANT_SAMPLE_FLAGGED_TOKENS, early,
                      full.kern, grid, kSampleBlock, full.smem, "sample", x, a, todo, n_sampled);
}

// held_fits says whether topp_held_kernel (kern, null for logits other than
// bf16) takes rows of vocab tokens, slots of them, and sets smem to its
// dynamic shared memory: an sm_90 binary whose cluster attributes took,
// whole 16-byte vectors a row, and one wave of clusters of kHeldCluster
// blocks with their chunks. Past one wave topp_kernel serves: a held row's
// fixed steps (a table a block, five cluster barriers, block 0's cut while
// its peers wait) then cost more than the two reads of the row they save
// (docs/PERF.md).
template <typename K>
bool held_fits(K kern, int vocab, int slots, size_t &smem) {
  if (!kern || !cluster_path() || vocab % 8 != 0) return false;
  const int chunk = held_chunk(vocab, kHeldCluster);
  if ((chunk + kHeldTile - 1) / kHeldTile > kHeldMaxTiles) return false;
  smem = held_smem(chunk);
  return cluster_ready((const void *)kern, true) &&
         slots <= max_clusters((const void *)kern, kHeldCluster, kSampleBlock, smem);
}

// pattern_or_token_kernels is a dtype's full-row kernels by pattern: those
// exist for 16-bit logits; f32 has the per-token ones only.
SampleFullKernels<float> pattern_or_token_kernels(const float *x) { return sample_token_kernels(x); }
SampleFullKernels<__half> pattern_or_token_kernels(const __half *x) { return sample_pattern_kernels(x); }
SampleFullKernels<__nv_bfloat16> pattern_or_token_kernels(const __nv_bfloat16 *x) {
  return sample_pattern_kernels(x);
}

}  // namespace

// launch_sample runs sample; with draws > 0 it writes the draws to samples,
// or, when counts is not null, counts them there instead (uint32 [rows,
// vocab], zeroed here first).
int launch_sample(int dtype, const void *logits, int rows, int vocab, uint64_t params, int flags,
                  const int *row_idx, int n_greedy, int n_sampled, int *tokens, int draws, int *samples,
                  unsigned *counts) {
  if (rows < 0 || vocab < 1 || n_greedy < 0 || n_sampled < 0 || draws < 0)
    return set_error(SV_ERR_INVALID, "sample: bad shape (%d rows, %d tokens, %d greedy, %d sampled, %d draws)",
                     rows, vocab, n_greedy, n_sampled, draws);
  if (vocab > kMaxExactVocab)
    return set_error(SV_ERR_UNSUPPORTED, "sample: vocabulary %d over %d", vocab, kMaxExactVocab);
  if (draws > 0 && !samples && !counts)
    return set_error(SV_ERR_INVALID, "sample: draws without a samples or counts buffer");
  if (n_greedy + n_sampled > 65535) return set_error(SV_ERR_UNSUPPORTED, "sample: over 65535 rows");
  const RowParams rp = row_params(params, rows);
  int st;
  if (n_greedy > 0) {
    st = launch_argmax(dtype, logits, rows, vocab, row_idx, n_greedy, SV_ARGMAX_INF_INVALID, tokens);
    if (st != SV_OK) return st;
  }
  const size_t wbytes = align256(sizeof(float) * (size_t)n_sampled * wstride(vocab));
  const size_t cbytes = draws > 0 ? align256(sizeof(unsigned long long) * (size_t)n_sampled * vocab) : 0;
  const size_t tbytes = align256(sizeof(unsigned long long) * (size_t)(n_sampled + 1));
  const int method = (flags >> SV_METHOD_SHIFT) & 15;
  const bool lists = (flags & SV_HAS_FILTERS) && method == SV_METHOD_REJECTION;
  const size_t lbytes = lists ? align256(sizeof(int) * (size_t)n_sampled * wstride(vocab)) : 0;
  // Single draws by inverse CDF: top-p alone from bf16 logits (SV_TOP_P_ONLY)
  // takes topp_kernel, other filters the top-k fast path.
  const bool single = (flags & SV_HAS_FILTERS) && draws == 0 && n_sampled > 0 &&
                      (method == SV_METHOD_AUTO || method == SV_METHOD_INVERSE_CDF);
  const bool topp = single && (flags & SV_TOP_P_ONLY) && dtype == SV_BF16;
  const bool fast = single && !topp;
  const size_t pbytes = topp ? align256(sizeof(int) * (size_t)n_sampled) : 0;
  int chunks = 1, chunk = vocab;
  if (fast) fast_layout(n_sampled, vocab, chunks, chunk);
  const size_t gbytes = draws > 0 && counts ? align256(sizeof(int) * (size_t)n_sampled * (kGuideSize + 1)) : 0;
  const size_t slow_bytes = wbytes + cbytes + tbytes + 2 * lbytes + gbytes + pbytes;
  void *ws = nullptr;
  st = workspace(slow_bytes + (fast ? fast_bytes(n_sampled, chunks) : 0), &ws);
  if (st != SV_OK) return st;
  char *base = static_cast<char *>(ws);
  FastArgs fa{};
  if (fast) {
    st = fast_args(base + slow_bytes, n_sampled, vocab, rp, flags, row_idx + n_greedy, fa);
    if (st != SV_OK) return st;
  }
  SampleArgs a;
  a.vocab = vocab;
  a.rp = rp;
  a.flags = flags;
  a.rows = row_idx + n_greedy;
  a.tokens = tokens;
  a.wbuf = reinterpret_cast<float *>(base);
  a.cdf = draws > 0 ? reinterpret_cast<unsigned long long *>(base + wbytes) : nullptr;
  a.totals = draws > 0 ? reinterpret_cast<unsigned long long *>(base + wbytes + cbytes) : nullptr;
  a.list_idx = lists ? reinterpret_cast<int *>(base + wbytes + cbytes + tbytes) : nullptr;
  a.list_w = lists ? reinterpret_cast<float *>(base + wbytes + cbytes + tbytes + lbytes) : nullptr;
  if (n_sampled > 0) {
    SV_DISPATCH_DTYPE(dtype, T, {
      const T *x = static_cast<const T *>(logits);
      const bool filtered = flags & SV_HAS_FILTERS;
      if (fast) {
        const auto fk = sample_fast_kernels(x);
        const bool serve = fast_serves(flags, fa);
        const bool cluster = serve && fast_cluster(fk.cluster, fa);
        const int variant = cluster ? SV_VARIANT_SAMPLE_FAST_CLUSTER
                            : serve ? SV_VARIANT_SAMPLE_FAST_SERVE
                                    : SV_VARIANT_SAMPLE_FAST;
        st = fast_launch(variant, cluster ? fk.cluster : serve ? fk.serve : fk.plain, dim3(fa.chunks, n_sampled),
                         cluster, "sample (top-k fast path)", x, fa, tokens, a);
        if (st != SV_OK) return st;
      }
      if (!fast || !fast_serves(flags, fa)) {  // else the fast kernel drew its flagged rows itself
        const SampleFullKernels<T> tk = sample_token_kernels(x), pk = pattern_or_token_kernels(x);
        if (fast) {
          st = launch_flagged(pk, tk, (flags & SV_ALL_FAST) != 0, x, a, fa.todo, n_sampled);
        } else if (topp && tk.topp) {
          // topp_held_kernel where the row can be held, else topp_kernel;
          // then the full-row kernel for the rows it left in todo (early:
          // it expects none).
          int *todo = reinterpret_cast<int *>(base + slow_bytes - pbytes);
          size_t held = 0;
          if (held_fits(tk.topp_held, vocab, n_sampled, held))
            st = launch_cluster(SV_VARIANT_SAMPLE_TOPP_HELD, tk.topp_held, dim3(n_sampled * kHeldCluster), kSampleBlock,
                                held, kHeldCluster, "sample (top-p, held)", x, a, todo);
          else
            st = launch_after(SV_VARIANT_SAMPLE_TOPP, false, tk.topp, dim3(n_sampled), kSampleBlock, 0,
                              "sample (top-p)", x, a, todo);
          if (st != SV_OK) return st;
          st = launch_flagged(pk, tk, true, x, a, todo, n_sampled);
        } else if (filtered) {
          const auto full = full_row_variant<kSampleBlock>(pk.filtered, tk.filtered, sizeof(T) == 2);
          st = launch_after(full.smem ? SV_VARIANT_SAMPLE_FILTERED_PATTERN : SV_VARIANT_SAMPLE_FILTERED_TOKENS, false,
                            full.kern, dim3(n_sampled), kSampleBlock, full.smem, "sample", x, a);
        } else if (method == SV_METHOD_GUMBEL && !a.cdf) {
          // Gumbel-max without filters, single draws: one read, f32math for the few tokens near the top.
          st = launch_after(SV_VARIANT_SAMPLE_GUMBEL, false, tk.gumbel, dim3(n_sampled), kGumbelBlock, 0, "sample",
                            x, a);
        } else if (method != SV_METHOD_GUMBEL && !a.cdf && tk.table) {
          // bf16 inverse CDF without filters, single draws: the weights from a table, two blocks an SM.
          st = launch_after(SV_VARIANT_SAMPLE_TABLE, false, tk.table, dim3(n_sampled), kSampleBlock, 0, "sample", x, a);
        } else {
          // No filter: the lean kernel, two blocks an SM (per token for Gumbel-max, whose draw reads no weights).
          const auto full =
              full_row_variant<kSampleBlock>(pk.lean, tk.lean, sizeof(T) == 2 && method != SV_METHOD_GUMBEL);
          st = launch_after(full.smem ? SV_VARIANT_SAMPLE_LEAN_PATTERN : SV_VARIANT_SAMPLE_LEAN_TOKENS, false,
                            full.kern, dim3(n_sampled), kSampleBlock, full.smem, "sample", x, a);
        }
        if (st != SV_OK) return st;
      }
    });
  }
  if (draws > 0 && counts && n_greedy + n_sampled > 0) {
    if (!skip_launch(SV_VARIANT_SAMPLE_COUNTS)) {
      const cudaError_t err = cudaMemsetAsync(counts, 0, sizeof(unsigned) * (size_t)rows * vocab, stream());
      if (err != cudaSuccess) return cuda_status(err, "sample counts: zero");
    }
    int *guide = reinterpret_cast<int *>(base + wbytes + cbytes + tbytes + 2 * lbytes);
    if (n_sampled > 0) {
      st = launch_after(SV_VARIANT_SAMPLE_COUNTS, false, guide_kernel, dim3((kGuideSize + 256) / 256, n_sampled), 256,
                        0, "sample guide", vocab, (const unsigned long long *)a.cdf,
                        (const unsigned long long *)a.totals, guide);
      if (st != SV_OK) return st;
    }
    const int per_block = counts_per_block(draws);
    const dim3 grid((draws + per_block - 1) / per_block, n_greedy + n_sampled);
    if (!smem_ready((const void *)counts_kernel, kCountsSmem))
      return set_error(SV_ERR_CUDA, "sample counts: the device cannot give a block %zu bytes of shared memory",
                       kCountsSmem);
    return launch_after(SV_VARIANT_SAMPLE_COUNTS, false, counts_kernel, grid, kCountsBlock, kCountsSmem, "sample counts", row_idx,
                        n_greedy, vocab, draws, per_block, rp, (const int *)tokens, (const unsigned long long *)a.cdf,
                        (const unsigned long long *)a.totals, (const int *)guide, counts);
  }
  if (draws > 0 && n_greedy + n_sampled > 0) {
    const dim3 grid((draws + 255) / 256, n_greedy + n_sampled);
    st = launch_after(SV_VARIANT_SAMPLE_DRAWS, false, draws_kernel, grid, 256, 0, "sample draws", row_idx, n_greedy,
                      vocab, draws, rp, (const int *)tokens, (const unsigned long long *)a.cdf,
                      (const unsigned long long *)a.totals, samples);
    if (st != SV_OK) return st;
  }
  return SV_OK;
}

}  // namespace sv

extern "C" int sv_sample(int dtype, uint64_t logits, int rows, int vocab, uint64_t params, int flags,
                         uint64_t row_idx, int n_greedy, int n_sampled, uint64_t tokens, int draws,
                         uint64_t samples) {
  if (!params || !row_idx) return sv::set_error(SV_ERR_INVALID, "sample: no parameters or row list");
  return sv::launch_sample(dtype, reinterpret_cast<const void *>(logits), rows, vocab, params, flags,
                           reinterpret_cast<const int *>(row_idx), n_greedy, n_sampled,
                           reinterpret_cast<int *>(tokens), draws, reinterpret_cast<int *>(samples), nullptr);
}

extern "C" int sv_sample_counts(int dtype, uint64_t logits, int rows, int vocab, uint64_t params, int flags,
                                uint64_t row_idx, int n_greedy, int n_sampled, uint64_t tokens, int draws,
                                uint64_t counts) {
  if (!params || !row_idx) return sv::set_error(SV_ERR_INVALID, "sample counts: no parameters or row list");
  if (draws > 0 && !counts) return sv::set_error(SV_ERR_INVALID, "sample counts: draws without a counts buffer");
  return sv::launch_sample(dtype, reinterpret_cast<const void *>(logits), rows, vocab, params, flags,
                           reinterpret_cast<const int *>(row_idx), n_greedy, n_sampled,
                           reinterpret_cast<int *>(tokens), draws, nullptr, reinterpret_cast<unsigned *>(counts));
}
