"""rnnjit inside ONNX Runtime: the custom-op library ``librnnjit_onnxruntime.so`` (docs/onnxruntime.md).

Loaded into a session's options, it runs the session's LSTM, GRU and RNN nodes on rnnjit: those of
ONNX's own domain (replacing ONNX Runtime's CPU kernels; a node rnnjit cannot run stays on ONNX
Runtime's kernel) and those of the domain ``com.rnnjit`` (``rnnjit.onnx.to_rnnjit_domain``)::

    import onnxruntime as ort, rnnjit.onnxruntime
    options = ort.SessionOptions()
    options.register_custom_ops_library(rnnjit.onnxruntime.library_path())
    session = ort.InferenceSession("model.onnx", options)   # LSTM/GRU/RNN nodes run on rnnjit
"""

import ctypes
import os

LIBRARY_NAME = "librnnjit_onnxruntime.so"
_HERE = os.path.dirname(os.path.abspath(__file__))


def library_path():
    """The path of librnnjit_onnxruntime.so: $RNNJIT_ONNXRUNTIME_LIBRARY where set, else the one
    shipped in this package."""
    path = os.environ.get("RNNJIT_ONNXRUNTIME_LIBRARY") or os.path.join(_HERE, LIBRARY_NAME)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"rnnjit: {path} does not exist: this rnnjit was built without ONNX Runtime's C headers "
            "(tools/setup.sh fetches them; see docs/onnxruntime.md), or set RNNJIT_ONNXRUNTIME_LIBRARY")
    return path


def session_options(options=None):
    """``options`` (a new ``onnxruntime.SessionOptions`` if None) with the library registered."""
    if options is None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
    options.register_custom_ops_library(library_path())
    return options


_STAT_NAMES = ("rnnjit_kernels", "builtin_kernels", "rnnjit_runs", "builtin_runs", "weight_packs")


def stats():
    """What the library did in this process, as a dict: kernels made on rnnjit (``rnnjit_kernels``)
    and on ONNX Runtime's own kernel (``builtin_kernels``), the runs of each (``rnnjit_runs``,
    ``builtin_runs``) and the packings of constant weights (``weight_packs``, once per shape)."""
    lib = ctypes.CDLL(library_path())  # the copy ONNX Runtime loaded: the same file, one handle
    values = [ctypes.c_uint64() for _ in _STAT_NAMES]
    lib.rnnjit_onnxruntime_stats(*[ctypes.byref(v) for v in values])
    return {name: v.value for name, v in zip(_STAT_NAMES, values)}
