"""rnnjit.torch as a torch.nn module: state_dict both ways, convert(), no_grad/eval, the cache,
moving and copying, dropout, and bad input with torch.nn's kind of messages."""

import copy
import pickle

import pytest

from conftest import torch_or_skip

torch = torch_or_skip()
import rnnjit  # noqa: E402
import rnnjit.torch  # noqa: E402


def test_state_dict_loads_both_ways_and_names_match():
    ours = rnnjit.torch.LSTM(6, 8, num_layers=2, bidirectional=True, proj_size=3)
    theirs = torch.nn.LSTM(6, 8, num_layers=2, bidirectional=True, proj_size=3)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    theirs.load_state_dict(ours.state_dict())
    x = torch.rand(4, 3, 6)
    torch.testing.assert_close(ours(x)[0], theirs(x)[0], rtol=1e-5, atol=1e-6)
    ours.load_state_dict(torch.nn.LSTM(6, 8, num_layers=2, bidirectional=True, proj_size=3).state_dict())
    theirs.load_state_dict(ours.state_dict())
    torch.testing.assert_close(ours(x)[0], theirs(x)[0], rtol=1e-5, atol=1e-6)
    assert isinstance(ours, torch.nn.LSTM)


def test_convert_swaps_the_rnns_of_a_model_in_place():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = torch.nn.GRU(5, 7, batch_first=True)
            self.head = torch.nn.Sequential(torch.nn.Linear(7, 2), torch.nn.RNN(2, 3, nonlinearity="relu"))

    model = Model()
    model.rnn.weight_hh_l0.requires_grad_(False)
    x = torch.rand(2, 4, 5)
    want = model.rnn(x)[0]
    same = rnnjit.torch.convert(model)
    assert same is model
    assert type(model.rnn) is rnnjit.torch.GRU and type(model.head[1]) is rnnjit.torch.RNN
    assert model.head[1].nonlinearity == "relu" and model.rnn.batch_first
    assert not model.rnn.weight_hh_l0.requires_grad
    torch.testing.assert_close(model.rnn(x)[0], want, rtol=1e-5, atol=1e-6)
    lone = rnnjit.torch.convert(torch.nn.LSTM(3, 4))
    assert type(lone) is rnnjit.torch.LSTM


def test_no_grad_and_eval_run_the_inference_plan_and_the_cache_compiles_nothing_twice():
    lstm = rnnjit.torch.LSTM(9, 12, num_layers=2, dropout=0.5)
    x = torch.rand(5, 3, 9)
    lstm.eval()
    with torch.no_grad():
        y1 = lstm(x)[0]
        before = rnnjit.cache_stats()
        y2 = lstm(x)[0]
        after = rnnjit.cache_stats()
    assert torch.equal(y1, y2), "eval: no dropout"
    assert after.kernel_misses == before.kernel_misses and after.plan_misses == before.plan_misses
    assert not y1.requires_grad
    y3 = lstm(x)[0]  # eval with gradients: the training plan, still without dropout
    assert y3.requires_grad
    torch.testing.assert_close(y3, y1, rtol=1e-6, atol=1e-6)


def test_dropout_in_training_follows_torch_manual_seed():
    gru = rnnjit.torch.GRU(4, 6, num_layers=3, dropout=0.5)
    x = torch.rand(3, 2, 4)
    torch.manual_seed(5)
    a = gru(x)[0]
    torch.manual_seed(5)
    b = gru(x)[0]
    c = gru(x)[0]
    assert torch.equal(a, b) and not torch.equal(a, c)
    gru.eval()
    assert not torch.equal(gru(x)[0], a)


def test_several_forwards_before_backward_each_keep_their_reserve():
    torch.manual_seed(3)
    ours = rnnjit.torch.LSTM(4, 5)
    theirs = torch.nn.LSTM(4, 5)
    theirs.load_state_dict(ours.state_dict())
    xs = [torch.rand(6, 2, 4) for _ in range(3)]
    sum(ours(x)[0].pow(2).sum() for x in xs).backward()
    sum(theirs(x)[0].pow(2).sum() for x in xs).backward()
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)


def test_in_place_weight_updates_between_forward_and_backward_are_caught():
    lstm = rnnjit.torch.LSTM(3, 4)
    y = lstm(torch.rand(2, 1, 3))[0]
    with torch.no_grad():
        lstm.weight_hh_l0.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_a_second_backward_through_the_graph_is_refused():
    rnn = rnnjit.torch.RNN(3, 4)
    y = rnn(torch.rand(2, 1, 3))[0].sum()
    y.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="consumed its reserve"):
        y.backward()


def test_moving_copying_and_pickling_keep_the_weights():
    lstm = rnnjit.torch.LSTM(3, 4, num_layers=2)
    x = torch.rand(2, 2, 3)
    want = lstm(x)[0].detach()
    lstm.to(torch.float32)
    copied = copy.deepcopy(lstm)
    restored = pickle.loads(pickle.dumps(lstm))
    replaced = rnnjit.torch.LSTM(3, 4, num_layers=2)
    replaced.weight_ih_l1 = torch.nn.Parameter(lstm.weight_ih_l1.detach().clone())  # a new storage
    replaced.load_state_dict(lstm.state_dict())
    for model in (lstm, copied, restored, replaced):
        torch.testing.assert_close(model(x)[0], want, rtol=0, atol=0)


def test_bad_input_messages():
    lstm = rnnjit.torch.LSTM(4, 5, num_layers=2)
    x = torch.rand(3, 2, 4)
    with pytest.raises(ValueError, match="Expected input to be 2D or 3D, got 4D"):
        lstm(x[None])
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size. Expected 4, got 3"):
        lstm(torch.rand(3, 2, 3))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(2, 2, 5\), got \[2, 3, 5\]"):
        lstm(x, (torch.rand(2, 3, 5), torch.rand(2, 2, 5)))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[1\] size \(2, 2, 5\), got \[1, 2, 5\]"):
        lstm(x, (torch.rand(2, 2, 5), torch.rand(1, 2, 5)))
    with pytest.raises(RuntimeError, match="should also be 3-D but got 2-D"):
        lstm(x, (torch.rand(2, 5), torch.rand(2, 5)))
    with pytest.raises(RuntimeError, match="Expected hx size"):
        rnnjit.torch.GRU(4, 5)(x, torch.rand(1, 2, 6))
    # Mixtures torch.nn refuses get torch.nn's own message (its forward runs them).
    with pytest.raises((ValueError, RuntimeError), match="dtype"):
        lstm(x.double())
    with pytest.raises((ValueError, RuntimeError), match="dtype|Double|Float"):
        lstm(x, (torch.rand(2, 2, 5, dtype=torch.float64), torch.rand(2, 2, 5)))
    strict = rnnjit.torch.LSTM(4, 5).double()
    strict.strict = True
    with pytest.raises(TypeError, match="rnnjit runs float32 and bfloat16 on the CPU .* not torch.float64 on cpu"):
        strict(x.double())


def test_non_contiguous_inputs_are_copied_as_torch_nn_does():
    gru = rnnjit.torch.GRU(4, 5, batch_first=True)
    theirs = torch.nn.GRU(4, 5, batch_first=True)
    theirs.load_state_dict(gru.state_dict())
    x = torch.rand(3, 2, 4).transpose(0, 1)  # [2, 3, 4], not contiguous
    torch.testing.assert_close(gru(x)[0], theirs(x)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here: the GPU path is checked on a GPU")
def test_cuda_tensors_run_on_the_cuda_executor():
    ours = rnnjit.torch.LSTM(16, 32, num_layers=2).cuda()
    theirs = torch.nn.LSTM(16, 32, num_layers=2).cuda()
    theirs.load_state_dict(ours.state_dict())
    x = torch.rand(7, 4, 16, device="cuda", requires_grad=True)
    y, _ = ours(x)
    ry, _ = theirs(x)
    torch.testing.assert_close(y, ry, rtol=1e-4, atol=1e-5)
    y.sum().backward()
    assert ours.weight_ih_l0.grad is not None and ours.weight_ih_l0.grad.is_cuda
