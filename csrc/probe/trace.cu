// trace.cu: where the time of one renorm launch goes, phase by phase, from
// the stamps of a -DSV_TRACE build of the library (trace.cuh). It runs the
// bench's filtered case (bf16, V=128256, top-k 50, top-p 0.9, T=0.7) at B
// rows (argument 1, default 1): 200 launches behind a spin kernel, inputs
// rotated past the L2, and prints medians of the launch between CUDA events,
// of when the chunks' scans end, and of each step of the row's finishing
// block (fastrow.cuh fast_top, then renorm's sum and writes). With "p" as
// argument 2 the rows have top-p alone, which the full-row kernel serves by
// distinct value (patterns.cuh), and it prints the median block's steps of
// that path instead. Only grid row 0 is traced. Not part of the library:
// `make gpu-trace` builds and runs it on the GPU machine (docs/PERF.md).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "../sampviz.h"

extern "C" int sv_trace_read(unsigned long long *host, int n);

namespace {

constexpr int kBlocks = 64, kSlots = 32;  // trace.cuh kTraceBlocks, kTraceSlots

double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void must(int status, const char *what) {
  if (status != SV_OK) {
    printf("%s: %s\n", what, sv_last_error());
    exit(1);
  }
}

}  // namespace

int main(int argc, char **argv) {
  const int vocab = 128256, rows = argc > 1 ? atoi(argv[1]) : 1, iters = 200, warmup = 10;
  const bool pattern = argc > 2 && strcmp(argv[2], "p") == 0;  // top-p alone: the full-row pattern path
  if (rows < 1) return 2;
  must(sv_init(0), "init");
  const long long in_bytes = 2LL * vocab * rows, out_bytes = 4LL * vocab * rows;
  const long long sets = std::max(1LL, std::min(256LL, (200LL << 20) / in_bytes));
  uint64_t logits, probs, params;
  must(sv_malloc(in_bytes * sets, &logits), "malloc");
  must(sv_malloc(out_bytes * sets, &probs), "malloc");
  must(sv_fill_random(logits, SV_BF16, (uint64_t)vocab * rows * sets, 12345, 2.0f), "fill");
  std::vector<unsigned char> p(SV_PARAM_BYTES * rows, 0);  // sampviz.h: six arrays of rows
  for (int r = 0; r < rows; r++) {
    const float temp = 0.7f, top_p = 0.9f;
    const int top_k = pattern ? 0 : 50;
    memcpy(&p[4 * r], &temp, 4);
    memcpy(&p[4 * rows + 4 * r], &top_k, 4);
    memcpy(&p[8 * rows + 4 * r], &top_p, 4);
  }
  must(sv_malloc(p.size(), &params), "malloc");
  must(sv_memcpy_htod(params, p.data(), p.size()), "copy");
  must(sv_events_reserve(2), "events");

  std::vector<unsigned long long> buf(kBlocks * kSlots * 2);
  auto clock = [&](int b, int id) { return buf[(b * kSlots + id) * 2]; };
  auto timer = [&](int b, int id) { return buf[(b * kSlots + id) * 2 + 1]; };
  must(sv_trace_read(buf.data(), (int)buf.size()), "trace");
  std::vector<double> launch, scan[4], arrive, phase[14], count[3], ghz, pphase[25], distinct;
  const int pids[] = {14, 16, 17, 18, 19, 23, 24};
  for (int it = 0; it < iters; it++) {
    const long long set = it % sets;
    must(sv_delay(30000), "delay");
    must(sv_event_record(0), "event");
    must(sv_renorm(SV_BF16, logits + in_bytes * set, rows, vocab, params, SV_HAS_FILTERS | (pattern ? 0 : SV_ALL_FAST),
                   probs + out_bytes * set),
         "renorm");
    must(sv_event_record(1), "event");
    must(sv_synchronize(), "renorm");
    float ms = 0;
    must(sv_event_elapsed(0, 1, &ms), "elapsed");
    must(sv_trace_read(buf.data(), (int)buf.size()), "trace");
    if (it < warmup) continue;
    launch.push_back(ms * 1000);
    if (pattern) {
      for (int b = 0; b < kBlocks; b++) {
        if (!clock(b, 24) || !clock(b, 14)) continue;
        const double f = (double)(clock(b, 24) - clock(b, 14)) / (double)(timer(b, 24) - timer(b, 14));
        for (int q = 1; q < 7; q++) pphase[q].push_back((double)(clock(b, pids[q]) - clock(b, pids[q - 1])) / f);
        distinct.push_back((double)clock(b, 25));
      }
      continue;
    }
    unsigned long long start = ~0ull;
    int last = -1;  // the finishing block
    for (int b = 0; b < kBlocks; b++) {
      if (timer(b, 0)) start = std::min(start, timer(b, 0));
      if (timer(b, 4)) last = b;
    }
    for (int id = 1; id <= 3; id++) {
      unsigned long long latest = 0;
      for (int b = 0; b < kBlocks; b++) latest = std::max(latest, timer(b, id));
      scan[id].push_back((double)(latest - start));
    }
    if (last < 0 || !clock(last, 13)) continue;  // the row took the full-row path
    const double f = (double)(clock(last, 13) - clock(last, 4)) / (double)(timer(last, 13) - timer(last, 4));
    ghz.push_back(f);
    arrive.push_back((double)(timer(last, 4) - start));
    for (int id = 5; id <= 13; id++) phase[id].push_back((double)(clock(last, id) - clock(last, id - 1)) / f);
    for (int c = 0; c < 3; c++) count[c].push_back((double)clock(last, 20 + c));
  }
  if (pattern) {
    printf("renorm p0.9 T0.7 (top-p alone: the pattern path), bf16, B=%d V=%d: launch (events) %.1f us\n", rows,
           vocab, median(launch));
    const char *pnames[] = {"", "count the patterns", "list the distinct values", "their weights",
                            "filters and key floor", "sum", "write the probabilities"};
    double total = 0;
    for (int q = 1; q < 7; q++) {
      printf("    %-30s %6.2f us\n", pnames[q], median(pphase[q]) / 1e3);
      total += median(pphase[q]);
    }
    printf("    %-30s %6.2f us (a row, per block; %.0f distinct values)\n", "total", total / 1e3, median(distinct));
    return 0;
  }
  printf("renorm k50 p0.9 T0.7, bf16, B=%d V=%d: launch (events) %.1f us, SM clock %.2f GHz\n", rows, vocab,
         median(launch), median(ghz));
  printf("  chunks (latest, from the first block's start): first theta %.2f us, scan %.2f us, zeros %.2f us\n",
         median(scan[1]) / 1e3, median(scan[2]) / 1e3, median(scan[3]) / 1e3);
  printf("  finishing block arrives at %.2f us; its steps:\n", median(arrive) / 1e3);
  const char *names[] = {"", "", "", "", "", "merge the chunks' candidates", "row max", "k-th largest (radix select)",
                         "keep the top-k set", "weights and rank", "filters (top-p, min-p)", "kept tokens by index",
                         "sum (sparse_sum)", "write the kept probabilities"};
  double total = 0;
  for (int id = 5; id <= 13; id++) {
    printf("    %-30s %6.2f us\n", names[id], median(phase[id]) / 1e3);
    total += median(phase[id]);
  }
  printf("    %-30s %6.2f us\n", "total", total / 1e3);
  printf("  candidates merged %.0f, top-k set %.0f, kept %.0f\n", median(count[0]), median(count[1]),
         median(count[2]));
  return 0;
}
