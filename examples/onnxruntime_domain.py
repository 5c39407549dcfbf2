# The stable route: the model's LSTM/GRU/RNN nodes moved into com.rnnjit: python examples/onnxruntime_domain.py MODEL.onnx
import sys, numpy as np, onnx, onnxruntime as ort, rnnjit.onnx, rnnjit.onnxruntime
model = rnnjit.onnx.to_rnnjit_domain(onnx.load(sys.argv[1]))
session = ort.InferenceSession(model.SerializeToString(), rnnjit.onnxruntime.session_options())
feeds = {i.name: np.random.rand(*[d if isinstance(d, int) else 4 for d in i.shape]).astype(np.float32) for i in session.get_inputs()}
print([o.shape for o in session.run(None, feeds)], rnnjit.onnxruntime.stats())
