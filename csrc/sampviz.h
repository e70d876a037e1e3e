/*
 * sampviz.h: the C boundary of libsampviz_kernels.so.
 *
 * Every function returns an sv_status; on failure sv_last_error() says what
 * went wrong in one sentence. Nothing here exits, prints or keeps a pointer
 * to host memory after it returns. Device memory is an opaque uint64_t
 * handle (a device address) allocated with sv_malloc and released with
 * sv_free. All work runs on one stream created by sv_init; launchers enqueue
 * and return, sv_synchronize waits and reports errors from the device.
 *
 * The semantics of every op are docs/SEMANTICS.md "Kernel semantics": these
 * kernels and engine/cpu agree bit for bit where that page says so.
 */
#ifndef SAMPVIZ_H
#define SAMPVIZ_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* SV_ABI_VERSION changes whenever a signature below changes. */
#define SV_ABI_VERSION 1

typedef enum sv_status {
  SV_OK = 0,
  /* A bad argument: a bug in the caller, the context is fine. */
  SV_ERR_INVALID = 1,
  /* A CUDA error that the context survives (out of memory, a launch the
     device refuses). */
  SV_ERR_CUDA = 2,
  /* A CUDA error that poisons the context (illegal address, launch failure,
     trap): every later call fails too, only a new process recovers. */
  SV_ERR_STICKY = 3,
  /* No CUDA device answers (no driver, no GPU, wrong device number). */
  SV_ERR_NO_DEVICE = 4,
  /* The inputs are valid but beyond what these kernels handle. */
  SV_ERR_UNSUPPORTED = 5
} sv_status;

/* Element types of float inputs. */
typedef enum sv_dtype { SV_F32 = 0, SV_F16 = 1, SV_BF16 = 2 } sv_dtype;

/* Flags of the filter ops, ORed together. */
#define SV_ORDER_JOINT 0x1          /* filter_order joint (default top_k_first) */
#define SV_TIES_LOWEST_INDEX 0x2    /* top_k_ties lowest_index (default keep) */
#define SV_METHOD_SHIFT 4           /* sample method in bits 4..7: */
#define SV_METHOD_AUTO 0
#define SV_METHOD_INVERSE_CDF 1
#define SV_METHOD_GUMBEL 2
#define SV_METHOD_REJECTION 3
#define SV_ARGMAX_INF_INVALID 0x100 /* argmax: +Inf makes a row invalid (-1) */
#define SV_HAS_FILTERS 0x200        /* renorm, sample, spec_verify, spec_tree_verify: some row has a filter on
                                       (without it, filters are ignored: a leaner kernel runs) */
#define SV_ALL_FAST 0x400           /* renorm, sample, spec_verify: a hint that every row takes
                                       the top-k fast path by its parameters (T > 0,
                                       0 < top_k < vocab, top_k <= 256, top-p not joint), so
                                       the full-row kernel after it starts early, expecting
                                       nothing to do, or (renorm and sample of at most ~50
                                       rows) is not launched, the fast kernel serving the
                                       rows it flags; a wrong hint costs time, not results */
#define SV_TOP_P_ONLY 0x800         /* sample: a hint that no row has top-k or min-p on, so that
                                       single draws by inverse CDF from bf16 logits skip the top-k
                                       fast path for a kernel that counts the row's patterns for
                                       top-p's cut (rows it cannot serve go to the full-row kernel
                                       after it); a wrong hint costs time, not results */

/*
 * Per-row parameters live in one device buffer of SV_PARAM_BYTES * rows
 * bytes holding six arrays one after another:
 *   float    temperature[rows]  (0: greedy)
 *   int32_t  top_k[rows]        (0 or >= vocab: off)
 *   float    top_p[rows]        (1: off)
 *   float    min_p[rows]        (0: off)
 *   uint64_t seed[rows]
 *   uint64_t offset[rows]
 */
#define SV_PARAM_BYTES 32

/* Library and device. */
int sv_abi_version(void);
const char *sv_last_error(void);
int sv_init(int device);
/* How many devices the CUDA runtime sees (after CUDA_VISIBLE_DEVICES); needs
   no sv_init. A server starts one worker per device it reports. */
int sv_device_count(int *count);
int sv_device_info(char *name, int name_len, int *sms, uint64_t *memory_bytes,
                   uint64_t *l2_bytes, int *cc_major, int *cc_minor);

/* Memory. Handles are device addresses; 0 is never a valid handle. */
int sv_malloc(uint64_t bytes, uint64_t *handle);
int sv_free(uint64_t handle);
int sv_memcpy_htod(uint64_t dst, const void *src, uint64_t bytes);
int sv_memcpy_dtoh(void *dst, uint64_t src, uint64_t bytes);
int sv_memcpy_dtod(uint64_t dst, uint64_t src, uint64_t bytes);
/* Fills count 32-bit words with value (poison before a launch). */
int sv_fill_u32(uint64_t dst, uint32_t value, uint64_t count);
/* Pins host memory for faster copies; failure is harmless. */
int sv_host_register(void *ptr, uint64_t bytes);
int sv_host_unregister(void *ptr);
int sv_synchronize(void);

/* Timing with CUDA events on the library's stream. sv_events_reserve makes
   n events; sv_event_record(i) records event i; sv_event_elapsed gives the
   milliseconds between events i and j once j has completed. */
int sv_events_reserve(int n);
int sv_event_record(int i);
int sv_event_elapsed(int i, int j, float *ms);
/* Enqueues a kernel that spins for about ns nanoseconds, so that launches
   queued behind it are timed without the host's launch gaps. */
int sv_delay(uint64_t ns);
/* Measures device-to-device copy bandwidth with buffers of bytes each: the
   median of iters copies, as bytes read plus bytes written per second. */
int sv_copy_bandwidth(uint64_t bytes, int iters, double *bytes_per_second);
/* Fills count elements of dtype with seeded normal values times scale. */
int sv_fill_random(uint64_t dst, int dtype, uint64_t count, uint64_t seed, float scale);

/* argmax: tokens[r] = first index of the maximum of row r (NaN rows and
   all -inf rows give -1; with SV_ARGMAX_INF_INVALID, +Inf rows too). When
   row_idx is not 0 it is a device array of n_idx row numbers and only those
   rows are served (one launch for the greedy rows of a mixed batch); else
   every row is. */
int sv_argmax(int dtype, uint64_t logits, int rows, int vocab, uint64_t row_idx,
              int n_idx, int flags, uint64_t tokens);

/* softmax: probs[r, :] = softmax((x - max) / T) in float32 (T = 0:
   one-hot). probs may equal logits for in-place f32 softmax. */
int sv_softmax(int dtype, uint64_t logits, int rows, int vocab, uint64_t params,
               uint64_t probs);

/* renorm: softmax, then top-k, top-p, min-p; filtered tokens exactly 0. */
int sv_renorm(int dtype, uint64_t logits, int rows, int vocab, uint64_t params,
              int flags, uint64_t probs);

/* sample: row_idx holds n_greedy greedy rows then n_sampled sampled rows;
   tokens[r] receives draw 0 of each listed row (argmax for greedy rows).
   When draws > 0, samples[r, d] receives draw d by inverse CDF (greedy and
   invalid rows repeat tokens[r]); samples may be 0 when draws is 0. */
int sv_sample(int dtype, uint64_t logits, int rows, int vocab, uint64_t params,
              int flags, uint64_t row_idx, int n_greedy, int n_sampled,
              uint64_t tokens, int draws, uint64_t samples);

/* sample_counts: sv_sample, but the draws are counted on the device instead
   of written: counts (uint32 [rows, vocab], zeroed first) receives at
   [r, t] how many of row r's draws 0..draws-1 are token t, the draws
   sv_sample would write. Greedy and invalid rows count every draw on
   tokens[r]; a token outside [0, vocab) is counted nowhere. */
int sv_sample_counts(int dtype, uint64_t logits, int rows, int vocab,
                     uint64_t params, int flags, uint64_t row_idx, int n_greedy,
                     int n_sampled, uint64_t tokens, int draws, uint64_t counts);

/* spec_verify: target [rows, k+1, vocab] of dtype (flags bits 16..19),
   draft_tokens int32 [rows, k], draft_probs [rows, k, vocab] of the dtype in
   flags bits 20..23 (0 handle: one-hot drafts). Writes tokens int32
   [trials, rows, k+1], emitted and accepted int32 [trials, rows], and for
   the first trace_trials trials a trace of SoA arrays, each
   [trace_trials, rows, k+1]: float u, float p, float q, int32 accepted,
   int32 resampled (20 bytes per step). */
#define SV_SPEC_TARGET_SHIFT 16
#define SV_SPEC_DRAFT_SHIFT 20
int sv_spec_verify(uint64_t target, int rows, int k, int vocab, uint64_t params,
                   int flags, uint64_t draft_tokens, uint64_t draft_probs,
                   int trials, uint64_t tokens, uint64_t emitted,
                   uint64_t accepted, int trace_trials, uint64_t trace);

/* spec_tree_verify: target [rows, nodes, vocab] of dtype (flags bits
   16..19), draft_probs [rows, nodes, vocab] of the dtype in flags bits
   20..23 (0 handle: one-hot drafts; node u's row is the distribution its
   children were drawn from), and tree, int32, laid out by the caller from
   the checked links (nodes the root does not reach have no children and
   token 0), five arrays one after another:
     tokens    [rows, nodes]     candidate token per node
     kid_start [rows, nodes]     where node u's children start in kids
     kid_count [rows, nodes]     how many children node u has
     kids      [rows, nodes]     the children, grouped by parent, in sibling order
     first     [rows, nodes - 1] token of node u's first child (0 without one)
   Writes path and tokens int32 [trials, rows, width] (the accepted path's
   nodes from the root, the accepted tokens then the drawn one, -1 after),
   accepted int32 [trials, rows], and for the first trace_trials trials a
   trace of SoA arrays, each [trace_trials, rows, nodes]: float u, float
   threshold, float q, int32 flags (1 accepted, 2 tested), int32 drawn
   (20 bytes per node). The library may be built without it (SV_TREE=0);
   then it has no sv_spec_tree_verify. */
#define SV_MAX_TREE_NODES 1024
int sv_spec_tree_verify(uint64_t target, int rows, int nodes, int vocab,
                        int width, uint64_t params, int flags, uint64_t tree,
                        uint64_t draft_probs, int trials, uint64_t path,
                        uint64_t tokens, uint64_t accepted, int trace_trials,
                        uint64_t trace);

/* ngram_match: int32 input_ids [rows, L], input_len [rows], pre_ids
   [rows, M], step_idx [rows]; writes draft_out int32 [rows, max_draft]. */
int sv_ngram_match(uint64_t input_ids, int L, uint64_t input_len,
                   uint64_t pre_ids, int M, uint64_t step_idx, int rows,
                   int max_ngram, int max_draft, int threshold,
                   uint64_t draft_out);

/* ngram_match under FastDeploy's rules (docs/SEMANTICS.md, "ngram_match
   under FastDeploy's rules"; hybrid 0: fastdeploy, 1: fastdeploy_hybrid):
   int32 input_ids [rows, L], input_len [rows], pre_ids [rows, M] (the
   current token at pre_ids[step_idx]), step_idx, seq_lens_encoder,
   seq_lens_decoder, seq_lens_this_time (before the call) and
   draft_token_num [rows], int64 max_dec_len [rows]; n runs from max_ngram
   down to min_ngram (>= 1). Writes draft_out int32 [rows, max_draft + 1]
   (the drafts from each row's offset, -1 elsewhere) and seq_lens_out int32
   [rows] (seq_lens_this_time after the call). */
int sv_ngram_fastdeploy(uint64_t input_ids, int L, uint64_t input_len,
                        uint64_t pre_ids, int M, uint64_t step_idx,
                        uint64_t seq_lens_encoder, uint64_t seq_lens_decoder,
                        uint64_t seq_lens_this_time, uint64_t max_dec_len,
                        uint64_t draft_token_num, int rows, int max_ngram,
                        int min_ngram, int max_draft, int64_t threshold,
                        int hybrid, uint64_t draft_out, uint64_t seq_lens_out);

/* Test-only launchers for the supervision tests: a kernel that writes far
   out of bounds (an illegal address, sticky) and one that never ends. */
int sv_fault_out_of_bounds(void);
int sv_fault_spin(void);

/* Test-only, for the GPU suite's coverage of the kernel variants: between
   sv_dry_run(1, 0) and sv_dry_run(0, &variants) the launchers decide as
   they always do but launch nothing, and variants receives bit
   SV_VARIANT_* for each kernel variant they would have launched. Device
   handles are not read in a dry run: any nonzero value serves (equal ones
   for in-place softmax). */
int sv_dry_run(int on, uint64_t *variants);

/* The kernel variants the launchers choose among (bit numbers). */
enum sv_variant {
  SV_VARIANT_ARGMAX_CHUNKS = 0,           /* chunks of a row, combined by its last block */
  SV_VARIANT_ARGMAX_CLUSTER = 1,          /* sm_90: one cluster a row */
  SV_VARIANT_SOFTMAX_ROW = 2,             /* one block a row, two reads */
  SV_VARIANT_SOFTMAX_ROW_CACHED = 3,      /* one block a row, the row in shared memory */
  SV_VARIANT_SOFTMAX_SPLIT = 4,           /* chunk statistics, then a write kernel */
  SV_VARIANT_SOFTMAX_CLUSTER = 5,         /* sm_90: one cluster a row, two reads */
  SV_VARIANT_SOFTMAX_BULK = 6,            /* sm_90: one cluster a row, bulk copies */
  SV_VARIANT_RENORM_FAST = 7,             /* the top-k fast path */
  SV_VARIANT_RENORM_FAST_SERVE = 8,       /* the fast path serving its flagged rows */
  SV_VARIANT_RENORM_FAST_CLUSTER = 9,     /* that, a row's chunks one cluster */
  SV_VARIANT_RENORM_FLAGGED_TOKENS = 10,  /* the full-row kernel on flagged rows, per token */
  SV_VARIANT_RENORM_FLAGGED_PATTERN = 11, /* the same by pattern (16-bit, sm_90) */
  SV_VARIANT_RENORM_ROWS_TOKENS = 12,     /* the full-row kernel on every row, per token */
  SV_VARIANT_RENORM_ROWS_PATTERN = 13,    /* the same by pattern */
  SV_VARIANT_SAMPLE_FAST = 14,
  SV_VARIANT_SAMPLE_FAST_SERVE = 15,
  SV_VARIANT_SAMPLE_FAST_CLUSTER = 16,
  SV_VARIANT_SAMPLE_FLAGGED_TOKENS = 17,
  SV_VARIANT_SAMPLE_FLAGGED_PATTERN = 18,
  SV_VARIANT_SAMPLE_FILTERED_TOKENS = 19, /* every sampled row, with filters */
  SV_VARIANT_SAMPLE_FILTERED_PATTERN = 20,
  SV_VARIANT_SAMPLE_LEAN_TOKENS = 21,     /* every sampled row, no filter in the launch */
  SV_VARIANT_SAMPLE_LEAN_PATTERN = 22,
  SV_VARIANT_SAMPLE_DRAWS = 23,           /* many draws from the written CDFs */
  SV_VARIANT_SPEC_FAST = 24,
  SV_VARIANT_SPEC_FAST_CLUSTER = 25,
  SV_VARIANT_SPEC_PREPARE_FLAGGED = 26,   /* the prepare on the positions the fast path flagged */
  SV_VARIANT_SPEC_CHAIN_FILTERED = 27,
  SV_VARIANT_SPEC_SPLIT = 28,             /* sm_90: a cluster a position, few positions */
  SV_VARIANT_SPEC_PREPARE_LEAN = 29,      /* one block a position, no filter in the launch */
  SV_VARIANT_SPEC_CHAIN_LEAN = 30,
  SV_VARIANT_SPEC_CHAIN_LEAN_TABLE = 31,  /* bf16, one-hot drafts: a table of fixed-point weights */
  SV_VARIANT_NGRAM = 32,
  SV_VARIANT_TREE_PREPARE_FILTERED = 33,  /* spec_verify's prepare, a block a node, with filters */
  SV_VARIANT_TREE_PREPARE_LEAN = 34,      /* the same, no filter in the launch */
  SV_VARIANT_TREE_NODES = 35,             /* a block a node: later siblings' thresholds and cuts */
  SV_VARIANT_TREE_WALK = 36,              /* a block per (trial, row): the walk and the draw */
  SV_VARIANT_NGRAM_FASTDEPLOY = 37,       /* ngram_match under FastDeploy's rules */
  SV_VARIANT_SAMPLE_COUNTS = 38,          /* many draws counted on the device (guide, counts) */
  SV_VARIANT_TREE_SPLIT = 39,             /* few bf16 one-hot nodes: a cluster a node, span totals */
  SV_VARIANT_SAMPLE_GUMBEL = 40,          /* Gumbel-max, no filter in the launch, single draws: one read */
  SV_VARIANT_SAMPLE_TABLE = 41,           /* bf16 inverse CDF, no filter in the launch, single draws: a table of weights */
  SV_VARIANT_SAMPLE_TOPP = 42,            /* bf16 inverse CDF, top-p the only filter, single draws: the window's patterns counted */
  SV_VARIANT_SAMPLE_TOPP_HELD = 43        /* the same, sm_90: the row held in a cluster's shared memory, read once */
};

#ifdef __cplusplus
}
#endif

#endif /* SAMPVIZ_H */
