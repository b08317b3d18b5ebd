#!/usr/bin/env python3
"""Your own architecture as an ensembled member: a module scripted with torch.jit.script.

This file defines a small residual MLP and saves it as TorchScript. A member with
    "model": {"kind": "torchscript", "path": "model.pt"}
is then trained by ensembled's own loop (its loss, optimizer, seed, split and early stopping,
configs/example.json), checkpointed, predicted with, exported and verified like a built-in
member. The module's forward(x) must map [batch, features] to [batch, outputs]:
    outputs = 1 for regression, 2 for loss "gaussian_nll" (a mean and a raw variance),
              the number of classes for task "classification" (logits; ensembled adds the softmax).
x arrives standardised (ensembled subtracts each feature's training mean and divides by its std).

With "init": "member" (the default) ensembled redraws every parameter of dimension >= 2 with
the member's initializer and seed and zeroes the others, so the weights saved here only give
the shapes; with "init": "file" every member starts from the weights saved here. Dropout
inside the module is seeded per member by ensembled.

    python3 examples/torchscript/model.py --features 10 --output examples/torchscript/model.pt
    ensemblectl validate-config examples/torchscript/config.json
    ensembled run --config examples/torchscript/config.json
"""
import argparse

import torch
from torch import nn


class Block(nn.Module):
    """h + dropout(tanh(W h + b)): a residual block of constant width."""

    def __init__(self, width: int, dropout: float):
        super().__init__()
        self.linear = nn.Linear(width, width)
        self.dropout = nn.Dropout(dropout)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.dropout(torch.tanh(self.linear(h)))


class ResidualMlp(nn.Module):
    def __init__(self, features: int, outputs: int, width: int, blocks: int, dropout: float):
        super().__init__()
        self.inp = nn.Linear(features, width)
        self.blocks = nn.ModuleList([Block(width, dropout) for _ in range(blocks)])
        self.out = nn.Linear(width, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.inp(x))
        for block in self.blocks:
            h = block(h)
        return self.out(h)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--features", type=int, default=10, help="columns of x (the built-in data has 10)")
    p.add_argument("--outputs", type=int, default=1, help="1 regression, 2 gaussian_nll, else classes")
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--blocks", type=int, default=2)
    p.add_argument("--dropout", type=float, default=0.05)
    p.add_argument("--output", default="model.pt", help="where to save the scripted module")
    a = p.parse_args()
    torch.manual_seed(0)
    module = torch.jit.script(ResidualMlp(a.features, a.outputs, a.width, a.blocks, a.dropout))
    torch.jit.save(module, a.output)
    print(f"saved {a.output}: [batch, {a.features}] -> [batch, {a.outputs}]")


if __name__ == "__main__":
    main()
