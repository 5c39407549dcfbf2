// rnnjit._rnnjit: the C++ runtime API from Python (nanobind). rnnjit/__init__.py re-exports it.
#include <nanobind/nanobind.h>

#include "python/src/bindings.hpp"
#include "rnnjit.h"
#include "rnnjit/error.hpp"

namespace nb = nanobind;

NB_MODULE(_rnnjit, m) {
  m.doc() = "rnnjit: JIT-generated fused RNN kernels (LSTM, GRU, RNN) - the C++ runtime API";
  // rnnjit::Error reports bad configurations, shapes and buffers: a ValueError to Python, whose
  // message names the field or buffer.
  nb::exception<rnnjit::Error>(m, "Error", PyExc_ValueError);
  m.attr("__version__") = nb::str(rnnjit_version());
  rnnjit::python::bind_config(m);
  rnnjit::python::bind_execution(m);
}
