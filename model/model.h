/* model.h — a loaded model: config, weights and tokenizer; read-only once loaded.
 *
 * A dmt_model is shared by every worker thread; per-worker buffers (activations,
 * KV caches) live in a dmt_state (forward.h). Weights live in memory the model owns
 * (copied, widened or packed at load); the model file is closed once loaded, so
 * replacing or truncating it cannot affect a loaded model.
 */
#ifndef DEEPMT_MODEL_MODEL_H
#define DEEPMT_MODEL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "model/config.h"

struct dmt_tokenizer;
struct dmt_kernels;
struct dmt_shortlist;

/* How a linear layer's weight matrix is stored (model/gemm.h). */
typedef enum {
    DMT_LAYOUT_ROWS = 0,     /* row-major [out][in] floats; products through OpenBLAS */
    DMT_LAYOUT_PACKED_F32,   /* panels of output columns, F32 (AVX2, AVX-512) */
    DMT_LAYOUT_PACKED_BF16,  /* panels of output columns, bfloat16 pairs (AVX-512 BF16) */
    DMT_LAYOUT_PACKED_I8,    /* panels of output columns, int8 quads + per-column scales */
} dmt_weight_layout;

/* The arithmetic of the matrix products: F32 (the library's default), BF16 or INT8
 * (faster, translations differ slightly), or AUTO: the fastest one the model
 * directory vouches for (dmt_precision_choose), what `serve` and `translate` run. */
typedef enum { DMT_PRECISION_F32 = 0, DMT_PRECISION_BF16, DMT_PRECISION_INT8, DMT_PRECISION_AUTO } dmt_precision;

/* The quality bar a precision_checks entry of config.json must pass for AUTO to take
 * that precision: BLEU within 0.3 of F32 on average, no direction worse by 0.8. */
#define DMT_PRECISION_MEAN_DROP_LIMIT 0.3f
#define DMT_PRECISION_WORST_DROP_LIMIT 0.8f

typedef struct {
    const float *weight; /* [out][in] when layout == DMT_LAYOUT_ROWS, else NULL */
    const void *packed;  /* the packed panels otherwise */
    const float *bias;   /* [out], NULL when the layer has none */
    int out, in;
    dmt_weight_layout layout;
    const struct dmt_kernels *kernels; /* the level the packed panels are for (NULL: rows) */
} dmt_linear;

typedef struct {
    const float *weight, *bias; /* [d_model] gamma, beta */
} dmt_norm_weights;

typedef struct {
    dmt_linear q, k, v, out;      /* {self_attn,encoder_attn}.{q,k,v,out}_proj */
} dmt_attention_weights;

typedef struct {
    dmt_attention_weights self_attn;     /* layers.{i}.self_attn */
    dmt_norm_weights self_attn_norm;       /* layers.{i}.self_attn_layer_norm */
    dmt_attention_weights cross_attn;    /* layers.{i}.encoder_attn (decoder only) */
    dmt_norm_weights cross_attn_norm;      /* layers.{i}.encoder_attn_layer_norm (decoder only) */
    dmt_linear fc1;                      /* layers.{i}.fc1 [ffn, d] */
    dmt_linear fc2;                      /* layers.{i}.fc2 [d, ffn] */
    dmt_norm_weights final_norm;           /* layers.{i}.final_layer_norm */
} dmt_layer_weights;

typedef struct {
    const float *embed_tokens;           /* {encoder,decoder}.embed_tokens.weight [vocab, d]; NULL when
                                            the table is tied to a packed output projection: rows
                                            are then read from it (dmt_linear_row) */
    const float *positions;              /* [max_positions + offset, d]: learned or sinusoid table */
    dmt_norm_weights layernorm_embedding;  /* optional (weight NULL when absent) */
    dmt_norm_weights layer_norm;           /* final norm, pre-LN only (weight NULL otherwise) */
    dmt_layer_weights *layers;
    int n_layers;
    float alpha;                         /* residual scale (1 unless deepnorm) */
} dmt_stack_weights;

typedef struct dmt_model {
    dmt_config cfg;
    dmt_stack_weights encoder, decoder;
    dmt_linear output_projection;        /* [vocab, d]: decoder.output_projection or tied, no bias */
    dmt_weight_layout layout;            /* of every linear layer */
    dmt_precision precision;             /* the products' arithmetic (never AUTO after a load) */
    char precision_reason[192];          /* why that one ("config.json vouches: ..."), for ready lines */
    const struct dmt_kernels *kernels;   /* the kernel level it runs (model/kernels/kernels.h) */
    struct dmt_tokenizer *tokenizer;     /* NULL when loaded ids-only */
    const signed char *digit_of;         /* [vocab] the digit a piece writes ("7", or the byte <0x37>), -1 for
                                            any other; NULL unless decoding.copy_numbers (beam.h) */
    const int *digit_ids;                /* [n_digit_ids] the pieces with digit_of >= 0 */
    int n_digit_ids;
    /* decoding.pass_through (model/passthrough.h): what the model cannot spell */
    unsigned char missing_ascii[128];    /* 1: a printable ASCII character the vocabulary spells only as
                                            byte fallback or unk ('<' in the default model's), or one
                                            decoding.pass_through_characters names */
    uint64_t scripts;                    /* the scripts (model/scripts.h) its languages are written in; 0: a
                                            language whose script is not known, and no script test */
    uint32_t lone_letters;               /* bit c - 'a': an ASCII letter that alone is a word in none of its
                                            languages ("x", "n"); 0: a language the table does not know */
    struct dmt_shortlist *shortlist;     /* MODEL_DIR/shortlist.bin (model/shortlist.h); NULL when the
                                            directory has none or the load options turn it off */
    /* load bookkeeping */
    struct dmt_safetensors *file;        /* open during the load only; NULL afterwards */
    void **owned;                        /* widened copies and tables, freed with the model */
    int n_owned, cap_owned;
    size_t weight_bytes_file;            /* bytes of tensor data in the file */
    size_t weight_bytes_f32;             /* bytes the weights would take as F32 */
    size_t weight_bytes_memory;          /* bytes they take as loaded (BF16 packing halves the products') */
    long long n_params;
    char dtype_summary[32];              /* "F16", "F32", "mixed" */
} dmt_model;

typedef struct {
    int ids_only; /* 1: no sentencepiece.model needed (token-id use: tests, scoring) */
    dmt_precision precision; /* of the matrix products; BF16 needs AVX-512 BF16; a file
                                with int8 weights runs INT8 unless BF16 is asked for;
                                AUTO: dmt_precision_choose */
    int no_shortlist;  /* 1: ignore MODEL_DIR/shortlist.bin (score the whole vocabulary) */
} dmt_load_options;

/* "f32", "bf16", "int8" ("auto" for AUTO). */
const char *dmt_precision_name(dmt_precision p);

/* What AUTO runs on kernel level k: a file with int8 weights (file_int8) runs INT8;
 * else INT8 where config.json's int8 check passes the quality bar and the level has
 * fast int8 products (avx2 and above), else BF16 where its check passes and the
 * level has BF16 products, else F32. why (may be NULL) says which and why. */
dmt_precision dmt_precision_choose(const dmt_config *cfg, const struct dmt_kernels *k, int file_int8, char *why,
                                   size_t whylen);

/* Loads MODEL_DIR/{config.json, model.safetensors, sentencepiece.model}, validating
 * every tensor against the config. NULL with a message naming the file/tensor. */
dmt_model *dmt_model_load(const char *dir, dmt_load_options opts, char *err, size_t errlen);
void dmt_model_free(dmt_model *m);

#endif
