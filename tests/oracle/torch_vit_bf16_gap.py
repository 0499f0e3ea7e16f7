#!/usr/bin/python3
"""torch_vit_bf16_gap.py: how far PyTorch's own bf16 autocast step of vit_test is from its
fp32 step: the scale tests/test_vit_gpu.c's BF16 step bounds are argued from.

torch_vit.py's VisionTransformer (dim 48, 2 heads, depth 2, 5 classes), 2 clips of
4x32x48, non-trivial weights as torch_vit.py's golden (3 seeds), one training forward,
cross-entropy, backward, once in fp32 and once under torch.autocast('cpu', bfloat16).
LayerNorm gets its input cast to float, as CUDA autocast does (it lists layer_norm as
fp32; PyTorch 1.13's CPU autocast would otherwise fail on a bf16 input with float
weights). Prints the NMSE of the logits, of all gradients together and the worst tensor.
Measured (2026-11-28, PyTorch 1.13): logits 2.3-3.4e-5, gradients 3.9-5.0e-5, worst
tensor 7e-5 to 1.3e-4, loss within 0.3%.
  /usr/bin/python3 tests/oracle/torch_vit_bf16_gap.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bf16_gap import gap, layernorm_fp32, step_pair  # noqa: E402
from torch_vit import VisionTransformer, golden_weights  # noqa: E402

layernorm_fp32()


def main():
    torch.set_num_threads(1)
    for seed in (11, 12, 13):
        torch.manual_seed(seed)
        m = VisionTransformer(48, 2, 2, 5)
        g = torch.Generator().manual_seed(seed + 1)
        golden_weights(m, g)  # torch_vit.py golden's non-trivial weights
        x = torch.randn((2, 3, 4, 32, 48), generator=g)
        lab = torch.tensor([1, 3])
        la, lb, logits, tot, worst, median, _ = gap(step_pair(m, x, lab))
        print(f"seed {seed}: loss {la:.6f} vs {lb:.6f}, logits NMSE {logits:.2e}, "
              f"gradients {tot:.2e}, worst {worst[0]:.2e} ({worst[1]}), median {median:.2e}")


if __name__ == "__main__":
    main()
