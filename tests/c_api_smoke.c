/* rnnjit.h from C: compiled as C99 with -pedantic-errors (the header is valid C), then every entry
 * point is called once on a small problem. Prints "c_api_smoke: ok" on success. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rnnjit.h"

static int failures = 0;

#define EXPECT_STATUS(expected, call)                                                                   \
  do {                                                                                                  \
    rnnjit_status_t got_ = (call);                                                                      \
    if (got_ != (expected)) {                                                                           \
      fprintf(stderr, "%s:%d: %s returned %s, expected %s (%s)\n", __FILE__, __LINE__, #call,            \
              rnnjit_status_string(got_), rnnjit_status_string(expected), rnnjit_last_error());          \
      ++failures;                                                                                       \
    }                                                                                                   \
  } while (0)

#define EXPECT_TRUE(cond)                                                                               \
  do {                                                                                                  \
    if (!(cond)) {                                                                                      \
      fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);                               \
      ++failures;                                                                                       \
    }                                                                                                   \
  } while (0)

static float* filled(size_t n, float scale) {
  float* v = (float*)malloc((n ? n : 1) * sizeof(float));
  size_t i;
  if (!v) exit(3);
  for (i = 0; i < n; ++i) v[i] = scale * (float)((int)(i * 7919 % 23) - 11) / 11.0f;
  return v;
}

static int all_finite(const float* v, size_t n) {
  size_t i;
  for (i = 0; i < n; ++i)
    if (!(fabsf(v[i]) <= 1e30f)) return 0;
  return 1;
}

int main(void) {
  rnnjit_config_t config;
  rnnjit_rnn_t* rnn = NULL;
  rnnjit_execution_t *infer = NULL, *train = NULL, *onnx = NULL;
  rnnjit_tensor_sizes_t sizes;
  rnnjit_forward_io_t fio;
  rnnjit_backward_data_io_t bdio;
  rnnjit_backward_weights_io_t bwio;
  rnnjit_onnx_attributes_t attrs;
  rnnjit_onnx_io_t oio;
  size_t weights_size = 0, offset = 0, block = 0, workspace = 0, reserve = 0, packed_size = 0;
  float *w, *x, *y, *hy, *cy, *dx, *dw, *dy;
  void* packed;
  const int64_t T = 3, N = 2, I = 5, H = 4;

  printf("rnnjit %s (header %d.%d.%d)\n", rnnjit_version(), RNNJIT_VERSION_MAJOR, RNNJIT_VERSION_MINOR,
         RNNJIT_VERSION_PATCH);

  memset(&config, 0, sizeof config);
  config.cell = RNNJIT_CELL_LSTM;
  config.input_size = I;
  config.hidden_size = H;
  config.num_layers = 2;
  config.direction = RNNJIT_DIRECTION_BIDIRECTIONAL;
  config.threads = 2;
  config.fpmath = RNNJIT_FPMATH_STRICT;
  EXPECT_STATUS(RNNJIT_STATUS_OK, rnnjit_rnn_create(&config, &rnn));
  if (!rnn) return 1;
  EXPECT_TRUE(strcmp(rnnjit_last_error(), "") == 0);
  EXPECT_STATUS(RNNJIT_STATUS_OK, rnnjit_rnn_weights_size(rnn, &weights_size));
  EXPECT_STATUS(RNNJIT_STATUS_OK, rnnjit_rnn_weight_block(rnn, "weight_hh_l1_reverse", &offset, &block));
  EXPECT_TRUE(block == (size_t)(4 * H * H) && offset + block <= weights_size);

  /* Inference, with packed weights. */
  EXPECT_STATUS(RNNJIT_STATUS_OK, rnnjit_execution_create(rnn, T, N, RNNJIT_MODE_INFERENCE, &infer));
  EXPECT_STATUS(RNNJIT_STATUS_OK, rnnjit_execution_tensor_sizes(infer, &sizes));
  EXPECT_TRUE(sizes.x == (size_t)(T * N * I) && sizes.y == (size_t)(T * N * 2 * H) &&
              sizes.state == (size_t)(2 * 2 * N * H) && sizes.weights == weights_size);
  EXPECT_STATUS(RNNJIT_STATUS_OK, rnnjit_execution_workspace_size(infer, &workspace));
  EXPECT_STATUS(RNNJIT_STATUS_OK, rnnjit_execution_reserve_size(infer, &reserve));
  EXPECT_STATUS(RNNJIT_STATUS_OK, rnnjit_execution_packed_weights_size(infer, &packed_size));
  EXPECT_TRUE(reserve == 0);
  w = filled(weights_size, 0.5f);
  x = filled(sizes.x, 1.0f);
  y = filled(sizes.y, 0.0f);
  hy = filled(sizes.state, 0.0f);
  cy = filled(sizes.state, 0.0f);
  dy = filled(sizes.y, 1.0f);
  dx = filled(sizes.x, 0.0f);
  dw = filled(weights_size, 0.0f);
  packed = malloc(packed_size ? packed_size : 1);
  if (!packed) return 3;
  EXPECT_STATUS(RNNJIT_STATUS_OK, rnnjit_pack_weights(infer, w, weights_size, packed, packed_size));
  memset(&fio, 0, sizeof fio);
  fio.x = x; fio.x_size = sizes.x;
  fio.y = y; fio.y_size = sizes.y;
  fio.hy = hy; fio.hy_size = sizes.state;
  fio.cy = cy; fio.cy_size = sizes.state;
  fio.packed_weights = packed; fio.packed_weights_bytes = packed_size;
  EXPECT_STATUS(RNNJIT_STATUS_OK, rnnjit_forward(infer, w, weights_size, &fio));
  EXPECT_TRUE(all_finite(y, sizes.y) && all_finite(hy, sizes.state));

  /* Training: forward, backward data, backward weights (twice accumulated = 2x once). */
  EXPECT_STATUS(RNNJIT_STATUS_OK, rnnjit_execution_create(rnn, T, N, RNNJIT_MODE_TRAINING, &train));
  fio.packed_weights = NULL; fio.packed_weights_bytes = 0;
  EXPECT_STATUS(RNNJIT_STATUS_OK, rnnjit_forward(train, w, weights_size, &fio));
  memset(&bdio, 0, sizeof bdio);
  bdio.dy = dy; bdio.dy_size = sizes.y;
  bdio.dx = dx; bdio.dx_size = sizes.x;
  EXPECT_STATUS(RNNJIT_STATUS_OK, rnnjit_backward_data(train, w, weights_size, &bdio));
  memset(&bwio, 0, sizeof bwio);
  bwio.x = x; bwio.x_size = sizes.x;
  bwio.dweights = dw; bwio.dweights_size = weights_size;
  EXPECT_STATUS(RNNJIT_STATUS_OK, rnnjit_backward_weights(train, &bwio));
  bwio.accumulate = 1;
  EXPECT_STATUS(RNNJIT_STATUS_OK, rnnjit_backward_weights(train, &bwio));
  EXPECT_TRUE(all_finite(dx, sizes.x) && all_finite(dw, weights_size));

  /* Errors: a status and a message, never a crash. */
  EXPECT_STATUS(RNNJIT_STATUS_INVALID_ARGUMENT, rnnjit_forward(NULL, w, weights_size, &fio));
  EXPECT_TRUE(strstr(rnnjit_last_error(), "execution") != NULL);
  fio.x = NULL;
  EXPECT_STATUS(RNNJIT_STATUS_INVALID_ARGUMENT, rnnjit_forward(infer, w, weights_size, &fio));
  EXPECT_TRUE(strstr(rnnjit_last_error(), "x is NULL") != NULL);
  fio.x = x;
  EXPECT_STATUS(RNNJIT_STATUS_INVALID_ARGUMENT, rnnjit_forward(infer, w, weights_size - 1, &fio));
  EXPECT_STATUS(RNNJIT_STATUS_INVALID_ARGUMENT, rnnjit_backward_data(infer, w, weights_size, &bdio));
  config.proj_size = config.hidden_size;
  {
    rnnjit_rnn_t* none = NULL;
    EXPECT_STATUS(RNNJIT_STATUS_INVALID_ARGUMENT, rnnjit_rnn_create(&config, &none));
    EXPECT_TRUE(none == NULL && strstr(rnnjit_last_error(), "proj_size") != NULL);
  }
  config.proj_size = 0;
  /* ONNX's LSTM features: gate clip, peepholes (a [3, H] block per layer and direction), input_forget. */
  config.gate_clip = 1.5f;
  config.peephole = 1;
  config.input_forget = 1;
  {
    rnnjit_rnn_t* features = NULL;
    size_t features_size = 0, peephole_offset = 0, peephole_size = 0;
    EXPECT_STATUS(RNNJIT_STATUS_OK, rnnjit_rnn_create(&config, &features));
    EXPECT_STATUS(RNNJIT_STATUS_OK, rnnjit_rnn_weights_size(features, &features_size));
    EXPECT_STATUS(RNNJIT_STATUS_OK,
                  rnnjit_rnn_weight_block(features, "weight_peephole_l1_reverse", &peephole_offset, &peephole_size));
    EXPECT_TRUE(peephole_size == (size_t)(3 * H) && features_size == weights_size + (size_t)(2 * 2 * 3 * H));
    rnnjit_rnn_destroy(features);
  }
  config.gate_clip = 0.0f;
  config.peephole = 0;
  config.input_forget = 0;

  /* ONNX GRU (linear_before_reset=1), batch-first, all outputs. */
  memset(&attrs, 0, sizeof attrs);
  attrs.op = RNNJIT_ONNX_GRU;
  attrs.hidden_size = H;
  attrs.direction = "bidirectional";
  attrs.layout = 1;
  attrs.linear_before_reset = 1;
  {
    rnnjit_config_t gru;
    rnnjit_rnn_t* gru_rnn = NULL;
    size_t gru_size = 0;
    float *W = filled((size_t)(2 * 3 * H * I), 0.3f), *R = filled((size_t)(2 * 3 * H * H), 0.3f);
    float *gw, *Y = filled((size_t)(N * T * 2 * H), 0.0f), *Y_h = filled((size_t)(N * 2 * H), 0.0f);
    EXPECT_STATUS(RNNJIT_STATUS_OK, rnnjit_onnx_config(&attrs, I, &gru));
    EXPECT_TRUE(gru.cell == RNNJIT_CELL_GRU && gru.direction == RNNJIT_DIRECTION_BIDIRECTIONAL);
    EXPECT_STATUS(RNNJIT_STATUS_OK, rnnjit_rnn_create(&gru, &gru_rnn));
    EXPECT_STATUS(RNNJIT_STATUS_OK, rnnjit_rnn_weights_size(gru_rnn, &gru_size));
    gw = filled(gru_size, 0.0f);
    EXPECT_STATUS(RNNJIT_STATUS_OK,
                  rnnjit_onnx_import_weights(&attrs, I, W, (size_t)(2 * 3 * H * I), R, (size_t)(2 * 3 * H * H),
                                             NULL, 0, NULL, 0, gw, gru_size));
    EXPECT_STATUS(RNNJIT_STATUS_OK, rnnjit_execution_create(gru_rnn, T, N, RNNJIT_MODE_INFERENCE, &onnx));
    memset(&oio, 0, sizeof oio);
    oio.X = x; oio.X_size = sizes.x;
    oio.Y = Y; oio.Y_size = (size_t)(N * T * 2 * H);
    oio.Y_h = Y_h; oio.Y_h_size = (size_t)(N * 2 * H);
    EXPECT_STATUS(RNNJIT_STATUS_OK, rnnjit_onnx_forward(onnx, &attrs, gw, gru_size, &oio));
    /* Batch-first: Y[n][T-1][0] is the forward direction's Y_h[n][0]. */
    EXPECT_TRUE(memcmp(&Y[((1 * T + (T - 1)) * 2 + 0) * H], &Y_h[(1 * 2 + 0) * H], (size_t)H * sizeof(float)) == 0);
    /* linear_before_reset=0 (ONNX's default) is another cell: not the one this execution runs. */
    attrs.linear_before_reset = 0;
    EXPECT_STATUS(RNNJIT_STATUS_OK, rnnjit_onnx_config(&attrs, I, &gru));
    EXPECT_TRUE(gru.cell == RNNJIT_CELL_GRU_RESET_BEFORE);
    EXPECT_STATUS(RNNJIT_STATUS_INVALID_ARGUMENT, rnnjit_onnx_forward(onnx, &attrs, gw, gru_size, &oio));
    EXPECT_TRUE(strstr(rnnjit_last_error(), "gru_reset_before") != NULL);
    rnnjit_rnn_destroy(gru_rnn);
    free(W); free(R); free(gw); free(Y); free(Y_h);
  }

  rnnjit_execution_destroy(onnx);
  rnnjit_execution_destroy(train);
  rnnjit_execution_destroy(infer);
  rnnjit_rnn_destroy(rnn);
  rnnjit_rnn_destroy(NULL);
  rnnjit_execution_destroy(NULL);
  free(w); free(x); free(y); free(hy); free(cy); free(dy); free(dx); free(dw); free(packed);
  if (failures) {
    printf("c_api_smoke: %d failures\n", failures);
    return 1;
  }
  printf("c_api_smoke: ok\n");
  return 0;
}
