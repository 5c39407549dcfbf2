// rnnjit's ONNX Runtime library (librnnjit_onnxruntime.so): RegisterCustomOps, which ONNX Runtime
// calls when a session's options load the library (SessionOptions.register_custom_ops_library),
// registers the op table below in two domains:
//   ""           ONNX's own: the library's kernels replace ONNX Runtime's CPU kernels for these
//                ops (ONNX Runtime's maintainers call overriding a standard op unofficial); a node
//                rnnjit cannot run goes to ONNX Runtime's kernel (builtin_kernel.cpp).
//   com.rnnjit   the stable route (rnnjit.onnx rewrites a model's nodes into it); a node rnnjit
//                cannot run is an error at session creation.
//   com.microsoft  ONNX Runtime's contrib ops: DynamicQuantizeLSTM (the int8 LSTM of models that
//                onnxruntime.quantization.quantize_dynamic made) runs on rnnjit's int8 plan; a
//                valid node rnnjit cannot run goes to ONNX Runtime's own contrib kernel (as the
//                default domain's do), a malformed one is an error at session creation.
#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "onnxruntime/kernel.hpp"

namespace rnnjit::ort {
namespace {

struct Domain {
  const char* name;
  bool builtin_fallback;  // hand what rnnjit does not run to ONNX Runtime's kernel
};
// LSTM, GRU and RNN: ONNX's own domain (the override) and com.rnnjit (the stable route).
constexpr Domain kRnnDomains[] = {{"", true}, {"com.rnnjit", false}};
// DynamicQuantizeLSTM: com.microsoft is ONNX Runtime's own domain (these registrations override
// its contrib kernel, which still runs what rnnjit does not).
constexpr Domain kMicrosoftDomain[] = {{"com.microsoft", true}};

struct OpSpec;
using KernelMaker = std::unique_ptr<Kernel> (*)(const OrtKernelInfo* info, const OpSpec& spec, const Domain& domain);

// The op table: one row per ONNX operator: its name, the domains it is registered in, its inputs
// (the first `required` of them required, the rest optional) and outputs (all optional) with
// their element types, and what makes the kernel of a node. A quantized operator
// (com.microsoft:DynamicQuantizeLSTM) joins as a row with its own domain, types and maker.
struct OpSpec {
  const char* name;
  rnnjit_onnx_op_t op;  // the C API's operator, for the RNN ops
  std::span<const Domain> domains;
  std::size_t inputs, required, outputs;
  ONNXTensorElementDataType (*input_type)(std::size_t index);
  KernelMaker make;
};

ONNXTensorElementDataType rnn_input_type(std::size_t index) {
  return index == kSequenceLens ? ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 : ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
}

// DynamicQuantizeLSTM: W, R and their zero points are int8 or uint8 (any type here: the kernel
// checks them and says which it wants), sequence_lens int32, the rest float.
ONNXTensorElementDataType quantized_lstm_input_type(std::size_t index) {
  if (index == kW || index == kR || index == kWZeroPoint || index == kRZeroPoint)
    return ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  return rnn_input_type(index);
}

std::string node_name(const OrtKernelInfo* info) {
  std::size_t size = 0;
  if (OrtStatus* s = api().api->KernelInfo_GetNodeName(info, nullptr, &size)) {
    api().api->ReleaseStatus(s);
    return "";
  }
  std::string name(size, '\0');
  check(api().api->KernelInfo_GetNodeName(info, name.data(), &size));
  name.resize(size > 0 ? size - 1 : 0);
  return name;
}

// LSTM, GRU, RNN: on rnnjit, else (a node rnnjit does not run) on ONNX Runtime's kernel where the
// domain hands such nodes back, else an error naming the node and why.
std::unique_ptr<Kernel> make_rnn_kernel(const OrtKernelInfo* info, const OpSpec& spec, const Domain& domain) {
  RnnNode node{read_attributes(info, spec.op), ""};
  node.what = std::string(spec.name) + " node '" + node_name(info) + "' (domain '" + domain.name + "')";
  try {
    return make_rnnjit_kernel(info, node);
  } catch (const Unsupported& e) {
    if (!domain.builtin_fallback)
      node.fail_here(std::string(e.what()) + " (in domain com.rnnjit a node runs on rnnjit or not at all; in ONNX's "
                                             "default domain it would run on ONNX Runtime's own kernel)",
                     ORT_NOT_IMPLEMENTED);
    if (verbose()) std::fprintf(stderr, "rnnjit: %s runs on ONNX Runtime's own kernel: %s\n", node.what.c_str(), e.what());
    return make_builtin_kernel(info, node);
  }
}

// DynamicQuantizeLSTM: on rnnjit's int8 plan, else (a valid node rnnjit does not run, e.g.
// activation_alpha entries that no activation reads) on ONNX Runtime's contrib kernel; a
// malformed node is an error naming it and why.
std::unique_ptr<Kernel> make_quantized_lstm_kernel(const OrtKernelInfo* info, const OpSpec& spec,
                                                   const Domain& domain) {
  RnnNode node{read_attributes(info, RNNJIT_ONNX_LSTM), ""};
  node.what = std::string(spec.name) + " node '" + node_name(info) + "' (domain '" + domain.name + "')";
  try {
    return make_rnnjit_kernel(info, node, /*quantized=*/true);
  } catch (const Unsupported& e) {
    if (!domain.builtin_fallback) node.fail_here(e.what(), ORT_NOT_IMPLEMENTED);
    if (verbose()) std::fprintf(stderr, "rnnjit: %s runs on ONNX Runtime's own kernel: %s\n", node.what.c_str(), e.what());
    return make_builtin_kernel(info, node, /*quantized=*/true);
  }
}

const OpSpec kOps[] = {
    {"LSTM", RNNJIT_ONNX_LSTM, kRnnDomains, 8, 3, 3, rnn_input_type, make_rnn_kernel},
    {"GRU", RNNJIT_ONNX_GRU, kRnnDomains, 6, 3, 2, rnn_input_type, make_rnn_kernel},
    {"RNN", RNNJIT_ONNX_RNN, kRnnDomains, 6, 3, 2, rnn_input_type, make_rnn_kernel},
    // Inputs beyond R optional here: the kernel reports a missing scale or zero point by name.
    {"DynamicQuantizeLSTM", RNNJIT_ONNX_LSTM, kMicrosoftDomain, kQuantizedInputs, 3, 3, quantized_lstm_input_type,
     make_quantized_lstm_kernel},
};

// One op of one domain: ONNX Runtime's OrtCustomOp (its callbacks receive it) and what it is.
struct RegisteredOp : OrtCustomOp {
  const OpSpec* spec = nullptr;
  const Domain* domain = nullptr;
};

const RegisteredOp& self(const OrtCustomOp* op) { return *static_cast<const RegisteredOp*>(op); }

OrtStatus* ORT_API_CALL create_kernel(const OrtCustomOp* op, const OrtApi*, const OrtKernelInfo* info,
                                      void** kernel) {
  return guarded([&] {
    const RegisteredOp& r = self(op);
    *kernel = r.spec->make(info, *r.spec, *r.domain).release();
  });
}

OrtStatus* ORT_API_CALL compute(void* kernel, OrtKernelContext* ctx) {
  return guarded([&] { static_cast<Kernel*>(kernel)->compute(ctx); });
}

void ORT_API_CALL destroy(void* kernel) { delete static_cast<Kernel*>(kernel); }

const char* ORT_API_CALL get_name(const OrtCustomOp* op) { return self(op).spec->name; }
const char* ORT_API_CALL provider(const OrtCustomOp*) { return nullptr; }  // the CPU execution provider

ONNXTensorElementDataType ORT_API_CALL input_type(const OrtCustomOp* op, size_t index) {
  return self(op).spec->input_type(index);
}
size_t ORT_API_CALL input_count_of(const OrtCustomOp* op) { return self(op).spec->inputs; }
ONNXTensorElementDataType ORT_API_CALL output_type(const OrtCustomOp*, size_t) {
  return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
}
size_t ORT_API_CALL output_count_of(const OrtCustomOp* op) { return self(op).spec->outputs; }

OrtCustomOpInputOutputCharacteristic ORT_API_CALL input_characteristic(const OrtCustomOp* op, size_t index) {
  return index < self(op).spec->required ? INPUT_OUTPUT_REQUIRED : INPUT_OUTPUT_OPTIONAL;
}
OrtCustomOpInputOutputCharacteristic ORT_API_CALL output_characteristic(const OrtCustomOp*, size_t) {
  return INPUT_OUTPUT_OPTIONAL;
}
OrtMemType ORT_API_CALL input_memory_type(const OrtCustomOp*, size_t) { return OrtMemTypeDefault; }
int ORT_API_CALL one(const OrtCustomOp*) { return 1; }
int ORT_API_CALL start_version(const OrtCustomOp*) { return 1; }
int ORT_API_CALL end_version(const OrtCustomOp*) { return INT_MAX; }

std::unique_ptr<RegisteredOp> make_op(const OpSpec& spec, const Domain& domain) {
  auto r = std::make_unique<RegisteredOp>();
  OrtCustomOp& op = *r;
  std::memset(&op, 0, sizeof(OrtCustomOp));
  // The fields ONNX Runtime reads: those of the older of its API and this header's.
  op.version = static_cast<std::uint32_t>(api().version < ORT_API_VERSION ? api().version : ORT_API_VERSION);
  op.GetName = get_name;
  op.GetExecutionProviderType = provider;
  op.GetInputType = input_type;
  op.GetInputTypeCount = input_count_of;
  op.GetOutputType = output_type;
  op.GetOutputTypeCount = output_count_of;
  op.KernelDestroy = destroy;
  op.GetInputCharacteristic = input_characteristic;
  op.GetOutputCharacteristic = output_characteristic;
  op.GetInputMemoryType = input_memory_type;
  op.GetVariadicInputMinArity = one;
  op.GetVariadicInputHomogeneity = one;
  op.GetVariadicOutputMinArity = one;
  op.GetVariadicOutputHomogeneity = one;
  op.CreateKernelV2 = create_kernel;
  op.KernelComputeV2 = compute;
  op.GetStartVersion = start_version;
  op.GetEndVersion = end_version;
  r->spec = &spec;
  r->domain = &domain;
  return r;
}

// The domains and their ops, made once and shared by every session's options that load the
// library (the library is never unloaded: -z nodelete, so they outlive every session).
std::vector<OrtCustomOpDomain*>& domains() {
  static std::vector<OrtCustomOpDomain*> made;
  static std::vector<std::unique_ptr<RegisteredOp>> ops;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::pair<std::string, OrtCustomOpDomain*>> by_name;
    for (const OpSpec& spec : kOps)
      for (const Domain& d : spec.domains) {
        auto it = std::find_if(by_name.begin(), by_name.end(), [&](const auto& p) { return p.first == d.name; });
        if (it == by_name.end()) {
          OrtCustomOpDomain* domain = nullptr;
          check(api().api->CreateCustomOpDomain(d.name, &domain));
          by_name.emplace_back(d.name, domain);
          made.push_back(domain);
          it = by_name.end() - 1;
        }
        ops.push_back(make_op(spec, d));
        check(api().api->CustomOpDomain_Add(it->second, ops.back().get()));
      }
  });
  return made;
}

// ONNX Runtime's intra-op threads spin for a while after each parallel section (by default), on
// the cores that rnnjit's workers then need: measured on 2 vCPUs, a 2-layer LSTM 640 at T=1 N=1
// ran at 0.5x ONNX Runtime's own speed (median) with its threads spinning, 3.3x with them
// blocking. So a session that loads the library blocks them, unless its options already say
// otherwise (session.intra_op.allow_spinning set to "1" keeps them spinning).
void quiet_intra_op_threads(OrtSessionOptions* options) {
  constexpr const char* kKey = "session.intra_op.allow_spinning";
  int has = 0;
  check(api().api->HasSessionConfigEntry(options, kKey, &has));
  if (!has) check(api().api->AddSessionConfigEntry(options, kKey, "0"));
}

}  // namespace
}  // namespace rnnjit::ort

extern "C" {

// ONNX Runtime's entry point for a custom-op library.
__attribute__((visibility("default"))) OrtStatus* ORT_API_CALL RegisterCustomOps(OrtSessionOptions* options,
                                                                                   const OrtApiBase* api_base) {
  using namespace rnnjit::ort;
  try {
    static std::once_flag once;
    std::call_once(once, [api_base] { set_api(api_base); });
  } catch (const std::exception& e) {
    // No API to make a status with: the newest one the runtime has at all.
    const OrtApi* a = api_base ? api_base->GetApi(1) : nullptr;
    return a ? a->CreateStatus(ORT_FAIL, e.what()) : nullptr;
  }
  return guarded([&] {
    for (OrtCustomOpDomain* d : domains()) check(api().api->AddCustomOpDomain(options, d));
    quiet_intra_op_threads(options);
  });
}

// What the library did in this process: kernels made on rnnjit and on ONNX Runtime's own kernel,
// runs of each, and weight packings (a constant initializer's, once per shape). For tests and for
// users who want to know that rnnjit ran.
__attribute__((visibility("default"))) void rnnjit_onnxruntime_stats(uint64_t* rnnjit_kernels,
                                                                     uint64_t* builtin_kernels, uint64_t* rnnjit_runs,
                                                                     uint64_t* builtin_runs, uint64_t* weight_packs) {
  const rnnjit::ort::Counters& c = rnnjit::ort::counters();
  if (rnnjit_kernels) *rnnjit_kernels = c.rnnjit_kernels.load();
  if (builtin_kernels) *builtin_kernels = c.builtin_kernels.load();
  if (rnnjit_runs) *rnnjit_runs = c.rnnjit_runs.load();
  if (builtin_runs) *builtin_runs = c.builtin_runs.load();
  if (weight_packs) *weight_packs = c.weight_packs.load();
}

}  // extern "C"
