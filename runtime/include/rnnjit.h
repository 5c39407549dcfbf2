/* rnnjit.h: the C API of rnnjit (C99; also valid C++). The C++ API is rnnjit/rnn.hpp.
 *
 * For engines and languages that embed rnnjit through a C ABI. Two opaque handles:
 *   rnnjit_rnn_t        a configured network (cell, sizes, layers, direction), like rnnjit::Rnn
 *   rnnjit_execution_t  a call prepared for one shape (T, N) and mode, like rnnjit::Execution:
 *                       planned and JIT-compiled on creation (through the process-wide cache),
 *                       owns its workspace, reserve and packed weights unless the caller passes them
 * and, on top of them, ONNX's RNN, GRU and LSTM operators (rnnjit_onnx_*).
 *
 * Conventions
 *   - Every function that can fail returns rnnjit_status_t. On failure rnnjit_last_error()
 *     returns a one-line message naming the argument, attribute or buffer at fault, a handle
 *     being created is set to NULL, and arguments that are rejected leave every output untouched
 *     (they are all checked before any computation). No C++ exception ever leaves this API.
 *   - Buffers are caller-owned and passed as (pointer, size) pairs: sizes of float buffers count
 *     elements, sizes of void buffers count bytes. A NULL pointer with size 0 means "not given"
 *     (for optional buffers); a NULL pointer with a nonzero size is INVALID_ARGUMENT, as is any
 *     size other than the expected one (the message names both sizes). A non-NULL pointer with
 *     size 0 also means "not given".
 *   - Tensors are sequence-major: x [T, N, I], y [T, N, D*H] (forward direction in the first H
 *     columns, reverse in the next H; [T, N, H], their sum, with RNNJIT_DIRECTION_BIDIRECTIONAL_SUM),
 *     states hx/cx/hy/cy [L*D, N, H] (layer-major, direction-minor).
 *   - Weights are one float buffer in rnnjit's canonical layout (PyTorch's state_dict order and
 *     shapes, gate orders LSTM i,f,g,o and GRU r,z,n; see rnnjit/weights.hpp and docs/c-api.md);
 *     rnnjit_rnn_weight_block() finds a block by its PyTorch name, rnnjit_onnx_import_weights()
 *     converts ONNX's W, R, B and P.
 *
 * Threading contract
 *   - Creating and destroying handles, size queries and rnnjit_last_error() are thread-safe:
 *     any number of threads may create networks and executions at once (also from one rnnjit_rnn_t,
 *     which is only read), and the compiled-kernel cache is shared and compiles each kernel once.
 *   - One rnnjit_execution_t must be used by one thread at a time (forward, backward, pack,
 *     ONNX calls): it holds the reserve and scratch state between calls. Different executions
 *     may be used by different threads at the same time; they share rnnjit's worker threads and
 *     take turns (results do not depend on the interleaving).
 *   - Destroy a handle only when no other thread uses it; destroy executions before or after the
 *     network they came from, in any order (an execution does not refer to its rnnjit_rnn_t).
 *   - rnnjit_last_error() is per thread.
 */
#ifndef RNNJIT_H
#define RNNJIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Kept equal to the CMake project's version (the build checks it). */
#define RNNJIT_VERSION_MAJOR 0
#define RNNJIT_VERSION_MINOR 7
#define RNNJIT_VERSION_PATCH 0

typedef enum rnnjit_status {
  RNNJIT_STATUS_OK = 0,
  RNNJIT_STATUS_INVALID_ARGUMENT = 1, /* NULL handle or buffer, wrong size, bad value, wrong call order */
  RNNJIT_STATUS_UNSUPPORTED = 2,      /* valid request that rnnjit does not implement (message says what) */
  RNNJIT_STATUS_OUT_OF_MEMORY = 3,
  RNNJIT_STATUS_INTERNAL = 4          /* a bug in rnnjit: please report the message */
} rnnjit_status_t;

typedef enum rnnjit_cell {
  RNNJIT_CELL_RNN_RELU = 0,
  RNNJIT_CELL_RNN_TANH = 1,
  RNNJIT_CELL_LSTM = 2,
  RNNJIT_CELL_GRU = 3, /* the linear-before-reset GRU of PyTorch, cuDNN and MXNet */
  /* ONNX's default GRU (linear_before_reset=0): n = tanh(W_in x + b_in + W_hn (r * h) + b_hn);
   * same parameters as RNNJIT_CELL_GRU; inference and training. */
  RNNJIT_CELL_GRU_RESET_BEFORE = 4,
  RNNJIT_CELL_RNN_SIGMOID = 5 /* h = sigmoid(...): oneDNN's eltwise_logistic, ONNX's Sigmoid activation */
} rnnjit_cell_t;

typedef enum rnnjit_direction {
  RNNJIT_DIRECTION_FORWARD = 0,
  RNNJIT_DIRECTION_BIDIRECTIONAL = 1,
  RNNJIT_DIRECTION_REVERSE = 2, /* one direction reading the sequence from its last step (ONNX "reverse") */
  /* Bidirectional, the two directions' h summed (oneDNN's bidirectional_sum): y and each layer's
   * output are [T, N, S], and layers above the first read S columns. */
  RNNJIT_DIRECTION_BIDIRECTIONAL_SUM = 3
} rnnjit_direction_t;

/* What the GEMMs may round their inputs to (Options::fpmath in the C++ API; oneDNN's fpmath_mode). */
typedef enum rnnjit_fpmath {
  RNNJIT_FPMATH_STRICT = 0, /* FP32 throughout */
  /* Inference GEMMs on the weights may read bf16 copies of their inputs on AMX-BF16 tiles,
   * summing in FP32 (gate math, states and outputs stay FP32); FP32 where the CPU has no AMX,
   * and in training. */
  RNNJIT_FPMATH_BF16 = 1
} rnnjit_fpmath_t;

/* Quantized inference (Options::quantize in the C++ API). */
typedef enum rnnjit_quantize {
  RNNJIT_QUANTIZE_NONE = 0,
  /* Inference only: the GEMMs on the weights multiply int8 weights (a scale per gate row,
   * quantized once as they are packed) by x and h quantized per row to uint8 as each GEMM reads
   * them, summing in int32 on AMX-INT8, AVX512-VNNI, AVX-VNNI or AVX2 (there with activations
   * of 7 bits); gate math, states and outputs stay FP32. Where the CPU has no int8 unit, bf16 or FP32 (the plan's notes say why). Preparing a training
   * execution fails with INVALID_ARGUMENT. */
  RNNJIT_QUANTIZE_INT8_DYNAMIC = 1
} rnnjit_quantize_t;

typedef enum rnnjit_mode {
  RNNJIT_MODE_INFERENCE = 0,
  RNNJIT_MODE_TRAINING = 1 /* forward keeps a reserve for backward */
} rnnjit_mode_t;

/* Struct fields and parameters that take these enums are int32_t: a fixed size in the ABI, and
 * any value a caller stores is defined behaviour (out-of-range values are INVALID_ARGUMENT). */

/* ONNX's activation functions of RNN, GRU and LSTM (rnnjit_config_t.activations), with ONNX's
 * alpha and beta: Affine alpha*x + beta, LeakyRelu x >= 0 ? x : alpha*x, ThresholdedRelu
 * x > alpha ? x : 0, ScaledTanh alpha*tanh(beta*x), HardSigmoid min(max(alpha*x + beta, 0), 1),
 * Elu x >= 0 ? x : alpha*(exp(x) - 1); Relu, Tanh, Sigmoid, Softsign x/(1+|x|) and Softplus
 * log(1+exp(x)) take neither (alpha and beta 0). */
typedef enum rnnjit_activation_kind {
  RNNJIT_ACTIVATION_STANDARD = 0, /* the cell's own function for that role */
  RNNJIT_ACTIVATION_RELU = 1,
  RNNJIT_ACTIVATION_TANH = 2,
  RNNJIT_ACTIVATION_SIGMOID = 3,
  RNNJIT_ACTIVATION_AFFINE = 4,
  RNNJIT_ACTIVATION_LEAKY_RELU = 5,
  RNNJIT_ACTIVATION_THRESHOLDED_RELU = 6,
  RNNJIT_ACTIVATION_SCALED_TANH = 7,
  RNNJIT_ACTIVATION_HARD_SIGMOID = 8,
  RNNJIT_ACTIVATION_ELU = 9,
  RNNJIT_ACTIVATION_SOFTSIGN = 10,
  RNNJIT_ACTIVATION_SOFTPLUS = 11
} rnnjit_activation_kind_t;

typedef struct rnnjit_activation {
  int32_t kind; /* an rnnjit_activation_kind_t */
  float alpha;  /* finite; 0 for a function that takes none */
  float beta;   /* finite; 0 for a function that takes none */
} rnnjit_activation_t;

typedef struct rnnjit_rnn rnnjit_rnn_t;
typedef struct rnnjit_execution rnnjit_execution_t;

typedef struct rnnjit_config {
  int32_t cell;                 /* an rnnjit_cell_t */
  int64_t input_size;           /* I, > 0 */
  int64_t hidden_size;          /* H, > 0 */
  int64_t num_layers;           /* L, > 0 */
  int32_t direction;            /* an rnnjit_direction_t: D = 2 for both bidirectional ones, else 1 */
  int32_t threads;              /* worker threads; 0: RNNJIT_NUM_THREADS if set, else all hardware threads */
  /* Features, all off when zero (a zero-initialized struct is a plain network): */
  int64_t proj_size;            /* LSTM projection P, 0 < P < H: h = W_hr (o * tanh(c)); S = P (else S = H) */
  float cell_clip;              /* LSTM: c clamped to [-cell_clip, cell_clip] each step (cuDNN's clip) */
  float dropout;                /* training: probability of dropping each output of a layer below the top */
  int32_t batch_first;          /* nonzero: x, y, dx, dy are [N, T, *] */
  /* Every gate's pre-activation (biases and peepholes included) clamped to [-gate_clip, gate_clip]
   * before its activation, in every cell (ONNX's clip; not cell_clip, cuDNN's clip of c). */
  float gate_clip;
  /* LSTM, nonzero: peepholes (ONNX's P): i and f also see P_i * c_{t-1} and P_f * c_{t-1}, o sees
   * P_o * c_t. The weights gain a block weight_peephole_l{k}[_reverse] [3, H] (rows P_i, P_f, P_o)
   * after the others of each layer and direction. */
  int32_t peephole;
  int32_t input_forget;         /* LSTM, nonzero: f = 1 - i (ONNX's input_forget=1); f's weights stay, unused */
  /* Nonzero: no bias parameters (PyTorch's bias=False): the weights have no bias_ih/bias_hh
   * blocks and the gates add no bias. */
  int32_t no_bias;
  /* Bidirectional, nonzero: each direction is a stack of its own (layer l's forward direction
   * reads only layer l-1's forward h, its reverse only the reverse h; weight_ih above layer 0 is
   * [G*H, S]), merged into y only at the top: a oneDNN RNN primitive of several bidirectional
   * layers. Zero: every layer reads the whole output of the one below (PyTorch, cuDNN). */
  int32_t independent_stacks;
  int32_t fpmath;               /* an rnnjit_fpmath_t (0: strict FP32) */
  /* RNNJIT_CELL_RNN_RELU: the slope below zero, finite and >= 0 (leaky ReLU: oneDNN's alpha,
   * ONNX's LeakyRelu); 0: plain ReLU. */
  float relu_alpha;
  int32_t quantize;             /* an rnnjit_quantize_t (0: none) */
  /* ONNX's activations [direction][role] (role 0: f, LSTM's i, f, o, GRU's r, z, the RNN's one
   * function; 1: g, LSTM's cell input, GRU's n; 2: h, LSTM's h = o * h(c)); all zero
   * (RNNJIT_ACTIVATION_STANDARD) is the cell's own. Inference only (CPU or CUDA): a training
   * execution of a network with others than the cell's own is UNSUPPORTED. Direction 1 only when
   * bidirectional, roles the cell lacks stay zero (else INVALID_ARGUMENT). */
  rnnjit_activation_t activations[2][3];
} rnnjit_config_t;

/* Element counts of one call's tensors (see rnnjit_execution_tensor_sizes). */
typedef struct rnnjit_tensor_sizes {
  size_t x;       /* T*N*I */
  size_t y;       /* T*N*D*S (T*N*S with the directions summed) */
  size_t state;   /* L*D*N*S: each of hx, hy, dhy, dhx */
  size_t weights; /* the canonical weight buffer (and dweights) */
  size_t cell_state; /* L*D*N*H: each of cx, cy, dcy, dcx (LSTM) */
} rnnjit_tensor_sizes_t;

/* The message of the last failing call of this thread ("" if the last call succeeded). The
 * pointer stays valid until this thread's next call of this API. Never NULL. */
const char* rnnjit_last_error(void);
/* "OK", "INVALID_ARGUMENT", "UNSUPPORTED", "OUT_OF_MEMORY", "INTERNAL" ("UNKNOWN" otherwise). */
const char* rnnjit_status_string(int32_t status);
/* "0.7.0": the library's version (compare with the RNNJIT_VERSION_* of the header you compiled). */
const char* rnnjit_version(void);

/* ---- network ---- */

/* Validates the configuration and creates a network. *rnn is NULL on failure. */
rnnjit_status_t rnnjit_rnn_create(const rnnjit_config_t* config, rnnjit_rnn_t** rnn);
void rnnjit_rnn_destroy(rnnjit_rnn_t* rnn); /* NULL is a no-op */

/* Elements of the canonical weight buffer. */
rnnjit_status_t rnnjit_rnn_weights_size(const rnnjit_rnn_t* rnn, size_t* elements);
/* Offset and element count of one block of the canonical buffer, by its PyTorch name
 * ("weight_ih_l0", "bias_hh_l1_reverse", ...). */
rnnjit_status_t rnnjit_rnn_weight_block(const rnnjit_rnn_t* rnn, const char* name, size_t* offset, size_t* elements);

/* ---- execution ---- */

/* Plans and compiles for one shape (seq_len T, batch N) and mode. *execution is NULL on failure. */
rnnjit_status_t rnnjit_execution_create(const rnnjit_rnn_t* rnn, int64_t seq_len, int64_t batch,
                                        int32_t mode /* an rnnjit_mode_t */, rnnjit_execution_t** execution);
void rnnjit_execution_destroy(rnnjit_execution_t* execution); /* NULL is a no-op */

rnnjit_status_t rnnjit_execution_tensor_sizes(const rnnjit_execution_t* execution, rnnjit_tensor_sizes_t* sizes);
/* Bytes of scratch (free between calls), of the reserve kept from forward training to backward
 * (0 in inference) and of the packed weights (0 when the plan packs nothing). Buffers passed
 * instead of the execution's own must have at least (workspace, reserve) or exactly (packed)
 * these sizes; any alignment works (each includes the slack to start its data at a 64-byte
 * boundary). */
rnnjit_status_t rnnjit_execution_workspace_size(const rnnjit_execution_t* execution, size_t* bytes);
rnnjit_status_t rnnjit_execution_reserve_size(const rnnjit_execution_t* execution, size_t* bytes);
rnnjit_status_t rnnjit_execution_packed_weights_size(const rnnjit_execution_t* execution, size_t* bytes);

/* Shapes are for sequence-major tensors (batch_first: x, y, dx, dy are [N, T, *]); S is the
 * width of h: proj_size with a projection, else H. */
typedef struct rnnjit_forward_io {
  const float* x; size_t x_size;    /* [T, N, I], required */
  const float* hx; size_t hx_size;  /* [L*D, N, S] or not given (zeros) */
  const float* cx; size_t cx_size;  /* LSTM only: [L*D, N, H] or not given (zeros) */
  float* y; size_t y_size;          /* [T, N, D*S], required */
  float* hy; size_t hy_size;        /* [L*D, N, S] or not given (not written) */
  float* cy; size_t cy_size;        /* LSTM only: [L*D, N, H] or not given (not written) */
  /* From rnnjit_pack_weights with these weights, or not given (this call packs them). */
  const void* packed_weights; size_t packed_weights_bytes;
  /* Caller-owned reserve (training only) and workspace, or not given (the execution's own). */
  void* reserve; size_t reserve_bytes;
  void* workspace; size_t workspace_bytes;
  /* Variable-length sequences: N lengths in [1, T] or not given (all T). Past its length an
   * element's y is zero and its hy/cy are its state at its own last step. */
  const int32_t* seq_lengths; size_t seq_lengths_size;
  uint64_t dropout_seed;            /* dropout masks are a function of this seed (training) */
} rnnjit_forward_io_t;

typedef struct rnnjit_backward_data_io {
  const float* dy; size_t dy_size;    /* [T, N, D*S], required */
  const float* dhy; size_t dhy_size;  /* [L*D, N, S] or not given (zeros) */
  const float* dcy; size_t dcy_size;  /* LSTM only, or not given (zeros) */
  float* dx; size_t dx_size;          /* [T, N, I], required */
  float* dhx; size_t dhx_size;        /* [L*D, N, S] or not given (not written) */
  float* dcx; size_t dcx_size;        /* LSTM only, or not given (not written) */
  void* reserve; size_t reserve_bytes;  /* the one forward used, or not given (the execution's own) */
  void* workspace; size_t workspace_bytes;
} rnnjit_backward_data_io_t;

typedef struct rnnjit_backward_weights_io {
  const float* x; size_t x_size;              /* the forward call's x */
  float* dweights; size_t dweights_size;      /* canonical layout, rnnjit_rnn_weights_size elements */
  int accumulate;                             /* nonzero: add into dweights instead of overwriting it */
  const void* reserve; size_t reserve_bytes;  /* the one forward and backward_data used, or not given */
  void* workspace; size_t workspace_bytes;
} rnnjit_backward_weights_io_t;

/* Packs weights into the layout of the generated GEMMs (rnnjit_forward_io_t.packed_weights):
 * inference callers whose weights do not change pack once. packed_bytes must equal
 * rnnjit_execution_packed_weights_size (nothing to do when that is 0). Any alignment of packed
 * works (a header records where the 64-byte-aligned panels start); forward refuses a buffer
 * this did not write, or wrote for a plan with another layout. */
rnnjit_status_t rnnjit_pack_weights(const rnnjit_execution_t* execution, const float* weights, size_t weights_size,
                                    void* packed, size_t packed_bytes);

/* Forward inference or forward training, as the execution was created for. Training keeps
 * what backward needs in the reserve. */
rnnjit_status_t rnnjit_forward(rnnjit_execution_t* execution, const float* weights, size_t weights_size,
                               const rnnjit_forward_io_t* io);
/* Training only, after rnnjit_forward: consumes the reserve (it overwrites the stored gates with
 * their gradients), so call forward again before the next backward_data. */
rnnjit_status_t rnnjit_backward_data(rnnjit_execution_t* execution, const float* weights, size_t weights_size,
                                     const rnnjit_backward_data_io_t* io);
/* Training only, after rnnjit_backward_data: writes (or accumulates into) dweights. */
rnnjit_status_t rnnjit_backward_weights(rnnjit_execution_t* execution, const rnnjit_backward_weights_io_t* io);

/* ---- ONNX operators: RNN, GRU, LSTM (opset 14 semantics) ----
 *
 * An ONNX node maps to a one-layer rnnjit network:
 *   rnnjit_onnx_config(&attrs, I, &config);        rnnjit_rnn_create(&config, &rnn);
 *   rnnjit_onnx_import_weights(&attrs, I, W, R, B, P -> canonical weights) (once per model)
 *   rnnjit_execution_create(rnn, T, N, RNNJIT_MODE_INFERENCE, &ex);         (once per shape)
 *   rnnjit_onnx_forward(ex, &attrs, weights, &io);                          (per run)
 * A zero-initialized rnnjit_onnx_attributes_t holds ONNX's defaults (set op and hidden_size).
 * Supported: direction forward, reverse and bidirectional; layout 0 and 1; sequence_lens in
 * [0, T] (Y zero past an element's length, Y_h/Y_c at its last step; an element of length 0 has
 * all-zero Y, Y_h and Y_c, as in onnxruntime); every activation function ONNX names (Relu,
 * Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign,
 * Softplus; names in any case, a list for one direction serving both), read as onnxruntime reads
 * them: activation_alpha and activation_beta are consumed in the list's order by the functions
 * that take them, and those left without one take onnxruntime's default (LeakyRelu 0.01,
 * HardSigmoid 0.2 and 0.5, Elu 1, any other 0). An RNN whose directions all use Tanh, Relu,
 * Sigmoid or LeakyRelu with alpha >= 0 is RNNJIT_CELL_RNN_TANH, _RELU, _SIGMOID or _RELU with
 * config.relu_alpha (generated gate kernels); any other function, where it is not the cell's own,
 * is in config.activations (inference only; generated gate kernels compute it); GRU with
 * linear_before_reset=1 (RNNJIT_CELL_GRU) and 0 (ONNX's default, RNNJIT_CELL_GRU_RESET_BEFORE);
 * clip, for every op (config.gate_clip: each gate's pre-activation, biases and peepholes
 * included, is clamped to [-clip, clip]); LSTM peepholes
 * (input P: attrs.has_peepholes, config.peephole) and input_forget=1 (config.input_forget);
 * B absent (zeros).
 * Peepholes are part of the weights: a node with input P is described with attrs.has_peepholes
 * set, and its P goes to rnnjit_onnx_import_weights with W, R and B. rnnjit_onnx_io_t.P is not
 * an input of the computation: when given it must equal the peepholes the weights hold (the
 * imported P, or zeros for a network without peepholes), else INVALID_ARGUMENT.
 * INVALID_ARGUMENT, besides values ONNX does not allow: clip not > 0 and finite; has_peepholes
 * or input_forget on another op than LSTM; has_peepholes without P at the import, or a nonzero P
 * without has_peepholes.
 * INVALID_ARGUMENT also for an activation name ONNX does not define.
 * RNNJIT_STATUS_UNSUPPORTED, with a message naming the attribute, for: activation_alpha or
 * activation_beta with more entries than the activations read (onnxruntime ignores the rest),
 * and alpha or beta values that are not finite. */

typedef enum rnnjit_onnx_op { RNNJIT_ONNX_RNN = 0, RNNJIT_ONNX_GRU = 1, RNNJIT_ONNX_LSTM = 2 } rnnjit_onnx_op_t;

typedef struct rnnjit_onnx_attributes {
  int32_t op;                                     /* an rnnjit_onnx_op_t */
  int64_t hidden_size;                            /* required, > 0 */
  const char* direction;                          /* NULL or "forward", "bidirectional", "reverse" */
  int64_t layout;                                 /* 0: X [T, N, I]; 1: batch-first X [N, T, I] */
  int64_t linear_before_reset;                    /* GRU only */
  int64_t input_forget;                           /* LSTM only: 0 or 1 (f = 1 - i) */
  int has_peepholes;                              /* LSTM: nonzero when the node has input P */
  int has_clip; float clip;                       /* clip given (has_clip nonzero): > 0 */
  const char* const* activations; size_t activations_count; /* NULL, 0: the defaults */
  const float* activation_alpha; size_t activation_alpha_count;
  const float* activation_beta; size_t activation_beta_count;
} rnnjit_onnx_attributes_t;

/* The network equivalent to the node, for input size I (X's last dimension), num_layers 1 and
 * threads 0. UNSUPPORTED or INVALID_ARGUMENT for the attributes listed above. */
rnnjit_status_t rnnjit_onnx_config(const rnnjit_onnx_attributes_t* attrs, int64_t input_size, rnnjit_config_t* config);

/* ONNX W [D, G*H, I], R [D, G*H, H], B [D, 2*G*H] (or B NULL, 0: zeros) and P [D, 3*H] into the
 * canonical buffer of the network of rnnjit_onnx_config (weights_size: rnnjit_rnn_weights_size).
 * P (LSTM peepholes) is required when attrs.has_peepholes is set; otherwise it is NULL, 0 (or all
 * zeros, which is the same network). Gate orders are converted (ONNX: LSTM i,o,f,c and P's rows
 * i,o,f; GRU z,r,h), B's halves go to bias_ih and bias_hh, P to weight_peephole (rows i,f,o). */
rnnjit_status_t rnnjit_onnx_import_weights(const rnnjit_onnx_attributes_t* attrs, int64_t input_size,
                                           const float* W, size_t W_size, const float* R, size_t R_size,
                                           const float* B, size_t B_size, const float* P, size_t P_size,
                                           float* weights, size_t weights_size);

/* ONNX inputs and outputs of one run. Shapes for layout 0 (layout 1 in brackets):
 *   X [T, N, I] ([N, T, I]), initial_h/initial_c [D, N, H] ([N, D, H]),
 *   Y [T, D, N, H] ([N, T, D, H]), Y_h/Y_c [D, N, H] ([N, D, H]).
 * Every output is optional (not given: not written). */
typedef struct rnnjit_onnx_io {
  const float* X; size_t X_size;
  const int32_t* sequence_lens; size_t sequence_lens_size; /* [N] or not given */
  const float* initial_h; size_t initial_h_size;
  const float* initial_c; size_t initial_c_size;           /* LSTM only */
  /* LSTM only: [D, 3*H] or not given. Peepholes come from the weights (rnnjit_onnx_import_weights);
   * a P given here must equal them (zeros for a network without peepholes). */
  const float* P; size_t P_size;
  /* sequence_lens above: [N] lengths in [0, T]. */
  float* Y; size_t Y_size;
  float* Y_h; size_t Y_h_size;
  float* Y_c; size_t Y_c_size;                             /* LSTM only */
  const void* packed_weights; size_t packed_weights_bytes; /* as in rnnjit_forward_io_t */
} rnnjit_onnx_io_t;

/* Runs the node on an execution of the network from rnnjit_onnx_config (T and N are the
 * execution's), with canonical weights from rnnjit_onnx_import_weights. Layout conversions
 * (batch-first, Y's [T, D, N, H]) are copies through buffers the execution keeps; layout 0 with
 * one direction runs without any copy. */
rnnjit_status_t rnnjit_onnx_forward(rnnjit_execution_t* execution, const rnnjit_onnx_attributes_t* attrs,
                                    const float* weights, size_t weights_size, const rnnjit_onnx_io_t* io);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RNNJIT_H */
