"""The small model, data and training loop that test_distributed.py runs in one process and in
two DistributedDataParallel processes."""

import torch

import rnnjit.torch

BATCH, STEPS = 8, 3


class Tagger(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = rnnjit.torch.LSTM(6, 10, num_layers=2, bidirectional=True)
        self.head = torch.nn.Linear(20, 3)

    def forward(self, x):
        return self.head(self.lstm(x)[0])


def make_model():
    return Tagger()


def make_data():
    gen = torch.Generator().manual_seed(7)
    return torch.rand(5, BATCH, 6, generator=gen), torch.rand(5, BATCH, 3, generator=gen)


def train(model, x, target, steps):
    """SGD on the mean squared error: the mean over the batch makes DDP's averaged gradients
    equal to the whole batch's."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for _ in range(steps):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), target).backward()
        optimizer.step()
