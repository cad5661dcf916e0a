"""A small multilayer perceptron whose sizes are deliberately not multiples of the NeuronCore's tile sizes."""

from itertools import pairwise

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, sizes: tuple[int, ...] = (300, 520, 130, 10)):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in pairwise(sizes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers[:-1]:
            x = torch.relu(layer(x))
        return self.layers[-1](x)
