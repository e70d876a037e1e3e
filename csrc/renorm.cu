// renorm.cu: renorm's launcher: the top-k fast path for launches with
// filters, then the full-row kernel for the rows it flagged (or for every
// row, without filters). The kernels are renorm.cuh's.
#include "renorm.cuh"

namespace sv {

int launch_renorm(int dtype, const void *logits, int rows, int vocab, uint64_t params, int flags,
                  float *probs) {
  if (rows < 0 || vocab < 1) return set_error(SV_ERR_INVALID, "renorm: %d rows of %d tokens", rows, vocab);
  if (vocab > kMaxExactVocab)
    return set_error(SV_ERR_UNSUPPORTED, "renorm: vocabulary %d over %d", vocab, kMaxExactVocab);
  if (rows == 0) return SV_OK;
  const RowParams rp = row_params(params, rows);
  const size_t wbytes = (sizeof(float) * (size_t)rows * wstride(vocab) + 255) & ~(size_t)255;
  const bool fast = (flags & SV_HAS_FILTERS) && rows <= 65535;  // the fast grid's rows are its y
  int chunks = 1, chunk = vocab;
  if (fast) fast_layout(rows, vocab, chunks, chunk);
  void *ws = nullptr;
  int st = workspace(wbytes + (fast ? fast_bytes(rows, chunks) : 0), &ws);
  if (st != SV_OK) return st;
  FastArgs fa{};
  if (fast) {
    st = fast_args(static_cast<char *>(ws) + wbytes, rows, vocab, rp, flags, nullptr, fa);
    if (st != SV_OK) return st;
  }
  const int zero_fill = static_cast<const void *>(probs) != logits;
  SV_DISPATCH_DTYPE(dtype, T, {
    const T *x = static_cast<const T *>(logits);
    if (fast) {
      const auto fk = renorm_fast_kernels(x);
      const bool serve = fast_serves(flags, fa);
      const bool cluster = serve && fast_cluster(fk.cluster, fa);
      const int variant = cluster ? SV_VARIANT_RENORM_FAST_CLUSTER
                          : serve ? SV_VARIANT_RENORM_FAST_SERVE
                                  : SV_VARIANT_RENORM_FAST;
      st = fast_launch(variant, cluster ? fk.cluster : serve ? fk.serve : fk.plain, dim3(fa.chunks, rows), cluster,
                       "renorm (top-k fast path)", x, fa, probs, zero_fill, static_cast<float *>(ws));
      if (st != SV_OK || serve) return st;  // the fast kernel served its flagged rows
    }
    const auto kk = renorm_full_kernels(x);
    const auto full = full_row_variant<kRenormBlock>(kk.pattern, kk.tokens, sizeof(T) == 2);
    if (fast)
      return launch_after(full.smem ? SV_VARIANT_RENORM_FLAGGED_PATTERN : SV_VARIANT_RENORM_FLAGGED_TOKENS,
                          (flags & SV_ALL_FAST) != 0, full.kern,
                          dim3(flagged_grid((const void *)full.kern, kRenormBlock, rows, full.smem)), kRenormBlock,
                          full.smem, "renorm", x, vocab, rows, rp, flags, probs, static_cast<float *>(ws), fa.todo);
    return launch_after(full.smem ? SV_VARIANT_RENORM_ROWS_PATTERN : SV_VARIANT_RENORM_ROWS_TOKENS, false,
                        full.kern, dim3(rows), kRenormBlock, full.smem, "renorm", x, vocab, rows, rp, flags, probs,
                        static_cast<float *>(ws), (const int *)nullptr);
  });
  return SV_OK;
}

}  // namespace sv

extern "C" int sv_renorm(int dtype, uint64_t logits, int rows, int vocab, uint64_t params, int flags,
                         uint64_t probs) {
  if (!params) return sv::set_error(SV_ERR_INVALID, "renorm: no parameters");
  return sv::launch_renorm(dtype, reinterpret_cast<const void *>(logits), rows, vocab, params, flags,
                           reinterpret_cast<float *>(probs));
}
