/* model.c — load a model directory: config.json, model.safetensors, sentencepiece.model.
 *
 * Every tensor the config implies must be present with its exact shape, and nothing
 * else may be: a checkpoint that does not match its config is refused, never guessed.
 *
 * Validation comes before allocation: a first pass checks every shape against the
 * file without allocating anything sized by the config (a config.json claiming
 * 4,000,000 layers is refused at the first missing tensor, before a byte is spent on
 * them), and tables the loader computes are capped by the file's size. Every tensor
 * the model keeps is copied out of the file's mapping and the file is closed once
 * loaded: a model file rewritten while the model is in use (cp new.safetensors
 * model.safetensors) cannot affect it.
 */
#include "base/busguard.h"
#include "base/fault.h"
#include "model/model.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "model/beam.h"
#include "model/gemm.h"
#include "model/kernels/kernels.h"
#include "model/safetensors.h"
#include "model/scripts.h"
#include "model/shortlist.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    dmt_model *m;
    const char *path;      /* safetensors path, for messages */
    unsigned char *used;   /* per file tensor: bound yet? */
    int sizing;            /* 1: first pass, only validates shapes and adds up arena_need */
    size_t arena_need;     /* bytes the arena needs (sizing pass) */
    int n_f32, n_f16, n_bf16, n_i8;
    unsigned char *arena;  /* room for every widened, copied or packed tensor (see make_arena) */
    size_t arena_left;     /* bytes */
    const float *sinusoid; /* the sinusoid table, shared by both stacks (same rows, d_model) */
    float *rows;           /* widening buffer for packing: PACK_ROWS rows of the widest layer */
    size_t rows_cap;       /* floats */
    char *err;
    size_t errlen;
} loader;

/* Room for one more entry in m->owned; 0 when out of memory. */
static int m_own_count_ok(dmt_model *m) {
    if (m->n_owned == m->cap_owned) {
        int cap = m->cap_owned ? 2 * m->cap_owned : 64;
        void **p = dmt_fault_hit() ? NULL : realloc(m->owned, (size_t)cap * sizeof *p);
        if (!p) return 0;
        m->owned = p;
        m->cap_owned = cap;
    }
    return 1;
}

static void *own(dmt_model *m, size_t bytes) {
    if (!m_own_count_ok(m)) return NULL;
    void *buf = dmt_fault_hit() ? NULL : malloc(bytes ? bytes : 1);
    if (buf) m->owned[m->n_owned++] = buf;
    return buf;
}

/* Rows the loader widens and packs at a time (its widening buffer's height). */
#define PACK_ROWS 32

/* Tensors in the arena start on a 64-byte boundary (cache line, any SIMD width: the
 * packed kernels use aligned loads). */
#define ARENA_ALIGN 64
#define HUGE_PAGE ((size_t)2 << 20)

static size_t arena_round(size_t bytes) { return (bytes + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1); }

/* Stands for a tensor during the sizing pass; never read. */
static const float sizing_placeholder[1];

/* One block for all the tensors the loader widens, copies or packs, sized by the
 * sizing pass, 2 MiB-aligned and marked for transparent huge pages: filling 40 MB of
 * fresh 4 KiB pages costs one page fault each (10,000 for the default model, most of
 * its load time), 2 MiB pages cost 20; the forward pass also takes fewer TLB misses.
 * The memory is the sum of the tensors plus at most 2 MiB of rounding. 0, or -1 when
 * out of memory. */
static int make_arena(loader *L) {
    if (L->arena_need == 0) return 0;
    size_t bytes = L->arena_need, align = bytes >= HUGE_PAGE ? HUGE_PAGE : ARENA_ALIGN;
    bytes = (bytes + align - 1) & ~(align - 1);
    unsigned char *a = NULL;
    if (m_own_count_ok(L->m) && !dmt_fault_hit()) a = aligned_alloc(align, bytes);
    if (!a) {
        snprintf(L->err, L->errlen, "%s: out of memory for %zu MiB of weights", L->path, bytes >> 20);
        return -1;
    }
    L->m->owned[L->m->n_owned++] = a;
#ifdef MADV_HUGEPAGE
    if (align == HUGE_PAGE) madvise(a, bytes, MADV_HUGEPAGE); /* a hint: 4 KiB pages work too */
#endif
    L->arena = a;
    L->arena_left = bytes;
    return 0;
}

/* bytes from the arena (the sizing pass counted every request, so it always has room;
 * the own() fallback only guards against a miscount). */
static void *take(loader *L, size_t bytes) {
    size_t n = arena_round(bytes);
    if (n > L->arena_left) return own(L->m, bytes);
    void *p = L->arena;
    L->arena += n;
    L->arena_left -= n;
    return p;
}

/* Row j's scale of an I8 tensor (its "_scale" tensor; the mapping may be unaligned). */
static float scale_at(const dmt_st_tensor *scale, int64_t j) {
    float f;
    memcpy(&f, (const char *)scale->data + j * 4, sizeof f);
    return f;
}

/* An int8 matrix W [out, in] (docs/model-format.md) comes with "<name>_scale", F32
 * [out], finite and >= 0: W[j][k] = scale[j] * byte. NULL + err otherwise. */
static const dmt_st_tensor *find_scale(loader *L, const dmt_st_tensor *t) {
    char name[512];
    if (t->ndim != 2) {
        snprintf(L->err, L->errlen, "%s: tensor \"%s\" is I8 with %d dimensions; int8 is for weight matrices "
                 "[out, in] only", L->path, t->name, t->ndim);
        return NULL;
    }
    snprintf(name, sizeof name, "%s_scale", t->name);
    const dmt_st_tensor *s = dmt_st_find(L->m->file, name);
    if (!s) {
        snprintf(L->err, L->errlen, "%s: I8 tensor \"%s\" has no scales (missing tensor \"%s\")", L->path, t->name,
                 name);
        return NULL;
    }
    if (s->dtype != DMT_DTYPE_F32) {
        snprintf(L->err, L->errlen, "%s: scales \"%s\" are %s; int8 scales must be F32", L->path, name,
                 dmt_dtype_name(s->dtype));
        return NULL;
    }
    if (s->ndim != 1 || s->shape[0] != t->shape[0]) {
        snprintf(L->err, L->errlen, "%s: scales \"%s\" must have shape [%lld] (one a row of \"%s\"), not %s%lld%s",
                 L->path, name, (long long)t->shape[0], t->name, s->ndim == 1 ? "[" : "a tensor of ",
                 (long long)(s->ndim == 1 ? s->shape[0] : s->ndim), s->ndim == 1 ? "]" : " dimensions");
        return NULL;
    }
    for (int64_t j = 0; j < s->numel; j++) {
        float f = scale_at(s, j);
        if (!(f >= 0 && f <= 3.4e38f)) {
            snprintf(L->err, L->errlen, "%s: scales \"%s\": row %lld has scale %g (must be finite and >= 0)",
                     L->path, name, (long long)j, f);
            return NULL;
        }
    }
    return s;
}

/* The named tensor, checked to have shape [d0] or [d0, d1] (d1 = 0 for 1-D) and
 * counted as bound (real pass). NULL + err if absent or mis-shaped. */
static const dmt_st_tensor *find_tensor(loader *L, const char *name, int64_t d0, int64_t d1) {
    const dmt_st_tensor *t = dmt_st_find(L->m->file, name);
    if (!t) {
        snprintf(L->err, L->errlen, "%s: missing tensor \"%s\"", L->path, name);
        return NULL;
    }
    int want_nd = d1 ? 2 : 1;
    if (t->ndim != want_nd || t->shape[0] != d0 || (d1 && t->shape[1] != d1)) {
        char got[96] = "", want[64];
        for (int i = 0; i < t->ndim; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        if (d1) snprintf(want, sizeof want, "%lld, %lld", (long long)d0, (long long)d1);
        else snprintf(want, sizeof want, "%lld", (long long)d0);
        snprintf(L->err, L->errlen, "%s: tensor \"%s\" has shape [%s], config.json implies [%s]", L->path, name,
                 got, want);
        return NULL;
    }
    const dmt_st_tensor *scale = t->dtype == DMT_DTYPE_I8 ? find_scale(L, t) : NULL;
    if (t->dtype == DMT_DTYPE_I8 && !scale) return NULL;
    if (!L->sizing) {
        L->used[t - dmt_st_tensor_at(L->m->file, 0)] = 1;
        L->m->n_params += t->numel;
        L->m->weight_bytes_file += t->nbytes;
        L->m->weight_bytes_f32 += (size_t)t->numel * 4;
        if (t->dtype == DMT_DTYPE_F32) L->n_f32++;
        else if (t->dtype == DMT_DTYPE_F16) L->n_f16++;
        else if (t->dtype == DMT_DTYPE_BF16) L->n_bf16++;
        else L->n_i8++;
        if (scale) {
            L->used[scale - dmt_st_tensor_at(L->m->file, 0)] = 1;
            L->m->weight_bytes_file += scale->nbytes;
        }
    }
    return t;
}

/* F32 data the packing can read straight from the mapping (no widening buffer). */
static int direct_f32(const dmt_st_tensor *t) {
    return t->dtype == DMT_DTYPE_F32 && ((uintptr_t)t->data & 3) == 0;
}

/* Elements [first, first + n) of t as F32 into dst (I8: scale x byte, a row's scale
 * from its "_scale" tensor), with the model's kernels. */
static void widen(loader *L, float *dst, const dmt_st_tensor *t, size_t first, size_t n) {
    const dmt_kernels *k = L->m->kernels;
    if (t->dtype == DMT_DTYPE_F16) k->f16_to_f32_n(dst, (const uint16_t *)t->data + first, n);
    else if (t->dtype == DMT_DTYPE_BF16) k->bf16_to_f32_n(dst, (const uint16_t *)t->data + first, n);
    else if (t->dtype == DMT_DTYPE_I8) {
        char name[512];
        snprintf(name, sizeof name, "%s_scale", t->name);
        const dmt_st_tensor *scale = dmt_st_find(L->m->file, name); /* checked by find_tensor */
        size_t cols = (size_t)t->shape[1];
        for (size_t i = 0; i < n; i++)
            dst[i] = scale_at(scale, (int64_t)((first + i) / cols)) * ((const int8_t *)t->data)[first + i];
    } else memcpy(dst, (const float *)t->data + first, n * sizeof(float));
}

/* The named tensor as row-major F32 with shape [d0] or [d0, d1], in the arena (widened
 * or copied: never a view of the file, which is closed after loading). NULL + err if
 * absent or mis-shaped. */
static const float *bind(loader *L, const char *name, int64_t d0, int64_t d1) {
    const dmt_st_tensor *t = find_tensor(L, name, d0, d1);
    if (!t) return NULL;
    if (L->sizing) {
        L->arena_need += arena_round((size_t)t->numel * sizeof(float));
        return sizing_placeholder;
    }
    L->m->weight_bytes_memory += (size_t)t->numel * sizeof(float);
    float *wide = take(L, (size_t)t->numel * sizeof(float));
    if (!wide) {
        snprintf(L->err, L->errlen, "%s: out of memory widening \"%s\"", L->path, name);
        return NULL;
    }
    widen(L, wide, t, 0, (size_t)t->numel);
    dmt_st_drop_range(t->data, t->nbytes); /* the file's pages would double the resident memory */
    return wide;
}

/* The named [out, in] tensor packed for the model's product kernels (gemm.h): widened
 * PACK_ROWS rows at a time and scattered into panels, so the row-major matrix never
 * exists in memory beyond one panel; the file's pages are dropped afterwards. */
static int bind_packed(loader *L, dmt_linear *lin, const char *name, int out, int in) {
    const dmt_st_tensor *t = find_tensor(L, name, out, in);
    if (!t) return -1;
    dmt_weight_layout layout = L->m->layout;
    const dmt_kernels *k = L->m->kernels;
    size_t bytes = dmt_gemm_packed_bytes(k, layout, out, in);
    if ((layout == DMT_LAYOUT_PACKED_BF16 || layout == DMT_LAYOUT_PACKED_I8) && in > DMT_GEMM_MAX_IN) {
        snprintf(L->err, L->errlen, "%s: \"%s\" has %d inputs; %s products support at most %d (use f32)", L->path,
                 name, in, layout == DMT_LAYOUT_PACKED_I8 ? "int8" : "bf16", DMT_GEMM_MAX_IN);
        return -1;
    }
    /* int8 bytes from the file go into the panels as they are */
    int as_is = t->dtype == DMT_DTYPE_I8 && layout == DMT_LAYOUT_PACKED_I8;
    if (L->sizing) {
        L->arena_need += arena_round(bytes);
        return 0;
    }
    size_t need_rows = (size_t)PACK_ROWS * (size_t)in;
    if (!direct_f32(t) && !as_is && need_rows > L->rows_cap) {
        float *r = dmt_fault_hit() ? NULL : realloc(L->rows, need_rows * sizeof(float));
        if (!r) goto oom;
        L->rows = r;
        L->rows_cap = need_rows;
    }
    unsigned char *dst = take(L, bytes);
    if (!dst) goto oom;
    memset(dst, 0, bytes); /* the last panel's padding columns (pages are touched anyway) */
    for (int j0 = 0; j0 < out; j0 += PACK_ROWS) {
        int rows = out - j0 < PACK_ROWS ? out - j0 : PACK_ROWS;
        if (as_is) {
            float scales[PACK_ROWS];
            char sname[512];
            snprintf(sname, sizeof sname, "%s_scale", t->name);
            const dmt_st_tensor *scale = dmt_st_find(L->m->file, sname);
            for (int r = 0; r < rows; r++) scales[r] = scale_at(scale, j0 + r);
            dmt_gemm_pack_rows_i8(dst, k, out, in, j0, rows, (const int8_t *)t->data + (size_t)j0 * in, scales);
            continue;
        }
        const float *src = (const float *)t->data + (size_t)j0 * in;
        if (!direct_f32(t)) {
            widen(L, L->rows, t, (size_t)j0 * in, (size_t)rows * in);
            src = L->rows;
        }
        dmt_gemm_pack_rows(dst, k, layout, out, in, j0, rows, src);
    }
    dmt_st_drop_range(t->data, t->nbytes);
    L->m->weight_bytes_memory += bytes;
    lin->weight = NULL;
    lin->packed = dst;
    lin->layout = layout;
    lin->kernels = k;
    return 0;
oom:
    snprintf(L->err, L->errlen, "%s: out of memory packing \"%s\"", L->path, name);
    return -1;
}

/* Tensor names are built from short prefixes ("decoder.layers.499.encoder_attn.q_proj");
 * NAME_MAX_LEN leaves room for any suffix, so truncation cannot happen. */
#define NAME_MAX_LEN 256

static int bind_linear(loader *L, dmt_linear *lin, const char *prefix, int out, int in, int has_bias) {
    char name[NAME_MAX_LEN];
    snprintf(name, sizeof name, "%s.weight", prefix);
    lin->layout = DMT_LAYOUT_ROWS;
    lin->packed = NULL;
    if (L->m->layout != DMT_LAYOUT_ROWS) {
        if (bind_packed(L, lin, name, out, in)) return -1;
    } else if (!(lin->weight = bind(L, name, out, in))) {
        return -1;
    }
    lin->bias = NULL;
    if (has_bias) {
        snprintf(name, sizeof name, "%s.bias", prefix);
        if (!(lin->bias = bind(L, name, out, 0))) return -1;
    }
    lin->out = out;
    lin->in = in;
    return 0;
}

static int bind_norm(loader *L, dmt_norm_weights *n, const char *prefix, int d) {
    char name[NAME_MAX_LEN];
    snprintf(name, sizeof name, "%s.weight", prefix);
    if (!(n->weight = bind(L, name, d, 0))) return -1;
    snprintf(name, sizeof name, "%s.bias", prefix);
    if (!(n->bias = bind(L, name, d, 0))) return -1;
    return 0;
}

static int bind_attention(loader *L, dmt_attention_weights *a, const char *prefix, int d) {
    static const char *const proj[] = {"q_proj", "k_proj", "v_proj", "out_proj"};
    dmt_linear *dst[] = {&a->q, &a->k, &a->v, &a->out};
    char name[NAME_MAX_LEN - 16];
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s.%s", prefix, proj[i]);
        if (bind_linear(L, dst[i], name, d, d, 1)) return -1;
    }
    return 0;
}

/* A sinusoid table may always take this much; beyond it, no more than the model file
 * (a real model's weights dwarf its table; a crafted config.json does not get to
 * allocate gigabytes from max_positions x d_model). */
#define SINUSOID_FREE_BYTES ((size_t)64 << 20)

/* fairseq's sinusoidal table: row r = [sin(r f_i) | cos(r f_i)], f_i = exp(-i ln(1e4)/(half-1)).
 * Built once, shared by the encoder and the decoder. */
static const float *sinusoid_table(loader *L, int rows, int d) {
    size_t bytes = (size_t)rows * (size_t)d * sizeof(float), file = dmt_st_file_size(L->m->file);
    if (L->sizing) {
        if (bytes > SINUSOID_FREE_BYTES && bytes > file) {
            snprintf(L->err, L->errlen,
                     "config.json: max_positions + position_offset = %d rows of d_model %d make a %zu MiB sinusoid "
                     "table, more than %s (%zu MiB) and the %zu MiB any model may have",
                     rows, d, bytes >> 20, L->path, file >> 20, SINUSOID_FREE_BYTES >> 20);
            return NULL;
        }
        return sizing_placeholder;
    }
    if (L->sinusoid) return L->sinusoid;
    float *t = own(L->m, bytes);
    if (!t) {
        snprintf(L->err, L->errlen, "out of memory");
        return NULL;
    }
    int half = d / 2;
    double step = log(10000.0) / (half - 1);
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < half; i++) {
            double a = r * exp(-i * step);
            t[(size_t)r * d + i] = (float)sin(a);
            t[(size_t)r * d + half + i] = (float)cos(a);
        }
    return L->sinusoid = t;
}

static int bind_stack(loader *L, dmt_stack_weights *s, const char *which, int n_layers, float alpha,
                      int is_decoder) {
    const dmt_config *c = &L->m->cfg;
    int d = c->d_model;
    char name[NAME_MAX_LEN - 32];
    s->n_layers = n_layers;
    s->alpha = alpha;
    /* the sizing pass binds every layer into one scratch struct: the array is only
     * allocated once the file has been found to hold all n_layers */
    dmt_layer_weights scratch;
    if (!L->sizing) {
        s->layers = own(L->m, (size_t)n_layers * sizeof *s->layers);
        if (!s->layers) { snprintf(L->err, L->errlen, "out of memory"); return -1; }
        memset(s->layers, 0, (size_t)n_layers * sizeof *s->layers);
    }
    int rows = c->max_positions + c->position_offset;
    if (c->positions == DMT_POS_LEARNED) {
        snprintf(name, sizeof name, "%s.embed_positions.weight", which);
        if (!(s->positions = bind(L, name, rows, d))) return -1;
    } else if (!(s->positions = sinusoid_table(L, rows, d))) {
        return -1;
    }
    if (c->layernorm_embedding) {
        snprintf(name, sizeof name, "%s.layernorm_embedding", which);
        if (bind_norm(L, &s->layernorm_embedding, name, d)) return -1;
    }
    if (c->normalization == DMT_NORM_PRE) {
        snprintf(name, sizeof name, "%s.layer_norm", which);
        if (bind_norm(L, &s->layer_norm, name, d)) return -1;
    }
    for (int i = 0; i < n_layers; i++) {
        dmt_layer_weights *w = L->sizing ? &scratch : &s->layers[i];
        char p[96];
        snprintf(p, sizeof p, "%s.layers.%d", which, i);
#define SUB(suffix) (snprintf(name, sizeof name, "%s.%s", p, suffix), name)
        if (bind_attention(L, &w->self_attn, SUB("self_attn"), d) ||
            bind_norm(L, &w->self_attn_norm, SUB("self_attn_layer_norm"), d))
            return -1;
        if (is_decoder && (bind_attention(L, &w->cross_attn, SUB("encoder_attn"), d) ||
                           bind_norm(L, &w->cross_attn_norm, SUB("encoder_attn_layer_norm"), d)))
            return -1;
        if (bind_linear(L, &w->fc1, SUB("fc1"), c->ffn_dim, d, 1) ||
            bind_linear(L, &w->fc2, SUB("fc2"), d, c->ffn_dim, 1) ||
            bind_norm(L, &w->final_norm, SUB("final_layer_norm"), d))
            return -1;
#undef SUB
    }
    return 0;
}

static int bind_all(loader *L) {
    dmt_model *m = L->m;
    const dmt_config *c = &m->cfg;
    int v = c->vocab_size, d = c->d_model;
    dmt_linear *proj = &m->output_projection;
    *proj = (dmt_linear){.out = v, .in = d, .layout = DMT_LAYOUT_ROWS};
    if (m->layout != DMT_LAYOUT_ROWS && c->tie_output) {
        /* the tied table is stored once, packed; embedding rows are read back from it */
        const char *tied = c->share_embeddings ? "encoder.embed_tokens.weight" : "decoder.embed_tokens.weight";
        if (bind_packed(L, proj, tied, v, d)) return -1;
        m->decoder.embed_tokens = NULL;
        if (c->share_embeddings) m->encoder.embed_tokens = NULL;
        else if (!(m->encoder.embed_tokens = bind(L, "encoder.embed_tokens.weight", v, d))) return -1;
    } else {
        if (!(m->encoder.embed_tokens = bind(L, "encoder.embed_tokens.weight", v, d))) return -1;
        if (c->share_embeddings) m->decoder.embed_tokens = m->encoder.embed_tokens;
        else if (!(m->decoder.embed_tokens = bind(L, "decoder.embed_tokens.weight", v, d))) return -1;
        if (c->tie_output) proj->weight = m->decoder.embed_tokens;
        else if (m->layout != DMT_LAYOUT_ROWS) {
            if (bind_packed(L, proj, "decoder.output_projection.weight", v, d)) return -1;
        } else if (!(proj->weight = bind(L, "decoder.output_projection.weight", v, d))) {
            return -1;
        }
    }
    if (bind_stack(L, &m->encoder, "encoder", c->encoder_layers, c->encoder_alpha, 0) ||
        bind_stack(L, &m->decoder, "decoder", c->decoder_layers, c->decoder_alpha, 1))
        return -1;
    if (L->sizing) return 0;
    for (int i = 0; i < dmt_st_count(m->file); i++)
        if (!L->used[i]) {
            snprintf(L->err, L->errlen, "%s: unexpected tensor \"%s\" (not implied by config.json%s)", L->path,
                     dmt_st_tensor_at(m->file, i)->name,
                     c->share_embeddings || c->tie_output ? "; tied tensors are stored once" : "");
            return -1;
        }
    const char *kinds[3] = {"F32", "F16", "BF16"};
    int counts[3] = {L->n_f32, L->n_f16, L->n_bf16}, distinct = 0, last = 0;
    for (int i = 0; i < 3; i++) if (counts[i]) { distinct++; last = i; }
    /* a quantised file: int8 matrices, the rest (biases, norms) in its float type */
    snprintf(m->dtype_summary, sizeof m->dtype_summary, "%s%s", L->n_i8 ? "I8+" : "",
             distinct > 1 ? "mixed" : kinds[last]);
    return 0;
}

/* decoding.copy_numbers: which pieces write one digit. A piece that mixes a digit
 * with anything else ("19", "▁5") would let a number be written past the rule: such
 * a vocabulary is refused. */
static int build_digit_table(dmt_model *m, char *err, size_t errlen) {
    int V = m->cfg.vocab_size, n = 0;
    signed char *dig = own(m, (size_t)V);
    int *ids = own(m, 20 * sizeof *ids);
    if (!dig || !ids) { snprintf(err, errlen, "out of memory"); return -1; }
    for (int id = 0; id < V; id++) {
        const char *p = dmt_tokenizer_id_to_piece(m->tokenizer, id);
        unsigned b = 0;
        dig[id] = -1;
        if (!p) continue;
        if (p[0] >= '0' && p[0] <= '9' && !p[1]) dig[id] = (signed char)(p[0] - '0');
        else if (sscanf(p, "<0x%2X>", &b) == 1 && strlen(p) == 6 && b >= '0' && b <= '9') dig[id] = (signed char)(b - '0');
        else if (strpbrk(p, "0123456789") && !(p[0] == '<' && p[1] == '0' && p[2] == 'x')) {
            snprintf(err, errlen, "config.json: decoding.copy_numbers needs every digit as its own piece, but the "
                                  "vocabulary has \"%s\" (train the vocabulary with tools/train.py spm --split-digits)", p);
            return -1;
        }
        if (dig[id] >= 0 && n < 20) ids[n++] = id;
    }
    m->digit_of = dig;
    m->digit_ids = ids;
    m->n_digit_ids = n;
    return 0;
}

/* decoding.pass_through: the printable ASCII characters the vocabulary lacks or
 * decoding.pass_through_characters names, the letters that are words in none of the
 * model's languages and the scripts of those languages (0 when one is not known). */
static void build_spelling(dmt_model *m) {
    for (int c = 0x21; c < 0x7F; c++) {
        char one = (char)c;
        m->missing_ascii[c] = dmt_tokenizer_spells(m->tokenizer, &one, 1) == 0 ||
                              strchr(m->cfg.decoding.pass_through_characters, c) != NULL;
    }
    uint64_t all = 0;
    uint32_t lone = (1u << 26) - 1;
    for (int i = 0; i < m->cfg.n_languages; i++) {
        const char *words = dmt_language_letter_words(m->cfg.languages[i].code);
        for (const char *w = words; w && *w; w++)
            if (*w >= 'a' && *w <= 'z') lone &= ~(1u << (*w - 'a'));
        if (!words) lone = 0;
    }
    m->lone_letters = m->cfg.n_languages ? lone : 0;
    for (int i = 0; i < m->cfg.n_languages; i++) {
        uint64_t s = dmt_language_scripts(m->cfg.languages[i].code);
        if (!s) return;
        all |= s;
    }
    m->scripts = all;
}

static int check_languages(dmt_model *m, char *err, size_t errlen) {
    for (int i = 0; i < m->cfg.n_languages; i++) {
        const dmt_language *l = &m->cfg.languages[i];
        int id = dmt_tokenizer_piece_to_id(m->tokenizer, l->token);
        if (id < 0) {
            snprintf(err, errlen, "config.json: language \"%s\": token \"%s\" is not in the tokenizer's vocabulary",
                     l->code, l->token);
            return -1;
        }
        if (id != l->id) {
            snprintf(err, errlen, "config.json: language \"%s\": token \"%s\" has id %d in the tokenizer, config says %d",
                     l->code, l->token, id, l->id);
            return -1;
        }
    }
    return 0;
}

/* The number of tensors config.json implies (docs/model-format.md), in 64 bits: a
 * config may claim any number of layers. */
static int64_t implied_tensors(const dmt_config *c) {
    int64_t per_stack = (c->positions == DMT_POS_LEARNED) + 2 * c->layernorm_embedding +
                        2 * (c->normalization == DMT_NORM_PRE);
    return 1 + !c->share_embeddings + !c->tie_output + 2 * per_stack + 16 * (int64_t)c->encoder_layers +
           26 * (int64_t)c->decoder_layers;
}

/* MODEL_DIR/shortlist.bin when there is one: a file that is there but cannot be
 * used fails the load (it would silently cost its speed otherwise). */
static int load_shortlist(dmt_model *m, const char *dir, char *err, size_t errlen) {
    char path[4096];
    struct stat sb;
    if (snprintf(path, sizeof path, "%s/%s", dir, DMT_SHORTLIST_FILE) >= (int)sizeof path) return 0;
    if (lstat(path, &sb) != 0 && errno == ENOENT) return 0;
    m->shortlist = dmt_shortlist_load(path, &m->cfg, err, errlen);
    return m->shortlist ? 0 : -1;
}

dmt_model *dmt_model_load(const char *dir, dmt_load_options opts, char *err, size_t errlen) {
    char path[4096];
    dmt_model *m = dmt_fault_hit() ? NULL : calloc(1, sizeof *m);
    if (!m) { snprintf(err, errlen, "out of memory"); return NULL; }
    struct stat sb;
    if (stat(dir, &sb) || !S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "%s: not a model directory (config.json, model.safetensors, sentencepiece.model)", dir);
        goto fail;
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (dmt_config_load(path, &m->cfg, err, errlen)) goto fail;
    /* decoding defaults every request without options would use: refused now, not on
     * each request */
    dmt_beam_options defaults = dmt_beam_options_default(&m->cfg);
    char why[160];
    if (dmt_beam_options_check(&defaults, why, sizeof why)) {
        snprintf(err, errlen, "%s: \"decoding\": %s", path, why);
        goto fail;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (!(m->file = dmt_st_open(path, err, errlen))) goto fail;
    /* The weights are read from a mapping of the file: if it shrinks meanwhile (a file
     * replaced in place), the read faults with SIGBUS, which the guard turns into this
     * error. L is on the heap: the recovery path needs its pointers after the jump. */
    loader *L = dmt_fault_hit() ? NULL : calloc(1, sizeof *L);
    if (!L) { snprintf(err, errlen, "out of memory"); goto fail; }
    *L = (loader){.m = m, .path = path, .err = err, .errlen = errlen};
    sigjmp_buf bus;
    if (sigsetjmp(bus, 1)) {
        snprintf(err, errlen, "%s: the file changed (it shrank) while the weights were being read; load it again",
                 path);
        free(L->used);
        free(L->rows);
        free(L);
        goto fail;
    }
    dmt_bus_guard_set(&bus);
    L->used = dmt_fault_hit() ? NULL : calloc((size_t)dmt_st_count(m->file) + 1, 1);
    if (!L->used) { snprintf(err, errlen, "out of memory"); goto fail_guarded; }
    if (!(m->kernels = dmt_kernels_select(err, errlen))) goto fail_guarded;
    /* a quantised file runs int8 products unless bf16 is asked for (its weights are
     * int8 anyway: F32 products would only cost time) */
    int file_int8 = 0;
    for (int i = 0; i < dmt_st_count(m->file) && !file_int8; i++)
        file_int8 = dmt_st_tensor_at(m->file, i)->dtype == DMT_DTYPE_I8;
    dmt_precision precision = opts.precision;
    if (precision == DMT_PRECISION_AUTO)
        precision = dmt_precision_choose(&m->cfg, m->kernels, file_int8, m->precision_reason,
                                         sizeof m->precision_reason);
    else if (precision == DMT_PRECISION_F32 && file_int8) {
        precision = DMT_PRECISION_INT8;
        snprintf(m->precision_reason, sizeof m->precision_reason, "the file's weights are int8");
    } else
        snprintf(m->precision_reason, sizeof m->precision_reason, "asked for");
    m->precision = precision;
    int layout = dmt_gemm_layout(m->kernels, precision);
    if (layout < 0) {
        snprintf(err, errlen, "bf16 precision needs a CPU with AVX-512 BF16, which this one lacks (use f32 or int8)");
        goto fail_guarded;
    }
    m->layout = (dmt_weight_layout)layout;
    /* two passes over the same bindings: the first checks every shape and sizes the
     * arena, the second fills it */
    L->sizing = 1;
    int rc = bind_all(L);
    L->sizing = 0;
    int64_t implied = implied_tensors(&m->cfg);
    if (rc && implied > dmt_st_count(m->file)) {
        size_t len = strlen(err);
        snprintf(err + len, errlen - len, " (config.json implies %lld tensors: %d encoder and %d decoder layers; the file has %d)",
                 (long long)implied, m->cfg.encoder_layers, m->cfg.decoder_layers, dmt_st_count(m->file));
    }
    if (!rc) rc = make_arena(L);
    if (!rc) rc = bind_all(L);
    dmt_bus_guard_set(NULL);
    free(L->used);
    free(L->rows);
    free(L);
    if (rc) goto fail;
    /* everything is copied: the model no longer depends on the file */
    dmt_st_close(m->file);
    m->file = NULL;
    if (!opts.ids_only) {
        if (!(m->tokenizer = dmt_tokenizer_load(dir, m->cfg.vocab_size, m->cfg.unk_id, err, errlen))) goto fail;
        if (check_languages(m, err, errlen)) goto fail;
        if (m->cfg.decoding.copy_numbers && build_digit_table(m, err, errlen)) goto fail;
        if (m->cfg.decoding.pass_through) build_spelling(m);
    }
    if (!opts.no_shortlist && load_shortlist(m, dir, err, errlen)) goto fail;
    return m;
fail_guarded:
    dmt_bus_guard_set(NULL);
    free(L->used);
    free(L->rows);
    free(L);
fail:
    dmt_model_free(m);
    return NULL;
}

const char *dmt_precision_name(dmt_precision p) {
    return p == DMT_PRECISION_BF16 ? "bf16" : p == DMT_PRECISION_INT8 ? "int8" : p == DMT_PRECISION_AUTO ? "auto" : "f32";
}

static int check_passes(const dmt_precision_check *c) {
    return c->present && c->mean_bleu_change >= -DMT_PRECISION_MEAN_DROP_LIMIT &&
           c->worst_bleu_change >= -DMT_PRECISION_WORST_DROP_LIMIT;
}

static void describe_check(char *why, size_t len, const char *name, const dmt_precision_check *c) {
    snprintf(why, len, "config.json vouches for %s: BLEU %+.2f on average, %+.2f at worst, over %d direction%s%s%s",
             name, c->mean_bleu_change, c->worst_bleu_change, c->directions, c->directions == 1 ? "" : "s",
             c->test_set[0] ? " of " : "", c->test_set);
}

dmt_precision dmt_precision_choose(const dmt_config *cfg, const dmt_kernels *k, int file_int8, char *why,
                                   size_t whylen) {
    char scratch[8];
    if (!why) why = scratch, whylen = sizeof scratch;
    if (file_int8) {
        snprintf(why, whylen, "the file's weights are int8");
        return DMT_PRECISION_INT8;
    }
    /* int8 is the fastest where products are vectorised (2-4x F32 at avx512vnni, 1.3-1.6x
     * at avx2: docs/benchmarks.md); the generic level's SSSE3 int8 is slower than sgemm */
    if (check_passes(&cfg->check_int8) && k->isa >= DMT_ISA_AVX2) {
        describe_check(why, whylen, "int8", &cfg->check_int8);
        return DMT_PRECISION_INT8;
    }
    if (check_passes(&cfg->check_bf16) && dmt_gemm_layout(k, DMT_PRECISION_BF16) >= 0) {
        describe_check(why, whylen, "bf16", &cfg->check_bf16);
        return DMT_PRECISION_BF16;
    }
    if (cfg->check_int8.present && !check_passes(&cfg->check_int8))
        snprintf(why, whylen, "config.json's int8 check (BLEU %+.2f on average, %+.2f at worst) misses the bar "
                 "(-%.1f, -%.1f)", cfg->check_int8.mean_bleu_change, cfg->check_int8.worst_bleu_change,
                 DMT_PRECISION_MEAN_DROP_LIMIT, DMT_PRECISION_WORST_DROP_LIMIT);
    else if (cfg->check_int8.present || cfg->check_bf16.present)
        snprintf(why, whylen, "the precision config.json vouches for is not fast on this CPU (%s)", k->name);
    else
        snprintf(why, whylen, "config.json vouches for no faster precision (tools/check_precision.py measures one)");
    return DMT_PRECISION_F32;
}

void dmt_model_free(dmt_model *m) {
    if (!m) return;
    if (m->tokenizer) dmt_tokenizer_free(m->tokenizer);
    dmt_shortlist_free(m->shortlist);
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    dmt_st_close(m->file);
    free(m);
}
