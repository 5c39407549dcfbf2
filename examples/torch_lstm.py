# Training steps of a 2-layer bidirectional LSTM from rnnjit.torch, written as for torch.nn.LSTM.
import torch
import rnnjit
import rnnjit.torch

lstm = rnnjit.torch.LSTM(input_size=32, hidden_size=64, num_layers=2, bidirectional=True, batch_first=True)
lstm.load_state_dict(torch.nn.LSTM(32, 64, 2, bidirectional=True, batch_first=True).state_dict())
optimizer = torch.optim.SGD(lstm.parameters(), lr=0.1)
x = torch.randn(8, 50, 32)                        # [batch, time, features]
for step in range(3):                             # the second step compiles nothing
    y, (h_n, c_n) = lstm(x)                       # y [8, 50, 128], h_n and c_n [4, 8, 64]
    loss = y.pow(2).mean()
    optimizer.zero_grad()
    loss.backward()                               # backward reuses forward's reserve
    optimizer.step()
print(f"loss {loss.item():.5f}, kernels compiled {rnnjit.cache_stats().kernel_misses}")
