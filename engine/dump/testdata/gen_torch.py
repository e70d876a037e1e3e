"""Writes the .pt fixtures of engine/dump's tests with torch.save itself.

Run with a Python that has torch (Debian: apt-get install python3-torch):
    cd engine/dump/testdata && python3 gen_torch.py
The values follow the formula of gen_numpy.py, which pt_test.go recomputes,
so the tests check what a real torch.save wrote. The sglang_dump/ folder is
named as SGLang's dumper names its files (sglang.srt.debug_utils.dumper:
"___".join(f"{k}={v}") + ".pt"), each file one torch.save of a tensor.
"""
import collections
import os
import shutil

import torch


def logits(dtype):
    # logits[i, j] = (5*i + j - 4.5) / 4: exact in every float dtype here.
    i = torch.arange(2).reshape(2, 1)
    j = torch.arange(5).reshape(1, 5)
    return ((5 * i + j - 4.5) / 4).to(dtype)


torch.save({
    "__metadata__": {"op": "renorm", "source": "torch.save"},
    "logits": logits(torch.float32),
    "temperature": torch.tensor(0.5),
    "top_k": torch.tensor([3, 0], dtype=torch.int64),
    "top_p": torch.tensor([0.9, 1.0], dtype=torch.float64),
    "probs@eager": torch.softmax(logits(torch.float32) / 0.5, dim=-1).to(torch.float16),
    "extra": {"tokens": torch.tensor([1, 4], dtype=torch.int32),
              "mask": torch.tensor([True, False, True]),
              "ids": torch.tensor([0, 255, 17], dtype=torch.uint8)},
    "step": 7,
    "note": "plain values are ignored",
}, "torch_dict.pt")

torch.save(logits(torch.bfloat16), "torch_logits_bf16.pt")
torch.save({"logits": logits(torch.float16)}, "torch_protocol4.pt", pickle_protocol=4)

base = torch.arange(12, dtype=torch.float64) / 4 - 1.125  # logits[0, 0] at element 2
torch.save({"logits": base[2:12].reshape(2, 5)}, "torch_offset.pt")
torch.save({"logits": torch.arange(10, dtype=torch.float32).reshape(5, 2).t()}, "torch_noncontiguous.pt")

linear = torch.nn.Linear(5, 2)
with torch.no_grad():
    linear.weight.copy_(logits(torch.float32))
    linear.bias.copy_(torch.tensor([0.25, -0.5]))
torch.save(linear.state_dict(), "torch_state_dict.pt")  # an OrderedDict with _metadata
torch.save({"logits": torch.nn.Parameter(logits(torch.float32))}, "torch_parameter.pt")
torch.save({"logits": logits(torch.float32).to(torch.int8)}, "torch_int8.pt")
torch.save([logits(torch.float32)], "torch_list.pt")

shutil.rmtree("sglang_dump", ignore_errors=True)
os.makedirs("sglang_dump")
index = 0


def dump(name, value, pass_id, rank=0):
    global index
    index += 1
    kwargs = collections.OrderedDict(forward_pass_id=pass_id, rank=rank, name=name, dump_index=index)
    torch.save(value, os.path.join("sglang_dump", "___".join(f"{k}={v}" for k, v in kwargs.items()) + ".pt"))


for pass_id in (1, 2):
    dump("next_token_logits", logits(torch.float32) + pass_id, pass_id)
    dump("temperatures", torch.tensor([[0.5], [1.0]]), pass_id)
    dump("top_ps", torch.tensor([0.9, 1.0]), pass_id)
    dump("batch_next_token_ids", torch.tensor([4, 3], dtype=torch.int32), pass_id)
dump("next_token_logits", logits(torch.float32), 2, rank=1)
dump("step", 42, 2)
