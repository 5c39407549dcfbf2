// rnnjit.Rnn and rnnjit.Execution: prepare a shape and mode, then forward, backward_data and
// backward_weights on caller-owned arrays, as the C++ API (rnnjit/rnn.hpp).
//
// Every call releases the GIL while it runs, so other Python threads (a DataLoader, another
// model) go on. One C++ Execution must not be used by two threads at once: each Python
// Execution holds a lock around its calls, so concurrent callers take turns instead.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "codegen/plan.hpp"
#include "python/src/arrays.hpp"
#include "python/src/bindings.hpp"
#include "python/src/enums.hpp"
#include "runtime/cache.hpp"
#include "runtime/kernel.hpp"
#include "runtime/packed_weights.hpp"
#include "runtime/thread_team.hpp"
#include "rnnjit/rnn.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace rnnjit::python {
namespace {

// The generated code of one kernel of a plan: name, bytes and Zydis disassembly.
struct KernelCode {
  std::string name;
  nb::bytes code;
  std::string disassembly;
};

class PyExecution {
 public:
  explicit PyExecution(Execution ex) : device_(Device::cpu), ex_(std::move(ex)) {}
  PyExecution(Execution ex, Device device) : device_(device), ex_(std::move(ex)) {}

  Device device() const { return device_; }

  // What _forward_bound reads besides its addresses (rnnjit.torch's repeated inference calls).
  struct Bound {
    std::span<const float> weights;
    std::span<const std::byte> packed;
  };
  Bound bound;

  // Runs `f(execution)` without the GIL, holding this Execution's lock.
  template <typename F>
  void run(F&& f) {
    nb::gil_scoped_release unlocked;
    std::lock_guard lock(mutex_);
    f(get());
  }
  // Queries: cheap, under the lock as well (a concurrent close() may free the Execution).
  template <typename F>
  auto query(F&& f) {
    std::lock_guard lock(mutex_);
    return f(get());
  }
  void close() {
    nb::gil_scoped_release unlocked;
    std::lock_guard lock(mutex_);
    ex_.reset();
  }
  bool closed() {
    std::lock_guard lock(mutex_);
    return !ex_.has_value();
  }

 private:
  Execution& get() {
    if (!ex_) throw std::runtime_error("this Execution is closed");
    return *ex_;
  }
  Device device_;
  std::mutex mutex_;
  std::optional<Execution> ex_;
};

Shape shape_arg(nb::handle shape) {
  if (nb::isinstance<Shape>(shape)) return nb::cast<Shape>(shape);
  std::pair<std::int64_t, std::int64_t> pair;
  if (!nb::try_cast(shape, pair))
    throw nb::type_error("shape: expected an rnnjit.Shape or a (seq_len, batch) pair of ints");
  return {pair.first, pair.second};
}

std::vector<KernelCode> kernels_of(const Plan& plan) {
  std::vector<KernelCode> out;
  for (const KernelDesc& d : plan.kernels) {
    const std::string name = kernel_name(d);
    if (std::any_of(out.begin(), out.end(), [&](const KernelCode& k) { return k.name == name; })) continue;
    const auto kernel = Cache::instance().kernel(d);
    const auto code = kernel->code();
    out.push_back({name, nb::bytes(code.data(), code.size()), kernel->disassembly()});
  }
  return out;
}

void bind_execution_calls(nb::class_<PyExecution>& c) {
  c.def(
       "forward",
       [](PyExecution& self, const InArray& weights, const InArray& x, const OutArray& y,
          const std::optional<InArray>& hx, const std::optional<InArray>& cx, const std::optional<OutArray>& hy,
          const std::optional<OutArray>& cy, const std::optional<InArray>& packed_weights,
          const std::optional<InArray>& seq_lengths, std::uint64_t dropout_seed, const std::optional<OutArray>& reserve,
          const std::optional<OutArray>& workspace) {
         const Device dev = self.device();
         const ForwardIo io{.x = floats_in(x, "x", dev),
                            .hx = floats_in(hx, "hx", dev),
                            .cx = floats_in(cx, "cx", dev),
                            .y = floats_out(y, "y", dev),
                            .hy = floats_out(hy, "hy", dev),
                            .cy = floats_out(cy, "cy", dev),
                            .packed_weights = bytes_in(packed_weights, "packed_weights", dev),
                            .seq_lengths = lengths_in(seq_lengths, "seq_lengths"),
                            .dropout_seed = dropout_seed};
         const auto w = floats_in(weights, "weights", dev);
         const auto r = bytes_out(reserve, "reserve", dev);
         const auto ws = bytes_out(workspace, "workspace", dev);
         self.run([&](Execution& ex) { ex.forward(w, io, r, ws); });
       },
       "weights"_a, "x"_a, "y"_a, nb::kw_only(), "hx"_a = nb::none(), "cx"_a = nb::none(), "hy"_a = nb::none(),
       "cy"_a = nb::none(), "packed_weights"_a = nb::none(), "seq_lengths"_a = nb::none(), "dropout_seed"_a = 0,
       "reserve"_a = nb::none(), "workspace"_a = nb::none(),
       "Runs the forward pass; in training mode keeps what backward needs in the reserve.")
      .def(
          "backward_data",
          [](PyExecution& self, const InArray& weights, const InArray& dy, const OutArray& dx,
             const std::optional<InArray>& dhy, const std::optional<InArray>& dcy, const std::optional<OutArray>& dhx,
             const std::optional<OutArray>& dcx, const std::optional<OutArray>& reserve,
             const std::optional<OutArray>& workspace) {
            const Device dev = self.device();
            const BackwardDataIo io{.dy = floats_in(dy, "dy", dev),
                                    .dhy = floats_in(dhy, "dhy", dev),
                                    .dcy = floats_in(dcy, "dcy", dev),
                                    .dx = floats_out(dx, "dx", dev),
                                    .dhx = floats_out(dhx, "dhx", dev),
                                    .dcx = floats_out(dcx, "dcx", dev)};
            const auto w = floats_in(weights, "weights", dev);
            const auto r = bytes_out(reserve, "reserve", dev);
            const auto ws = bytes_out(workspace, "workspace", dev);
            self.run([&](Execution& ex) { ex.backward_data(w, io, r, ws); });
          },
          "weights"_a, "dy"_a, "dx"_a, nb::kw_only(), "dhy"_a = nb::none(), "dcy"_a = nb::none(),
          "dhx"_a = nb::none(), "dcx"_a = nb::none(), "reserve"_a = nb::none(), "workspace"_a = nb::none(),
          "Gradients of the data (dx, dhx, dcx) from the reserve that forward training kept.")
      .def(
          "backward_weights",
          [](PyExecution& self, const InArray& x, const OutArray& dweights, bool accumulate,
             const std::optional<OutArray>& reserve, const std::optional<OutArray>& workspace) {
            const Device dev = self.device();
            const BackwardWeightsIo io{
                .x = floats_in(x, "x", dev), .dweights = floats_out(dweights, "dweights", dev), .accumulate = accumulate};
            const auto r = bytes_out(reserve, "reserve", dev);
            const auto ws = bytes_out(workspace, "workspace", dev);
            self.run([&](Execution& ex) { ex.backward_weights(io, r, ws); });
          },
          "x"_a, "dweights"_a, nb::kw_only(), "accumulate"_a = false, "reserve"_a = nb::none(),
          "workspace"_a = nb::none(), "Weight gradients, after backward_data; accumulate adds into dweights.")
      .def(
          "pack_weights",
          [](PyExecution& self, const InArray& weights, const OutArray& packed) {
            const Device dev = self.device();
            const auto w = floats_in(weights, "weights", dev);
            const auto p = bytes_out(std::optional<OutArray>(packed), "packed", dev);
            self.run([&](Execution& ex) { ex.pack_weights(w, p); });
          },
          "weights"_a, "packed"_a, "Packs weights for forward(packed_weights=...); packed_weights_size() bytes.");
}

// rnnjit.torch's entries: tensors that the layer checked itself (float32, C-contiguous, on the
// Execution's device; outputs it allocated) given as (address, elements), or None. DLPack costs
// 5-10 us a tensor on the machines measured, several times the whole call at small shapes; the
// C++ API still checks every size. Not for other callers: an address is trusted as given.
using Raw = std::optional<std::pair<std::uintptr_t, std::size_t>>;

template <typename T>
std::span<T> raw(const Raw& r) {
  return r ? std::span<T>(reinterpret_cast<T*>(r->first), r->second) : std::span<T>{};
}

void bind_raw_calls(nb::class_<PyExecution>& c) {
  c.def("_forward_raw",
        [](PyExecution& self, Raw weights, Raw x, Raw y, Raw hx, Raw cx, Raw hy, Raw cy, Raw seq_lengths,
           std::uint64_t dropout_seed, Raw packed, Raw reserve) {
          const ForwardIo io{.x = raw<const float>(x),
                             .hx = raw<const float>(hx),
                             .cx = raw<const float>(cx),
                             .y = raw<float>(y),
                             .hy = raw<float>(hy),
                             .cy = raw<float>(cy),
                             .packed_weights = raw<const std::byte>(packed),
                             .seq_lengths = raw<const std::int32_t>(seq_lengths),
                             .dropout_seed = dropout_seed};
          self.run([&](Execution& ex) { ex.forward(raw<const float>(weights), io, raw<std::byte>(reserve)); });
        },
        "weights"_a.none(), "x"_a.none(), "y"_a.none(), "hx"_a.none(), "cx"_a.none(), "hy"_a.none(), "cy"_a.none(),
        "seq_lengths"_a.none(), "dropout_seed"_a, "packed"_a.none() = nb::none(), "reserve"_a.none() = nb::none(),
        "forward on raw addresses (rnnjit.torch's entry); packed and reserve (bytes) optional.")
      .def("_backward_raw",
           [](PyExecution& self, Raw weights, Raw dy, Raw dhy, Raw dcy, Raw dx, Raw dhx, Raw dcx, Raw x, Raw dweights,
              Raw reserve) {
             const BackwardDataIo data{.dy = raw<const float>(dy),
                                       .dhy = raw<const float>(dhy),
                                       .dcy = raw<const float>(dcy),
                                       .dx = raw<float>(dx),
                                       .dhx = raw<float>(dhx),
                                       .dcx = raw<float>(dcx)};
             const auto r = raw<std::byte>(reserve);
             self.run([&](Execution& ex) {
               ex.backward_data(raw<const float>(weights), data, r);
               if (dweights) ex.backward_weights({.x = raw<const float>(x), .dweights = raw<float>(dweights)}, r);
             });
           },
           "weights"_a.none(), "dy"_a.none(), "dhy"_a.none(), "dcy"_a.none(), "dx"_a.none(), "dhx"_a.none(),
           "dcx"_a.none(), "x"_a.none(), "dweights"_a.none(), "reserve"_a.none() = nb::none(),
           "backward_data, then backward_weights where dweights is given (rnnjit.torch's entry).")
      .def("_bind",
           [](PyExecution& self, Raw weights, Raw packed) {
             self.bound = {raw<const float>(weights), raw<const std::byte>(packed)};
           },
           "weights"_a.none(), "packed"_a.none(), "Weights (and packed weights) for _forward_bound.")
      .def("_forward_bound",
           [](PyExecution& self, std::uintptr_t x, std::uintptr_t y, std::uintptr_t hx, std::uintptr_t cx,
              std::uintptr_t hy, std::uintptr_t cy) {
             // An inference call on the shapes the Execution was prepared for, float32 arrays at
             // these addresses (0: none), the weights from _bind: the binding computes the sizes.
             const PyExecution::Bound bound = self.bound;
             self.run([&](Execution& ex) {
               const RnnConfig& c = ex.config();
               const Shape s = ex.shape();
               const std::size_t rows = static_cast<std::size_t>(s.seq_len * s.batch);
               const std::size_t states = static_cast<std::size_t>(c.num_layers * c.directions() * s.batch);
               auto in = [](std::uintptr_t a, std::size_t n) {
                 return a ? std::span<const float>(reinterpret_cast<const float*>(a), n) : std::span<const float>{};
               };
               auto out = [](std::uintptr_t a, std::size_t n) {
                 return a ? std::span<float>(reinterpret_cast<float*>(a), n) : std::span<float>{};
               };
               const auto state = static_cast<std::size_t>(c.state_size()), hidden = static_cast<std::size_t>(c.hidden_size);
               const ForwardIo io{.x = in(x, rows * static_cast<std::size_t>(c.input_size)),
                                  .hx = in(hx, states * state),
                                  .cx = in(cx, states * hidden),
                                  .y = out(y, rows * static_cast<std::size_t>(c.output_size())),
                                  .hy = out(hy, states * state),
                                  .cy = out(cy, states * hidden),
                                  .packed_weights = bound.packed};
               ex.forward(bound.weights, io);
             });
           },
           "x"_a, "y"_a, "hx"_a, "cx"_a, "hy"_a, "cy"_a,
           "forward at these addresses on the Execution's own shapes and the weights of _bind (rnnjit.torch's "
           "repeated inference calls).")
      .def("_pack_raw",
           [](PyExecution& self, Raw weights, Raw packed) {
             self.run([&](Execution& ex) { ex.pack_weights(raw<const float>(weights), raw<std::byte>(packed)); });
           },
           "weights"_a.none(), "packed"_a.none(), "pack_weights on raw addresses (rnnjit.torch's entry).")
      .def("_packed_layout",
           [](PyExecution& self) {
             return self.query([](Execution& ex) {
               return ex.packed_weights_size() == 0 ? std::uint64_t{0} : packed_layout_fingerprint(ex.plan());
             });
           },
           "What names the packed weights' layout: Executions with the same value share packed weights "
           "(0: nothing is packed).");
}

void bind_execution_queries(nb::class_<PyExecution>& c) {
  c.def_prop_ro("config", [](PyExecution& s) { return s.query([](Execution& e) { return e.config(); }); })
      .def_prop_ro("shape", [](PyExecution& s) { return s.query([](Execution& e) { return e.shape(); }); })
      .def_prop_ro("mode", [](PyExecution& s) { return s.query([](Execution& e) { return e.mode(); }); })
      .def_prop_ro("backend", [](PyExecution& s) { return s.query([](Execution& e) { return e.backend(); }); })
      .def_prop_ro("device", &PyExecution::device)
      .def_prop_ro("closed", &PyExecution::closed)
      .def("workspace_size", [](PyExecution& s) { return s.query([](Execution& e) { return e.workspace_size(); }); })
      .def("reserve_size", [](PyExecution& s) { return s.query([](Execution& e) { return e.reserve_size(); }); })
      .def("packed_weights_size",
           [](PyExecution& s) { return s.query([](Execution& e) { return e.packed_weights_size(); }); })
      .def("allocations", [](PyExecution& s) { return s.query([](Execution& e) { return e.allocations(); }); })
      .def("plan_text", [](PyExecution& s) { return s.query([](Execution& e) { return e.plan_text(); }); })
      .def("plan_json", [](PyExecution& s) { return s.query([](Execution& e) { return e.plan_json(); }); })
      .def(
          "kernels",
          [](PyExecution& s) {
            if (s.device() != Device::cpu)
              throw nb::value_error("kernels(): the CUDA kernels' source is dumped by `rnn-jit dump --target cuda`");
            return s.query([](Execution& e) { return kernels_of(e.plan()); });
          },
          "The generated code of the plan's kernels (name, code bytes, disassembly), compiled through the cache.")
      .def("close", &PyExecution::close, "Frees the Execution's workspace and reserve; later calls raise.")
      .def("__enter__", [](nb::handle self) { return self; })
      .def("__exit__", [](PyExecution& s, nb::args) { s.close(); });
}

void bind_rnn(nb::module_& m) {
  nb::class_<Rnn>(m, "Rnn", "The network descriptor: validates the config; prepare() plans and compiles a shape.")
      .def(
          "__init__", [](Rnn* self, const RnnConfig& config, const std::optional<Options>& options) {
            new (self) Rnn(config, options.value_or(Options{}));
          },
          "config"_a, "options"_a = nb::none())
      .def_prop_ro("config", &Rnn::config)
      .def_prop_ro("options", &Rnn::options)
      .def("weights_size", &Rnn::weights_size, "Elements of the canonical weight buffer.")
      .def_prop_ro("weight_layout", [](const Rnn& r) { return r.weight_layout().blocks(); },
                   "The parameters in the canonical buffer, in PyTorch's state_dict order.")
      .def(
          "prepare",
          [](const Rnn& r, nb::handle shape, nb::handle mode) {
            const Shape s = shape_arg(shape);
            const Mode md = enum_arg(mode, parse_mode);
            const Device dev = r.options().device;
            std::optional<Execution> ex;
            {
              nb::gil_scoped_release unlocked;  // planning and compiling can take a while
              ex.emplace(r.prepare(s, md));
            }
            return new PyExecution(std::move(*ex), dev);
          },
          "shape"_a, "mode"_a = "inference",
          "Plans and compiles for one shape ((T, N) or Shape) and mode, through the process-wide cache.");
}

void bind_cache(nb::module_& m) {
  nb::class_<CacheStats>(m, "CacheStats", "Counters of the process-wide cache of plans and kernels.")
      .def_ro("kernel_hits", &CacheStats::kernel_hits)
      .def_ro("kernel_misses", &CacheStats::kernel_misses)
      .def_ro("plan_hits", &CacheStats::plan_hits)
      .def_ro("plan_misses", &CacheStats::plan_misses)
      .def_ro("kernels", &CacheStats::kernels)
      .def_ro("plans", &CacheStats::plans)
      .def_ro("capacity", &CacheStats::capacity)
      .def("__repr__", [](const CacheStats& s) {
        return "CacheStats(kernel_hits=" + std::to_string(s.kernel_hits) + ", kernel_misses=" +
               std::to_string(s.kernel_misses) + ", plan_hits=" + std::to_string(s.plan_hits) +
               ", plan_misses=" + std::to_string(s.plan_misses) + ", kernels=" + std::to_string(s.kernels) +
               ", plans=" + std::to_string(s.plans) + ")";
      });
  m.def("cache_stats", &cache_stats, "Hits, misses and sizes of the process-wide plan and kernel cache.");
  m.def("clear_cache", &clear_cache, "Drops cached plans and kernels that no Execution still uses.");
  m.def(
      "_use_openmp", [](const std::string& library) { ThreadTeam::instance().use_openmp(library); }, "library"_a,
      "Runs rnnjit's threads as parallel regions of the OpenMP runtime `library` (loaded already: PyTorch's), "
      "or on rnnjit's own workers with ''.");
  m.def("_openmp_library", [] { return ThreadTeam::instance().openmp_library(); },
        "The OpenMP runtime rnnjit's threads run on ('' for its own workers).");
}

}  // namespace

void bind_execution(nb::module_& m) {
  nb::class_<KernelCode>(m, "KernelCode", "A kernel's generated code.")
      .def_ro("name", &KernelCode::name)
      .def_ro("code", &KernelCode::code)
      .def_ro("disassembly", &KernelCode::disassembly)
      .def("__repr__", [](const KernelCode& k) { return "KernelCode(" + k.name + ")"; });
  nb::class_<PyExecution> execution(m, "Execution", "A prepared call for one shape and mode (Rnn.prepare).");
  bind_execution_calls(execution);
  bind_raw_calls(execution);
  bind_execution_queries(execution);
  bind_rnn(m);
  bind_cache(m);
}

}  // namespace rnnjit::python
