# sparse_sum_model.py (dev, b1): a CPU model of fast_kept.cuh's one-warp
# sparse_sum (the live-entry merge, level by level) against the block
# version's dense tree (sparse_sum_block, rowops.cuh tree_sum's shape), in
# float32 adds, on random kept sets: n of 256 to 151936 tokens, up to 64
# kept tokens, some packed into few chunks. It checks the algorithm, not
# the CUDA: the GPU suite (TestGPURenorm, TestGPUFastSmallBatches,
# TestGPUSpecVerify) checks the kernels' bits against engine/cpu.
# Run: python3 csrc/dev/b1/sparse_sum_model.py (exit 1 on a mismatch).
import random, struct
def f32(x): return struct.unpack('f', struct.pack('f', x))[0]
def fadd(a, b): return f32(a + b)
def tree_leaf(c, chunks, depth):
    s0, cnt, leaf = 0, chunks, 0
    for d in range(depth):
        h = cnt >> 1
        if c - s0 < h: cnt = h; leaf <<= 1
        else: s0 += h; cnt -= h; leaf = (leaf << 1) | 1
    return leaf
def leafsum(sidx, sw, r):
    c = sidx[r] >> 8; a = [0.0]*8; e = r
    while e < len(sidx) and (sidx[e] >> 8) == c:
        l = sidx[e] & 7; a[l] = fadd(a[l], sw[e]); e += 1
    return fadd(fadd(fadd(a[0], a[1]), fadd(a[2], a[3])), fadd(fadd(a[4], a[5]), fadd(a[6], a[7])))
def dense(n, sidx, sw):
    chunks = (n + 255) // 256; depth = 0
    while (1 << depth) < chunks: depth += 1
    leaves = 1 << depth; tree = [0.0] * (2 * leaves)
    for r in range(len(sidx)):
        c = sidx[r] >> 8
        if r > 0 and (sidx[r-1] >> 8) == c: continue
        tree[leaves + tree_leaf(c, chunks, depth)] = leafsum(sidx, sw, r)
    ln = leaves
    while ln > 1:
        step = 3 if ln >= 8 else 2 if ln >= 4 else 1
        up = ln >> step
        for j in range(up, 2 * up):
            d = tree[j << step:(j << step) + (1 << step)]
            if step == 3: v = fadd(fadd(fadd(d[0], d[1]), fadd(d[2], d[3])), fadd(fadd(d[4], d[5]), fadd(d[6], d[7])))
            elif step == 2: v = fadd(fadd(d[0], d[1]), fadd(d[2], d[3]))
            else: v = fadd(d[0], d[1])
            tree[j] = v
        ln = up
    return tree[1]
def ffs64(m): return (m & -m).bit_length() - 1 if m else -1
def warp(n, sidx, sw):
    kept = len(sidx); assert kept <= 64
    chunks = (n + 255) // 256; depth = 0
    while (1 << depth) < chunks: depth += 1
    v = [0.0]*64; leaf = [0]*64; alive = 0
    for e in range(kept):
        c = sidx[e] >> 8
        if e == 0 or (sidx[e-1] >> 8) != c:
            v[e] = leafsum(sidx, sw, e); leaf[e] = tree_leaf(c, chunks, depth); alive |= 1 << e
    L = 0
    while L < depth and bin(alive).count('1') > 1:
        old = list(v); lefts = 0
        for e in range(64):
            after = alive & ~(((2 << e) - 1) & (2**64 - 1)) & (2**64 - 1)
            nx = ffs64(after)
            if (alive >> e) & 1 and nx >= 0 and (leaf[e] >> (L + 1)) == (leaf[nx] >> (L + 1)):
                v[e] = fadd(old[e], old[nx]); lefts |= 1 << e
        dead = 0
        for e in range(64):
            before = alive & ((1 << e) - 1)
            if (alive >> e) & 1 and before and (lefts >> (before.bit_length() - 1)) & 1: dead |= 1 << e
        alive &= ~dead; L += 1
    root = ffs64(alive) if alive else 0
    return v[root]
random.seed(1)
bad = 0
for t in range(3000):
    n = random.choice([128256, 151936, 1000, 300, 256, 5000, 32000])
    kept = random.randint(0, min(64, n))
    mode = random.random()
    if mode < 0.3: idx = sorted(random.sample(range(min(n, 2048)), kept))  # clustered in few chunks
    else: idx = sorted(random.sample(range(n), kept))
    sw = [f32(random.random() * 10 ** random.uniform(-8, 0)) for _ in idx]
    a, b = dense(n, idx, sw), warp(n, idx, sw)
    if struct.pack('f', a) != struct.pack('f', b):
        bad += 1
        if bad < 5: print("MISMATCH", n, kept, a, b)
print("cases 3000, mismatches", bad)
raise SystemExit(1 if bad else 0)
