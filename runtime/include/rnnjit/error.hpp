// rnnjit: the one exception type of the C++ API. Every message is a single line that names
// the offending field, flag, file or buffer, so callers can print it as is.
#pragma once

#include <stdexcept>
#include <string>

namespace rnnjit {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace rnnjit
