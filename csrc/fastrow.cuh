// fastrow.cuh: the top-k fast path that renorm, sample and spec_verify share
// for rows whose filters are decided inside their top-k set: top-k on
// (0 < k <= kFastMaxK), and top-p, if on, on the top-k mass (top_k_first).
//
// Every decision still equals engine/cpu's bit for bit (docs/SEMANTICS.md);
// what changes is how few tokens need their exact weight. w = Exp((x - m)/T)
// never decreases as x grows, so the k-th largest weight is the weight of
// the k-th largest logit, and a row's top-k set is found on the logits
// alone, with no exp:
//
//   1. scan: the row is split into C chunks, one block each (fast_layout:
//      whole rows when there are enough of them to fill the GPU). A block
//      reads its chunk once (16-byte loads, several in flight per thread)
//      and appends to a shared-memory buffer every token at or above a
//      running threshold theta; the hot loop is a packed vector max and
//      one comparison per 16 bytes. The first tile's theta is the k-th
//      largest of its vector maxima (no exp, no cut of every token); when
//      the buffer passes half full, it is cut to its k largest (radix
//      select on order-preserving keys) and theta rises to the k-th
//      largest seen so far. Every token at or above the chunk's k-th
//      largest is in the buffer, and theta never passes it.
//   2. finish, by the last block of the row to arrive (a counter per row;
//      with C = 1 the same block, without a round trip through memory;
//      where a row's 8 to 16 chunks run as one cluster, block 0, into
//      whose shared memory every chunk pushes its candidates):
//      the chunks' candidates at or above the largest theta are merged,
//      the row's max and its first index are read off them, the k-th
//      largest logit x_k gives tau_k = w(x_k), and only the tokens at or
//      above x_k get their exact weight. Ranked by (w descending, index),
//      top-k (keep or lowest_index), top-p on integer masses and min-p
//      keep a prefix; the kept tokens are then ranked by index for the
//      op's own use (sum, draw, list).
//
// What sends a row to the full-row kernels instead (they run after, only on
// the rows flagged in todo): NaN or +Inf, all -Inf, T = 0, no top-k, k over
// kFastMaxK, joint top-p, a buffer overflow (ties in the logits, or rows
// that rise steadily), a top-k set with ties past kFastList, and the one
// case the logits cannot decide: a token below x_k whose weight still
// equals tau_k (two logits one step apart that the exp maps to one float
// weight, e.g. at T = 100 on float32 logits). That case is detected
// exactly: the weight of the next representable value below x_k is
// compared with tau_k.
#pragma once
#pragma once

#include "fast_kept.cuh"
#include "fast_row.cuh"
