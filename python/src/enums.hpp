// The API's enums from Python: each argument takes the enum member or its name as a string
// ("lstm", "training", "avx512"), parsed by the C++ API's own parsers.
#pragma once

#include <nanobind/nanobind.h>

#include <string>
#include <string_view>

#include "rnnjit/rnn.hpp"

namespace rnnjit::python {

template <typename E>
E enum_arg(nanobind::handle value, E (*parse)(std::string_view)) {
  if (nanobind::isinstance<nanobind::str>(value)) return parse(nanobind::cast<std::string>(value));
  E out{};
  if (!nanobind::try_cast(value, out)) {
    const std::string want = nanobind::type_name(nanobind::type<E>()).c_str();
    const std::string got = nanobind::type_name(value.type()).c_str();
    throw nanobind::type_error(("expected a " + want + " or its name, got " + got).c_str());
  }
  return out;
}

}  // namespace rnnjit::python
