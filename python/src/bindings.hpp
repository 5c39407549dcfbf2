// The parts of the extension module rnnjit._rnnjit, each adding its classes and functions.
#pragma once

#include <nanobind/nanobind.h>

namespace rnnjit::python {

void bind_config(nanobind::module_& m);     // RnnConfig, Shape, Options, enums, sizes
void bind_execution(nanobind::module_& m);  // Rnn, Execution, the cache

}  // namespace rnnjit::python
