"""rnnjit.torch in inference and beside torch.nn's dtypes: packed weights kept between calls and
never stale, bf16 modules and CPU autocast, torch.nn's implementation for what rnnjit cannot
run, copies at any time and batches of 0."""

import copy
import pickle
import warnings

import pytest

from conftest import torch_nn_call, torch_or_skip

torch = torch_or_skip()
import rnnjit  # noqa: E402
import rnnjit.torch  # noqa: E402

CELLS = [(rnnjit.torch.LSTM, torch.nn.LSTM, {}), (rnnjit.torch.GRU, torch.nn.GRU, {}),
         (rnnjit.torch.RNN, torch.nn.RNN, {"nonlinearity": "tanh"})]


def pair(ours_cls, theirs_cls, *args, **kwargs):
    ours = ours_cls(*args, **kwargs)
    theirs = theirs_cls(*args, **kwargs)
    theirs.load_state_dict(ours.state_dict())
    return ours, theirs


def infer(module, x):
    with torch.no_grad():
        return module(x)[0]


def check_fresh(ours, theirs, x, what):
    """ours' inference output equals torch.nn's on the same parameters (so no stale pack served)."""
    theirs.load_state_dict(ours.state_dict())
    torch.testing.assert_close(infer(ours, x), infer(theirs, x), rtol=1e-5, atol=1e-5, msg=what)


def packs_made(module):
    """How many times the module's weights were packed so far (a pack is a new uint8 tensor)."""
    from rnnjit.torch import _packs
    entry = _packs._PACKS.get(id(module._rnnjit_params()[0]))
    return None if entry is None else {k: id(v.packed) for k, v in entry[1].items()}


def test_inference_reuses_the_packed_weights():
    lstm = rnnjit.torch.LSTM(8, 16, num_layers=2).eval()
    x = torch.rand(3, 2, 8)
    infer(lstm, x)
    first = packs_made(lstm)
    assert first, "an inference call on the CPU packs the weights"
    infer(lstm, x)
    assert packs_made(lstm) == first, "the second call reuses them"
    infer(lstm, torch.rand(1, 2, 8))
    assert len(packs_made(lstm)) >= 1


def test_packs_follow_every_change_of_the_parameters():
    ours, theirs = pair(rnnjit.torch.LSTM, torch.nn.LSTM, 6, 10, num_layers=2, proj_size=4)
    ours.eval()
    x = torch.rand(2, 3, 6)
    check_fresh(ours, theirs, x, "first call")
    # An optimizer step (in-place adds under no_grad).
    opt = torch.optim.SGD(ours.parameters(), lr=0.5)
    ours.train()
    ours(torch.rand(2, 3, 6))[0].sum().backward()
    opt.step()
    ours.eval()
    check_fresh(ours, theirs, x, "after an optimizer step")
    # load_state_dict (copy_ into the parameters).
    ours.load_state_dict(torch.nn.LSTM(6, 10, num_layers=2, proj_size=4).state_dict())
    check_fresh(ours, theirs, x, "after load_state_dict")
    # An in-place edit under no_grad, of one parameter, through a view.
    with torch.no_grad():
        ours.weight_hh_l1.view(-1)[:5].mul_(-3)
    check_fresh(ours, theirs, x, "after an in-place edit")
    # .to(): new tensors.
    ours.double().float()
    check_fresh(ours, theirs, x, "after .double().float()")
    # A parameter assigned anew, and load_state_dict(assign=True) where torch has it.
    ours.weight_ih_l0 = torch.nn.Parameter(torch.rand_like(ours.weight_ih_l0))
    check_fresh(ours, theirs, x, "after assigning a Parameter")
    try:
        ours.load_state_dict(torch.nn.LSTM(6, 10, num_layers=2, proj_size=4).state_dict(), assign=True)
    except TypeError:
        pass  # torch 1.13: no assign=
    check_fresh(ours, theirs, x, "after load_state_dict(assign=True)")
    # .data replaced (a new storage, no version bump: the data pointer tells).
    ours.bias_hh_l0.data = torch.rand_like(ours.bias_hh_l0)
    check_fresh(ours, theirs, x, "after replacing .data")


def test_edits_through_data_need_drop_packed_weights():
    ours, theirs = pair(rnnjit.torch.GRU, torch.nn.GRU, 5, 7)
    x = torch.rand(4, 2, 5)
    check_fresh(ours, theirs, x, "first call")
    ours.weight_hh_l0.data.mul_(0.5)  # bypasses the version counter (EMA, clipping code)
    theirs.load_state_dict(ours.state_dict())
    stale = infer(ours, x)
    assert not torch.allclose(stale, infer(theirs, x)), "documented: .data edits are not seen"
    ours.drop_packed_weights()
    check_fresh(ours, theirs, x, "after drop_packed_weights")


@pytest.mark.parametrize("ours_cls,theirs_cls,kwargs", CELLS)
def test_float64_runs_torch_nn_with_one_warning(ours_cls, theirs_cls, kwargs):
    ours, theirs = pair(ours_cls, theirs_cls, 4, 6, num_layers=2, bidirectional=True, **kwargs)
    ours.double()
    theirs.double()
    x = torch.rand(3, 2, 4, dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = ours(x)[0]
        ours(x)
    assert [w.category for w in caught].count(rnnjit.torch.FallbackWarning) == 1, "one warning per module"
    assert y.dtype == torch.float64
    assert torch.equal(y, theirs(x)[0]), "torch.nn's implementation: equal exactly"
    y.sum().backward()
    ours.strict = True
    with pytest.raises(TypeError, match="strict"):
        ours(x)


def test_a_device_without_a_backend_runs_torch_nn():
    lstm = rnnjit.torch.LSTM(4, 5).to("meta")
    with pytest.warns(rnnjit.torch.FallbackWarning, match="meta"):
        y, (h, c) = lstm(torch.empty(3, 2, 4, device="meta"))
    assert y.device.type == "meta" and y.shape == (3, 2, 5)


@pytest.mark.filterwarnings("error::rnnjit.torch.FallbackWarning")
@pytest.mark.parametrize("ours_cls,theirs_cls,kwargs", CELLS)
def test_bf16_modules_run_bf16_gemms_and_return_bf16(ours_cls, theirs_cls, kwargs):
    torch.manual_seed(0)
    ours, theirs = pair(ours_cls, theirs_cls, 16, 32, num_layers=2, **kwargs)
    ours.to(torch.bfloat16)
    ref = copy.deepcopy(theirs)  # float32 reference
    theirs.to(torch.bfloat16)
    x = torch.rand(5, 3, 16)
    xb = x.to(torch.bfloat16).requires_grad_()
    y, *_ = ours(xb)
    assert any(key[3] == "bf16" for key in ours._rnnjit_rnns), "the bf16 GEMMs (fpmath bf16) ran it"
    want = ref(xb.detach().float())[0]
    assert y.dtype == torch.bfloat16 == theirs(xb)[0].dtype
    # bf16 inputs and outputs: about 3 significant digits.
    torch.testing.assert_close(y.float(), want, rtol=2e-2, atol=2e-2)
    y.float().sum().backward()
    assert xb.grad.dtype == torch.bfloat16 and ours.weight_hh_l1.grad.dtype == torch.bfloat16
    ref_x = xb.detach().float().requires_grad_()
    ref(ref_x)[0].sum().backward()
    torch.testing.assert_close(xb.grad.float(), ref_x.grad, rtol=5e-2, atol=5e-2)
    with torch.no_grad():
        torch.testing.assert_close(ours(xb)[0].float(), want, rtol=2e-2, atol=2e-2)


@pytest.mark.filterwarnings("error::rnnjit.torch.FallbackWarning")
@pytest.mark.parametrize("ours_cls,theirs_cls,kwargs", CELLS + [(rnnjit.torch.LSTM, torch.nn.LSTM, {"proj_size": 5})])
def test_cpu_autocast_returns_what_torch_nn_returns(ours_cls, theirs_cls, kwargs):
    torch.manual_seed(1)
    ours, theirs = pair(ours_cls, theirs_cls, 12, 24, **kwargs)
    x = torch.rand(4, 2, 12, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = ours(x)
        want = torch_nn_call(theirs, x)
    flat_got = [got[0], *(got[1] if isinstance(got[1], tuple) else (got[1],))]
    flat_want = [want[0], *(want[1] if isinstance(want[1], tuple) else (want[1],))]
    for g, w in zip(flat_got, flat_want):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g.float(), w.float(), rtol=3e-2, atol=3e-2)
    got[0].float().sum().backward()
    assert x.grad is not None and x.grad.dtype == torch.float32


def test_deepcopy_and_pickle_after_calls_of_every_kind():
    lstm = rnnjit.torch.LSTM(3, 4, num_layers=2, dropout=0.2)
    x = torch.rand(2, 2, 3)
    lstm(x)[0].sum().backward()
    lstm.eval()
    with torch.no_grad():
        want = lstm(x)[0]
    for copied in (copy.deepcopy(lstm), pickle.loads(pickle.dumps(lstm))):
        with torch.no_grad():
            torch.testing.assert_close(copied(x)[0], want, rtol=0, atol=0)
        with torch.no_grad():
            copied.weight_hh_l0.mul_(0)  # the copy's packs are its own
        with torch.no_grad():
            torch.testing.assert_close(lstm(x)[0], want, rtol=0, atol=0)


@pytest.mark.parametrize("ours_cls,theirs_cls,kwargs", CELLS)
def test_batch_of_zero_returns_empty_outputs_as_torch_nn(ours_cls, theirs_cls, kwargs):
    ours, theirs = pair(ours_cls, theirs_cls, 4, 5, num_layers=2, **kwargs)
    for x in (torch.rand(3, 0, 4), torch.rand(3, 0, 4, requires_grad=True)):
        got, want = ours(x), theirs(x)
        assert got[0].shape == want[0].shape
        hy, ry = (got[1][0], want[1][0]) if isinstance(got[1], tuple) else (got[1], want[1])
        assert hy.shape == ry.shape


def test_repeated_calls_see_every_change_too():
    """The fast path of a repeated call (the same shapes, as a stream of T=1 steps) checks what
    the general path does: gradients, parameters, train/eval, states."""
    ours, theirs = pair(rnnjit.torch.LSTM, torch.nn.LSTM, 4, 6, num_layers=2, dropout=0.3)
    ours.eval()
    theirs.eval()
    x = torch.rand(1, 1, 4)
    state = (torch.rand(2, 1, 6), torch.rand(2, 1, 6))
    for _ in range(3):
        with torch.no_grad():
            got, want = ours(x, state), theirs(x, state)
        torch.testing.assert_close(got[1][0], want[1][0], rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        ours.weight_hh_l0.add_(0.25)
    check_fresh(ours, theirs, x, "repeat after an in-place edit")
    y = ours(x)[0]  # grad mode, parameters that require grad: the training plan
    assert y.requires_grad
    ours.train()
    torch.manual_seed(3)
    a = ours(x)[0]
    torch.manual_seed(4)
    assert not torch.equal(a, ours(x)[0]), "train(): dropout again"


def test_two_shapes_in_turn_borrow_their_executions():
    lstm = rnnjit.torch.LSTM(4, 6).eval()
    chunk, step = torch.rand(5, 1, 4), torch.rand(1, 1, 4)
    with torch.no_grad():
        for _ in range(2):
            lstm(chunk)
            lstm(step)
        before = rnnjit.cache_stats()
        for _ in range(3):
            lstm(chunk)
            lstm(step)
        after = rnnjit.cache_stats()
    assert after.plan_hits == before.plan_hits, "no Execution prepared again: each shape's is borrowed"


@pytest.mark.parametrize("ours_cls,theirs_cls,kwargs", CELLS + [(rnnjit.torch.LSTM, torch.nn.LSTM, {"proj_size": 3})])
def test_repeated_calls_with_states_match_torch_nn(ours_cls, theirs_cls, kwargs):
    ours, theirs = pair(ours_cls, theirs_cls, 4, 5, num_layers=2, bidirectional=True, batch_first=True, **kwargs)
    x = torch.rand(3, 2, 4)  # [N, T, I]
    h = torch.rand(4, 3, kwargs.get("proj_size", 5))
    state = (h, torch.rand(4, 3, 5)) if ours_cls is rnnjit.torch.LSTM else h
    with torch.no_grad():
        for _ in range(3):  # the first call, then repeats
            got, want = ours(x, state), theirs(x, state)
            torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-5)
            for g, w in zip(got[1] if isinstance(got[1], tuple) else (got[1],),
                            want[1] if isinstance(want[1], tuple) else (want[1],)):
                torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("batch_first", [False, True])
def test_repeated_unbatched_calls_match_torch_nn(batch_first):
    ours, theirs = pair(rnnjit.torch.LSTM, torch.nn.LSTM, 4, 5, num_layers=2, batch_first=batch_first)
    x = torch.rand(1, 4)  # one step of one sequence, no batch dimension
    state = (torch.rand(2, 5), torch.rand(2, 5))
    with torch.no_grad():
        for _ in range(3):
            got, want = ours(x, state), theirs(x, state)
            assert got[0].shape == want[0].shape and got[1][0].shape == want[1][0].shape
            torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(got[1][1], want[1][1], rtol=1e-5, atol=1e-5)
            state = got[1]
        assert ours.__dict__["_rnnjit_repeat"].x_shape == x.shape, "the stream of steps repeats"
