#!/usr/bin/python3
"""bn_state.py: bn_from_data, the BN state the golden oracles give a seeded model before
they write it (torch_zoo.py s3d-golden, torch_x3d.py golden). A module of its own so
that those oracles share it without importing each other.
"""
import torch
import torch.nn as nn


def bn_from_data(model, x, g):
    """Running statistics of a pass over x (cumulative average), then perturbed, and
    gamma/beta away from 1/0: eval-mode BN then normalises about as training did."""
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm3d)]
    for m in bns:
        m.momentum, m.keep = None, m.momentum
    model.train()
    with torch.no_grad():
        model(x)
        for m in bns:
            m.momentum = m.keep
            del m.keep
            m.running_var.mul_(torch.empty_like(m.running_var).uniform_(0.9, 1.1, generator=g))
            m.running_mean.add_(0.05 * m.running_var.sqrt() *
                                torch.randn(m.running_mean.shape, generator=g))
            m.weight.uniform_(0.8, 1.2, generator=g)
            m.bias.uniform_(-0.2, 0.2, generator=g)
            m.num_batches_tracked.fill_(3)
