"""Bad input from Python: each raises an exception that names the problem; none crashes or
reads out of bounds (tools/test.sh --sanitize runs the numpy part of this file under ASan)."""

import numpy as np
import pytest

import rnnjit


@pytest.fixture()
def lstm():
    config = rnnjit.RnnConfig(cell="lstm", input_size=4, hidden_size=5, num_layers=2)
    rnn = rnnjit.Rnn(config)
    ex = rnn.prepare((3, 2), "training")
    w = np.zeros(rnn.weights_size(), np.float32)
    x = np.zeros((3, 2, 4), np.float32)
    y = np.zeros((3, 2, 5), np.float32)
    return rnn, ex, w, x, y


def test_bad_configs_name_their_field():
    with pytest.raises(rnnjit.Error, match="hidden_size"):
        rnnjit.Rnn(rnnjit.RnnConfig(cell="lstm", input_size=4, hidden_size=0))
    with pytest.raises(rnnjit.Error, match="unknown cell 'lstn'"):
        rnnjit.RnnConfig(cell="lstn", input_size=4, hidden_size=5)
    with pytest.raises(rnnjit.Error, match="proj_size"):
        rnnjit.Rnn(rnnjit.RnnConfig(cell="gru", input_size=4, hidden_size=5, proj_size=2))
    with pytest.raises(rnnjit.Error, match="threads"):
        rnnjit.Rnn(rnnjit.RnnConfig(input_size=4, hidden_size=5), rnnjit.Options(threads=100000))
    with pytest.raises(TypeError):
        rnnjit.RnnConfig(cell="lstm", input_size="four", hidden_size=5)
    assert isinstance(rnnjit.Error("x"), ValueError)


def test_an_isa_this_cpu_lacks_is_refused():
    if rnnjit.cpu_isa() == rnnjit.Isa.avx512:
        pytest.skip("this CPU runs AVX-512: there is no ISA above it to refuse")
    with pytest.raises(rnnjit.Error, match="isa avx512 but this CPU only runs"):
        rnnjit.Rnn(rnnjit.RnnConfig(input_size=4, hidden_size=5), rnnjit.Options(isa="avx512"))


def test_bad_shapes_and_modes(lstm):
    rnn, ex, w, x, y = lstm
    with pytest.raises(rnnjit.Error, match="seq_len"):
        rnn.prepare((0, 2), "inference")
    with pytest.raises(rnnjit.Error, match="unknown mode"):
        rnn.prepare((3, 2), "train!")
    with pytest.raises(TypeError):
        rnn.prepare("3x2", "inference")


def test_wrong_sizes_dtypes_and_strides(lstm):
    _, ex, w, x, y = lstm
    with pytest.raises(rnnjit.Error, match="weights has"):
        ex.forward(w[:-1], x, y)
    with pytest.raises(rnnjit.Error, match="^x has"):
        ex.forward(w, x[:2], y)
    with pytest.raises(rnnjit.Error, match="^y has"):
        ex.forward(w, x, np.zeros((3, 2, 6), np.float32))
    with pytest.raises(rnnjit.Error, match="^hx has"):
        ex.forward(w, x, y, hx=np.zeros((2, 2, 4), np.float32))
    with pytest.raises(TypeError, match="x: expected a float32 array, got float64"):
        ex.forward(w, x.astype(np.float64), y)
    with pytest.raises(TypeError, match="weights: expected a float32 array, got int32"):
        ex.forward(w.astype(np.int32), x, y)
    with pytest.raises(ValueError, match="y: the array is not C-contiguous"):
        ex.forward(w, x, np.zeros((3, 2, 10), np.float32)[:, :, ::2])
    with pytest.raises(ValueError, match="x: the array is not C-contiguous"):
        ex.forward(w, np.zeros((2, 3, 4), np.float32).transpose(1, 0, 2), y)
    with pytest.raises(TypeError, match="seq_lengths: expected a int32 array, got int64"):
        ex.forward(w, x, y, seq_lengths=np.array([3, 2]))
    with pytest.raises(rnnjit.Error, match="seq_lengths"):
        ex.forward(w, x, y, seq_lengths=np.array([3, 4], np.int32))
    with pytest.raises(TypeError, match="reserve: expected a uint8 array"):
        ex.forward(w, x, y, reserve=np.zeros(ex.reserve_size(), np.float32))
    with pytest.raises(rnnjit.Error, match="reserve"):
        ex.forward(w, x, y, reserve=np.zeros(16, np.uint8))
    with pytest.raises(TypeError):
        ex.forward(w, x, "y")
    read_only = np.zeros_like(y)
    read_only.setflags(write=False)
    with pytest.raises(TypeError):
        ex.forward(w, x, read_only)


def test_calls_out_of_order_and_on_a_closed_execution(lstm):
    rnn, ex, w, x, y = lstm
    dx = np.zeros_like(x)
    with pytest.raises(rnnjit.Error, match="forward"):
        ex.backward_data(w, y, dx)
    infer = rnn.prepare((3, 2), "inference")
    with pytest.raises(rnnjit.Error, match="training"):
        infer.backward_data(w, y, dx)
    ex.forward(w, x, y)
    with pytest.raises(rnnjit.Error, match="backward_data"):
        ex.backward_weights(x, np.zeros_like(w))
    with ex:
        pass
    assert ex.closed
    for call in (lambda: ex.forward(w, x, y), lambda: ex.reserve_size(), lambda: ex.plan_text()):
        with pytest.raises(RuntimeError, match="closed"):
            call()
    ex.close()  # twice is fine


def test_torch_tensors_cross_without_copies_and_are_checked():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed here")
    config = rnnjit.RnnConfig(cell="gru", input_size=4, hidden_size=5)
    rnn = rnnjit.Rnn(config)
    ex = rnn.prepare((3, 2), "inference")
    w, x, y = torch.rand(rnn.weights_size()), torch.rand(3, 2, 4), torch.zeros(3, 2, 5)
    ex.forward(w, x, y)
    assert y.abs().sum() > 0, "y is written in place"
    with pytest.raises(TypeError, match="x: expected a float32 array, got float64"):
        ex.forward(w, x.double(), y)
    with pytest.raises(ValueError, match="not C-contiguous"):
        ex.forward(w, torch.rand(2, 3, 4).transpose(0, 1), y)
