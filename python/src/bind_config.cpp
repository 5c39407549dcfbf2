// rnnjit.RnnConfig, Shape, Options, the enums and the weight layout: the network's description.
#include <nanobind/nanobind.h>
#include <nanobind/operators.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "codegen/int8_unit.hpp"
#include "python/src/bindings.hpp"
#include "python/src/enums.hpp"
#include "rnnjit/config.hpp"
#include "rnnjit/rnn.hpp"
#include "rnnjit/weights.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace rnnjit::python {
namespace {

void bind_enums(nb::module_& m) {
  nb::enum_<CellKind>(m, "CellKind")
      .value("rnn_relu", CellKind::rnn_relu)
      .value("rnn_tanh", CellKind::rnn_tanh)
      .value("lstm", CellKind::lstm)
      .value("gru", CellKind::gru)
      .value("gru_reset_before", CellKind::gru_reset_before)
      .value("rnn_sigmoid", CellKind::rnn_sigmoid);
  nb::enum_<Mode>(m, "Mode").value("inference", Mode::inference).value("training", Mode::training);
  nb::enum_<Backend>(m, "Backend")
      .value("automatic", Backend::automatic)
      .value("reference", Backend::reference)
      .value("jit", Backend::jit);
  nb::enum_<Isa>(m, "Isa")
      .value("reference", Isa::reference)
      .value("avx2", Isa::avx2)
      .value("avx512", Isa::avx512)
      .value("cuda", Isa::cuda)
      .value("detect", Isa::detect);
  nb::enum_<Device>(m, "Device").value("cpu", Device::cpu).value("cuda", Device::cuda);
  nb::enum_<ProjectionGemm>(m, "ProjectionGemm")
      .value("generated", ProjectionGemm::generated)
      .value("openblas", ProjectionGemm::openblas)
      .value("measured", ProjectionGemm::measured);
  nb::enum_<FpMath>(m, "FpMath").value("strict", FpMath::strict).value("bf16", FpMath::bf16);
  nb::enum_<Quantize>(m, "Quantize").value("none", Quantize::none).value("int8_dynamic", Quantize::int8_dynamic);
  nb::enum_<ParamKind>(m, "ParamKind")
      .value("weight_ih", ParamKind::weight_ih)
      .value("weight_hh", ParamKind::weight_hh)
      .value("bias_ih", ParamKind::bias_ih)
      .value("bias_hh", ParamKind::bias_hh)
      .value("weight_hr", ParamKind::weight_hr)
      .value("weight_peephole", ParamKind::weight_peephole);
}

// RnnConfig's fields, one keyword argument each; defaults are a default RnnConfig's.
void bind_rnn_config(nb::module_& m) {
  const RnnConfig d;
  nb::class_<RnnConfig>(m, "RnnConfig", "The network: cell, sizes, layers, direction and features (rnnjit/config.hpp).")
      .def(
          "__init__",
          [](RnnConfig* self, nb::handle cell, std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers,
             bool bidirectional, bool reverse, std::int64_t proj_size, float clip, float dropout, bool batch_first,
             float gate_clip, bool peephole, bool input_forget, bool bias, bool sum_directions, bool independent_stacks,
             float relu_alpha) {
            new (self) RnnConfig{.cell = enum_arg(cell, parse_cell),
                                 .input_size = input_size,
                                 .hidden_size = hidden_size,
                                 .num_layers = num_layers,
                                 .bidirectional = bidirectional,
                                 .reverse = reverse,
                                 .proj_size = proj_size,
                                 .clip = clip,
                                 .dropout = dropout,
                                 .batch_first = batch_first,
                                 .gate_clip = gate_clip,
                                 .peephole = peephole,
                                 .input_forget = input_forget,
                                 .bias = bias,
                                 .sum_directions = sum_directions,
                                 .independent_stacks = independent_stacks,
                                 .relu_alpha = relu_alpha};
          },
          nb::kw_only(), "cell"_a = "lstm", "input_size"_a = d.input_size, "hidden_size"_a = d.hidden_size,
          "num_layers"_a = d.num_layers, "bidirectional"_a = d.bidirectional, "reverse"_a = d.reverse,
          "proj_size"_a = d.proj_size, "clip"_a = d.clip, "dropout"_a = d.dropout, "batch_first"_a = d.batch_first,
          "gate_clip"_a = d.gate_clip, "peephole"_a = d.peephole, "input_forget"_a = d.input_forget, "bias"_a = d.bias,
          "sum_directions"_a = d.sum_directions, "independent_stacks"_a = d.independent_stacks,
          "relu_alpha"_a = d.relu_alpha)
      .def_prop_rw(
          "cell", [](const RnnConfig& c) { return c.cell; },
          [](RnnConfig& c, nb::handle v) { c.cell = enum_arg(v, parse_cell); })
      .def_rw("input_size", &RnnConfig::input_size)
      .def_rw("hidden_size", &RnnConfig::hidden_size)
      .def_rw("num_layers", &RnnConfig::num_layers)
      .def_rw("bidirectional", &RnnConfig::bidirectional)
      .def_rw("reverse", &RnnConfig::reverse)
      .def_rw("proj_size", &RnnConfig::proj_size)
      .def_rw("clip", &RnnConfig::clip)
      .def_rw("dropout", &RnnConfig::dropout)
      .def_rw("batch_first", &RnnConfig::batch_first)
      .def_rw("gate_clip", &RnnConfig::gate_clip)
      .def_rw("peephole", &RnnConfig::peephole)
      .def_rw("input_forget", &RnnConfig::input_forget)
      .def_rw("bias", &RnnConfig::bias)
      .def_rw("sum_directions", &RnnConfig::sum_directions)
      .def_rw("independent_stacks", &RnnConfig::independent_stacks)
      .def_rw("relu_alpha", &RnnConfig::relu_alpha)
      .def("directions", &RnnConfig::directions)
      .def("gates", &RnnConfig::gates)
      .def("state_size", &RnnConfig::state_size)
      .def("output_size", &RnnConfig::output_size)
      .def("validate", [](const RnnConfig& c) { validate(c); })
      .def(nb::self == nb::self)
      .def("__repr__", [](const RnnConfig& c) { return "RnnConfig(" + describe(c) + ")"; });
}

void bind_shape_and_options(nb::module_& m) {
  nb::class_<Shape>(m, "Shape", "Sequence length T and batch N of one call.")
      .def(nb::init<>())
      .def("__init__", [](Shape* s, std::int64_t seq_len, std::int64_t batch) { new (s) Shape{seq_len, batch}; },
           "seq_len"_a, "batch"_a)
      .def_rw("seq_len", &Shape::seq_len)
      .def_rw("batch", &Shape::batch)
      .def(nb::self == nb::self)
      .def("__repr__", [](const Shape& s) { return "Shape(seq_len=" + std::to_string(s.seq_len) + ", batch=" +
                                                   std::to_string(s.batch) + ")"; });

  nb::class_<Options>(m, "Options", "How an Rnn plans and runs: backend, ISA, threads, device (rnnjit/rnn.hpp).")
      .def(
          "__init__",
          [](Options* o, nb::handle backend, nb::handle isa, int threads, nb::handle device, nb::handle projection_gemm,
             nb::handle fpmath, nb::handle quantize) {
            new (o) Options{.backend = enum_arg(backend, parse_backend),
                            .isa = nb::isinstance<nb::str>(isa) && nb::cast<std::string>(isa) == "detect"
                                       ? Isa::detect
                                       : enum_arg(isa, parse_isa),
                            .threads = threads,
                            .device = enum_arg(device, parse_device),
                            .projection_gemm = enum_arg(projection_gemm, parse_projection_gemm),
                            .fpmath = enum_arg(fpmath, parse_fpmath),
                            .quantize = enum_arg(quantize, parse_quantize)};
          },
          nb::kw_only(), "backend"_a = "auto", "isa"_a = "detect", "threads"_a = 0, "device"_a = "cpu",
          "projection_gemm"_a = "generated", "fpmath"_a = "strict", "quantize"_a = "none")
      .def_rw("backend", &Options::backend)
      .def_rw("isa", &Options::isa)
      .def_rw("threads", &Options::threads)
      .def_rw("device", &Options::device)
      .def_rw("projection_gemm", &Options::projection_gemm)
      .def_rw("fpmath", &Options::fpmath)
      .def_rw("quantize", &Options::quantize);
}

void bind_weight_layout(nb::module_& m) {
  nb::class_<ParamBlock>(m, "ParamBlock", "One parameter of the canonical weight buffer, named as in PyTorch.")
      .def_ro("name", &ParamBlock::name)
      .def_ro("kind", &ParamBlock::kind)
      .def_ro("layer", &ParamBlock::layer)
      .def_ro("direction", &ParamBlock::direction)
      .def_ro("shape", &ParamBlock::shape)
      .def_ro("offset", &ParamBlock::offset)
      .def_ro("size", &ParamBlock::size)
      .def("__repr__", [](const ParamBlock& b) {
        return "ParamBlock(" + b.name + ", offset=" + std::to_string(b.offset) + ", size=" + std::to_string(b.size) + ")";
      });
}

void bind_sizes(nb::module_& m) {
  m.def("x_elements", &x_elements, "config"_a, "shape"_a, "Elements of x: T*N*I.");
  m.def("y_elements", &y_elements, "config"_a, "shape"_a, "Elements of y: T*N*output_size.");
  m.def("state_elements", &state_elements, "config"_a, "shape"_a, "Elements of h0/hy: L*D*N*S.");
  m.def("cell_state_elements", &cell_state_elements, "config"_a, "shape"_a, "Elements of c0/cy: L*D*N*H.");
  m.def("detect_isa", &detect_isa, "The best instruction set this CPU runs (or RNNJIT_ISA).");
  m.def("cpu_isa", &cpu_isa, "The best instruction set this CPU runs (RNNJIT_ISA not read).");
  m.def("amx_bf16_usable", &amx_bf16_usable, "Whether this CPU and OS run AMX-BF16 tiles.");
  m.def(
      "bf16_unit",
      [] {
        const std::optional<Bf16Unit> unit = bf16_unit();
        return unit ? std::optional<std::string>(to_string(*unit)) : std::nullopt;
      },
      "What runs fpmath='bf16' GEMMs here: 'amx', 'avx512_bf16' or None (FP32); RNNJIT_BF16_UNIT forces one.");
  m.def(
      "int8_unit",
      [] {
        const std::optional<Int8Unit> unit = int8_unit(detect_isa());
        return unit ? std::optional<std::string>(to_string(*unit)) : std::nullopt;
      },
      "What runs quantize='int8_dynamic' GEMMs here: 'amx', 'avx512_vnni', 'avx_vnni', 'avx2' (activations of 7 "
      "bits) or None (bf16 or FP32 instead); RNNJIT_INT8_UNIT forces one.");
  m.def(
      "int8_activation_quantization",
      [](const std::string& unit) {
        const ActivationQuantization aq = activation_quantization(parse_int8_unit(unit));
        return std::pair<int, int>(aq.levels, aq.zero_point);
      },
      nb::arg("unit"),
      "(levels, zero_point) of the activations of an int8 unit: q = round(x * levels / max|row|) in "
      "[-levels, levels], stored as uint8 q + zero_point; (127, 128), or (63, 64) on 'avx2'.");
}

}  // namespace

void bind_config(nb::module_& m) {
  bind_enums(m);
  bind_rnn_config(m);
  bind_shape_and_options(m);
  bind_weight_layout(m);
  bind_sizes(m);
}

}  // namespace rnnjit::python
