"""Writes the numpy fixtures of engine/dump's tests with numpy itself.

Run with a Python that has numpy (Debian: apt-get install python3-numpy):
    python3 gen_numpy.py
The values follow simple formulas that numpy_test.go recomputes, so the test
checks what a real numpy wrote, not what sampviz's own writer wrote.
"""
import json

import numpy as np


def logits(dtype):
    # logits[i, j] = (5*i + j - 4.5) / 4: exact in f16, f32 and f64.
    i, j = np.indices((2, 5))
    return ((5 * i + j - 4.5) / 4).astype(dtype)


meta = json.dumps({"op": "sample", "source": "numpy é"})
arrays = dict(
    logits=logits("<f4"),
    temperature=np.array([0.5, 1.25], dtype="<f4"),
    top_k=np.array([3, 0], dtype="<i8"),
    seed=np.array(7, dtype="<i8"),
    tokens=np.array([1, 4], dtype="<i4"),
    mask=np.array([[True, False, True, True, False]] * 2),
    ids=np.array([0, 255, 17], dtype="|u1"),
    __metadata__=np.array(meta),
)
np.savez("numpy_savez.npz", **arrays)
np.savez_compressed("numpy_savez_compressed.npz", **arrays)

np.save("numpy_logits_f32.npy", logits("<f4"))
np.save("numpy_logits_f64.npy", logits("<f8"))
np.save("numpy_logits_f16_be.npy", logits(">f2"))
np.save("numpy_logits_i4_be.npy", np.arange(10, dtype=">i4").reshape(2, 5) - 3)
np.save("numpy_scalar_f64.npy", np.array(2.75))
np.save("numpy_vector_i8.npy", np.array([5, -6, 7], dtype="<i8"))
np.save("numpy_fortran.npy", np.asfortranarray(logits("<f4")))
np.save("numpy_int8.npy", np.array([1, 2], dtype="|i1"))
