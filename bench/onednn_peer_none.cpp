// rnnjit bench: the oneDNN peer when oneDNN was not found at configure time (see onednn_peer.hpp).
// onednn_available() is false and constructing an OnednnRnn throws; nothing else is reachable.
#include "bench/onednn_peer.hpp"

namespace rnnjit::bench {

bool onednn_available() { return false; }
std::string onednn_version() { return {}; }
void onednn_cap_isa(Isa) {}

struct OnednnRnn::Impl {
  RnnConfig config;
  Shape shape;
  Mode mode = Mode::inference;
};

struct OnednnInt8Rnn::Impl {
  RnnConfig config;
};

namespace {
[[noreturn]] void unavailable() { throw Error("oneDNN was not found at build time"); }
}  // namespace

void onednn_sgemm(int, std::int64_t, const float*, const float*, float*) { unavailable(); }

OnednnRnn::OnednnRnn(const RnnConfig&, const Shape&, Mode, std::span<const float>, int, bool) { unavailable(); }
OnednnRnn::OnednnRnn(OnednnRnn&&) noexcept = default;
OnednnRnn& OnednnRnn::operator=(OnednnRnn&&) noexcept = default;
OnednnRnn::~OnednnRnn() = default;

const RnnConfig& OnednnRnn::config() const { unavailable(); }
Shape OnednnRnn::shape() const { unavailable(); }
Mode OnednnRnn::mode() const { unavailable(); }
PeerRun OnednnRnn::run_info() const { unavailable(); }
void OnednnRnn::set_weights(std::span<const float>) { unavailable(); }
void OnednnRnn::forward(const ForwardIo&) { unavailable(); }
void OnednnRnn::backward(const BackwardDataIo&) { unavailable(); }
void OnednnRnn::weight_gradients(std::span<float>) const { unavailable(); }

OnednnInt8Rnn::OnednnInt8Rnn(const RnnConfig&, const Shape&, std::span<const float>, std::span<const float>, int) {
  unavailable();
}
OnednnInt8Rnn::OnednnInt8Rnn(OnednnInt8Rnn&&) noexcept = default;
OnednnInt8Rnn& OnednnInt8Rnn::operator=(OnednnInt8Rnn&&) noexcept = default;
OnednnInt8Rnn::~OnednnInt8Rnn() = default;
const RnnConfig& OnednnInt8Rnn::config() const { unavailable(); }
Shape OnednnInt8Rnn::shape() const { unavailable(); }
PeerRun OnednnInt8Rnn::run_info() const { unavailable(); }
float OnednnInt8Rnn::data_scale() const { unavailable(); }
float OnednnInt8Rnn::data_shift() const { unavailable(); }
int OnednnInt8Rnn::weight_max() const { unavailable(); }
void OnednnInt8Rnn::forward(const ForwardIo&) { unavailable(); }

}  // namespace rnnjit::bench
