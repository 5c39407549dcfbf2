/* An ONNX LSTM node run through rnnjit's C API (C99).
 *
 *   onnx_lstm DIR
 *
 * reads DIR/W.npy [D, 4*H, I], DIR/R.npy [D, 4*H, H], DIR/X.npy [T, N, I] (float32, laid out as
 * ONNX's LSTM inputs, gates i,o,f,c), DIR/B.npy [D, 8*H] if it exists (else zero biases) and
 * DIR/P.npy [D, 3*H] if it exists (peepholes, rows i,o,f; else none); D = 1 is direction
 * "forward", D = 2 "bidirectional". Runs the node with ONNX's default attributes and prints
 * Y_h [D, N, H], one line per (direction, batch row).
 * Exit status: 0 on success, 1 on any error (message on stderr). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rnnjit.h"

#define MAX_DIMS 8

typedef struct npy_array {
  int ndim;
  int64_t shape[MAX_DIMS];
  size_t count; /* elements */
  float* data;
} npy_array;

/* A tiny .npy reader: versions 1.0, 2.0 and 3.0, dtype '<f4', C order, at most MAX_DIMS dims.
 * Returns 0 on success, -1 if the file does not exist, -2 on any other problem (reported). */
static int npy_read(const char* path, npy_array* a) {
  FILE* f = fopen(path, "rb");
  unsigned char* bytes = NULL;
  size_t size = 0, capacity = 0, n;
  size_t header_len, start, i;
  const char *header, *p;
  char* text = NULL;
  int result = -2;
  memset(a, 0, sizeof *a);
  if (!f) return -1;
  for (;;) { /* read the whole file */
    if (size == capacity) {
      unsigned char* grown;
      capacity = capacity ? 2 * capacity : 4096;
      grown = (unsigned char*)realloc(bytes, capacity);
      if (!grown) { fprintf(stderr, "%s: out of memory\n", path); goto done; }
      bytes = grown;
    }
    n = fread(bytes + size, 1, capacity - size, f);
    size += n;
    if (n == 0) break;
  }
  if (ferror(f)) { fprintf(stderr, "%s: read error\n", path); goto done; }
  if (size < 10 || memcmp(bytes, "\x93NUMPY", 6) != 0) { fprintf(stderr, "%s: not a .npy file\n", path); goto done; }
  if (bytes[6] == 1) {
    header_len = (size_t)bytes[8] | (size_t)bytes[9] << 8;
    start = 10;
  } else if ((bytes[6] == 2 || bytes[6] == 3) && size >= 12) {
    header_len = (size_t)bytes[8] | (size_t)bytes[9] << 8 | (size_t)bytes[10] << 16 | (size_t)bytes[11] << 24;
    start = 12;
  } else {
    fprintf(stderr, "%s: unsupported .npy version %d\n", path, bytes[6]);
    goto done;
  }
  if (header_len > size - start) { fprintf(stderr, "%s: truncated header\n", path); goto done; }
  text = (char*)malloc(header_len + 1); /* the header dict as a C string */
  if (!text) { fprintf(stderr, "%s: out of memory\n", path); goto done; }
  memcpy(text, bytes + start, header_len);
  text[header_len] = '\0';
  header = text;
  if (!strstr(header, "'descr': '<f4'")) { fprintf(stderr, "%s: dtype is not '<f4' (float32)\n", path); goto done; }
  if (!strstr(header, "'fortran_order': False")) { fprintf(stderr, "%s: not a C-order array\n", path); goto done; }
  p = strstr(header, "'shape': (");
  if (!p) { fprintf(stderr, "%s: no shape in the header\n", path); goto done; }
  p += strlen("'shape': (");
  a->count = 1;
  while (*p != ')') {
    int64_t dim = 0;
    if (*p == ' ' || *p == ',') { ++p; continue; }
    if (*p < '0' || *p > '9' || a->ndim == MAX_DIMS) { fprintf(stderr, "%s: bad shape\n", path); goto done; }
    while (*p >= '0' && *p <= '9') {
      if (dim > (INT64_C(1) << 40)) { fprintf(stderr, "%s: shape too large\n", path); goto done; }
      dim = dim * 10 + (*p++ - '0');
    }
    if (dim != 0 && a->count > SIZE_MAX / 4 / (size_t)dim) { fprintf(stderr, "%s: shape too large\n", path); goto done; }
    a->shape[a->ndim++] = dim;
    a->count *= (size_t)dim;
  }
  if (a->count > (size - start - header_len) / 4) { fprintf(stderr, "%s: truncated data\n", path); goto done; }
  a->data = (float*)malloc(a->count ? a->count * sizeof(float) : 1);
  if (!a->data) { fprintf(stderr, "%s: out of memory\n", path); goto done; }
  for (i = 0; i < a->count; ++i) { /* little-endian float32, whatever the host's byte order */
    const unsigned char* b = bytes + start + header_len + 4 * i;
    uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    memcpy(&a->data[i], &u, sizeof u);
  }
  result = 0;
done:
  free(text);
  free(bytes);
  fclose(f);
  return result;
}

static int load(const char* dir, const char* name, int ndim, npy_array* a, int optional) {
  char path[4096];
  int r;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  r = npy_read(path, a);
  if (r == -1 && optional) return 1; /* absent */
  if (r == -1) fprintf(stderr, "%s: cannot open\n", path);
  if (r != 0) return -1;
  if (a->ndim != ndim) { fprintf(stderr, "%s: %d dimensions, expected %d\n", path, a->ndim, ndim); return -1; }
  return 0;
}

#define CHECK(call)                                                                                   \
  do {                                                                                                \
    rnnjit_status_t status_ = (call);                                                                 \
    if (status_ != RNNJIT_STATUS_OK) {                                                                \
      fprintf(stderr, "onnx_lstm: %s: %s\n", rnnjit_status_string(status_), rnnjit_last_error());     \
      goto done;                                                                                      \
    }                                                                                                 \
  } while (0)

int main(int argc, char** argv) {
  npy_array W, R, B, P, X;
  rnnjit_onnx_attributes_t attrs;
  rnnjit_config_t config;
  rnnjit_onnx_io_t io;
  rnnjit_rnn_t* rnn = NULL;
  rnnjit_execution_t* ex = NULL;
  float *weights = NULL, *Y_h = NULL;
  size_t weights_size = 0;
  int64_t D, H, I, T, N, d, n, h;
  int has_b, has_p, result = 1;
  memset(&W, 0, sizeof W); memset(&R, 0, sizeof R); memset(&B, 0, sizeof B); memset(&P, 0, sizeof P);
  memset(&X, 0, sizeof X);
  if (argc != 2) {
    fprintf(stderr, "usage: onnx_lstm DIR   (DIR holds W.npy, R.npy, X.npy and optionally B.npy, P.npy)\n");
    return 2;
  }
  if (load(argv[1], "W.npy", 3, &W, 0) || load(argv[1], "R.npy", 3, &R, 0) || load(argv[1], "X.npy", 3, &X, 0))
    goto done;
  has_b = load(argv[1], "B.npy", 2, &B, 1);
  if (has_b < 0) goto done;
  has_b = has_b == 0;
  has_p = load(argv[1], "P.npy", 2, &P, 1);
  if (has_p < 0) goto done;
  has_p = has_p == 0;
  D = W.shape[0], H = W.shape[1] / 4, I = W.shape[2], T = X.shape[0], N = X.shape[1];
  if ((D != 1 && D != 2) || H * 4 != W.shape[1] || X.shape[2] != I) {
    fprintf(stderr, "onnx_lstm: W [%lld, %lld, %lld] and X [%lld, %lld, %lld] are not an LSTM's\n",
            (long long)W.shape[0], (long long)W.shape[1], (long long)W.shape[2], (long long)X.shape[0],
            (long long)X.shape[1], (long long)X.shape[2]);
    goto done;
  }

  /* The node's attributes: ONNX's defaults (zeros) plus op, hidden_size and direction. */
  memset(&attrs, 0, sizeof attrs);
  attrs.op = RNNJIT_ONNX_LSTM;
  attrs.hidden_size = H;
  attrs.direction = D == 2 ? "bidirectional" : "forward";
  attrs.has_peepholes = has_p; /* the node has input P: it is imported with the weights */

  /* Once per model: the network and its weights in rnnjit's layout. */
  CHECK(rnnjit_onnx_config(&attrs, I, &config));
  CHECK(rnnjit_rnn_create(&config, &rnn));
  CHECK(rnnjit_rnn_weights_size(rnn, &weights_size));
  weights = (float*)malloc(weights_size * sizeof(float));
  Y_h = (float*)malloc((size_t)(D * N * H) * sizeof(float));
  if (!weights || !Y_h) { fprintf(stderr, "onnx_lstm: out of memory\n"); goto done; }
  CHECK(rnnjit_onnx_import_weights(&attrs, I, W.data, W.count, R.data, R.count, has_b ? B.data : NULL,
                                   has_b ? B.count : 0, has_p ? P.data : NULL, has_p ? P.count : 0, weights,
                                   weights_size));

  /* Once per input shape: plan and compile. Then run (any number of times). */
  CHECK(rnnjit_execution_create(rnn, T, N, RNNJIT_MODE_INFERENCE, &ex));
  memset(&io, 0, sizeof io);
  io.X = X.data;
  io.X_size = X.count;
  io.Y_h = Y_h;
  io.Y_h_size = (size_t)(D * N * H);
  CHECK(rnnjit_onnx_forward(ex, &attrs, weights, weights_size, &io));

  printf("onnx_lstm: rnnjit %s, LSTM I=%lld H=%lld %s, T=%lld N=%lld, B %s, P %s\n", rnnjit_version(),
         (long long)I, (long long)H, attrs.direction, (long long)T, (long long)N, has_b ? "given" : "absent (zeros)",
         has_p ? "given" : "absent");
  printf("Y_h [%lld, %lld, %lld]:\n", (long long)D, (long long)N, (long long)H);
  for (d = 0; d < D; ++d) {
    for (n = 0; n < N; ++n) {
      printf("Y_h[%lld][%lld] =", (long long)d, (long long)n);
      for (h = 0; h < H; ++h) printf(" %.8g", Y_h[(d * N + n) * H + h]);
      printf("\n");
    }
  }
  result = 0;
done:
  rnnjit_execution_destroy(ex);
  rnnjit_rnn_destroy(rnn);
  free(weights);
  free(Y_h);
  free(W.data); free(R.data); free(B.data); free(P.data); free(X.data);
  return result;
}
