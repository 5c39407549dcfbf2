// rnnjit's ONNX Runtime library: com.microsoft:DynamicQuantizeLSTM's weights (kernel.hpp). W and R
// come as int8 or uint8 [D, K, 4H] (K = I for W, H for R) with a scale and a zero point per
// direction ([D]) or per gate row ([D, 4H]); rnnjit's int8 plan takes FP32 weights in ONNX LSTM's
// layout [D, 4H, K] (the same gate order i, o, f, c) and quantizes them again as it packs them,
// symmetric per gate row. The round trip is exact where ONNX Runtime's quantization was symmetric
// per row already (quantize_dynamic with per_channel=True); a scale per direction becomes one per
// row, a finer grid (docs/quantization.md).
#include <array>
#include <cmath>
#include <cstdint>
#include <string>

#include "onnxruntime/kernel.hpp"

namespace rnnjit::ort {
namespace {

bool is_8bit(ONNXTensorElementDataType t) {
  return t == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8 || t == ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8;
}

std::string type_name(ONNXTensorElementDataType t) {
  switch (t) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return "float";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8: return "uint8";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: return "int8";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: return "int32";
    default: return "element type " + std::to_string(static_cast<int>(t));
  }
}

std::string dims_text(const std::vector<std::int64_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

template <typename Q>
float element(const void* data, std::int64_t i) {
  return static_cast<float>(static_cast<const Q*>(data)[i]);
}

// One of W and R: checked, then (q - zero_point) * scale, transposed to [D, 4H, K].
void dequantize_one(const RnnNode& node, const char* name, const TensorView& q, const TensorView& scale,
                    const TensorView& zero_point, std::int64_t K, Dequantized::Weight& out) {
  const std::int64_t D = node.attrs.directions(), H = node.attrs.hidden_size.value_or(0), G4 = 4 * H;
  const std::string n = name;
  if (!q) node.fail_here(n + " is a required input");
  if (!is_8bit(q.type)) node.fail_here(n + " must be an int8 or uint8 tensor, not " + type_name(q.type));
  if (q.dims.size() != 3 || q.dims[0] != D || q.dims[1] != K || q.dims[2] != G4)
    node.fail_here(n + " has shape " + dims_text(q.dims) + ", expected [D, " + (n == "W" ? "I" : "H") +
                   ", 4H] = " + dims_text({D, K, G4}));
  if (!scale) node.fail_here(n + "_scale is a required input");
  if (!zero_point) node.fail_here(n + "_zero_point is a required input");
  if (scale.type != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
    node.fail_here(n + "_scale must be a float tensor, not " + type_name(scale.type));
  const bool per_row = scale.dims == std::vector<std::int64_t>{D, G4};
  if (!per_row && scale.dims != std::vector<std::int64_t>{D})
    node.fail_here(n + "_scale has shape " + dims_text(scale.dims) + ", expected " + dims_text({D}) +
                   " (per direction) or " + dims_text({D, G4}) + " (per gate row)");
  if (zero_point.type != q.type)
    node.fail_here(n + "_zero_point is " + type_name(zero_point.type) + ", " + n + " " + type_name(q.type) +
                   ": they must be of one type");
  if (zero_point.dims != scale.dims)
    node.fail_here(n + "_zero_point has shape " + dims_text(zero_point.dims) + ", expected " + n + "_scale's " +
                   dims_text(scale.dims));
  const bool is_signed = q.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8;
  auto at = [&](const TensorView& t, std::int64_t i) {
    return is_signed ? element<std::int8_t>(t.data, i) : element<std::uint8_t>(t.data, i);
  };
  const float* scales = scale.floats();
  for (std::int64_t i = 0; i < scale.elements; ++i)
    if (!(scales[i] > 0.0f) || scales[i] == INFINITY)  // NaN, zero, negative and infinite scales
      node.fail_here(n + "_scale[" + std::to_string(i) + "] is " + std::to_string(scales[i]) +
                     ": scales must be positive and finite");
  out.values.resize(static_cast<std::size_t>(D * G4 * K));
  for (std::int64_t d = 0; d < D; ++d)
    for (std::int64_t r = 0; r < G4; ++r) {
      const std::int64_t s = per_row ? d * G4 + r : d;
      const float step = scales[s], zero = at(zero_point, s);
      float* row = out.values.data() + (d * G4 + r) * K;
      for (std::int64_t k = 0; k < K; ++k) row[k] = (at(q, (d * K + k) * G4 + r) - zero) * step;
    }
  out.view = TensorView{q.value, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, {D, G4, K}, D * G4 * K, out.values.data()};
}

}  // namespace

void dequantize_weights(const RnnNode& node, const TensorView& W, const TensorView& R,
                        const std::array<TensorView, 4>& scales_and_zero_points, Dequantized& out) {
  if (W && W.dims.size() != 3) node.fail_here("W has shape " + dims_text(W.dims) + ": rank 3 expected");
  const std::int64_t I = W ? W.dims[1] : 0, H = node.attrs.hidden_size.value_or(0);
  if (W && I <= 0) node.fail_here("W has shape " + dims_text(W.dims) + ": its input size must be positive");
  dequantize_one(node, "W", W, scales_and_zero_points[0], scales_and_zero_points[1], I, out.W);
  dequantize_one(node, "R", R, scales_and_zero_points[2], scales_and_zero_points[3], H, out.R);
}

}  // namespace rnnjit::ort
