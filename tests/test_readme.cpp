// The README's examples are examples/train_step.cpp (which ctest builds and runs as
// example_train_step), examples/torch_lstm.py (which python/tests/test_examples.py runs) and
// the two ONNX Runtime examples (which python/tests/test_onnxruntime.py runs), verbatim, so the documentation cannot drift from code that compiles and runs.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Readme, ShowsTheExampleThatTheTestsRun) {
  const std::string readme = slurp(std::string(RNNJIT_SOURCE_DIR) + "/README.md");
  const std::string example = slurp(std::string(RNNJIT_SOURCE_DIR) + "/examples/train_step.cpp");
  ASSERT_FALSE(example.empty());
  EXPECT_NE(readme.find(example), std::string::npos) << "README.md must embed examples/train_step.cpp verbatim";
  for (const char* name : {"torch_lstm.py", "onnxruntime_override.py", "onnxruntime_domain.py"}) {
    const std::string python_example = slurp(std::string(RNNJIT_SOURCE_DIR) + "/examples/" + name);
    ASSERT_FALSE(python_example.empty()) << name;
    EXPECT_NE(readme.find(python_example), std::string::npos) << "README.md must embed examples/" << name << " verbatim";
  }
  EXPECT_NE(readme.find("tools/run.sh"), std::string::npos);
  EXPECT_NE(readme.find("tools/test.sh"), std::string::npos);
}

}  // namespace
