# ONNX Runtime runs an ONNX model's LSTM/GRU/RNN nodes on rnnjit: python examples/onnxruntime_override.py MODEL.onnx
import sys, numpy as np, onnxruntime as ort, rnnjit.onnxruntime
session = ort.InferenceSession(sys.argv[1], rnnjit.onnxruntime.session_options())
feeds = {i.name: np.random.rand(*[d if isinstance(d, int) else 4 for d in i.shape]).astype(np.float32) for i in session.get_inputs()}
print([o.shape for o in session.run(None, feeds)], rnnjit.onnxruntime.stats())
