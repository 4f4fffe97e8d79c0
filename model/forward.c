/* forward.c — encoder and incremental decoder over the weights of model.h.
 *
 * Reads like docs/model-format.md "The network": embed, then per layer a
 * self-attention, (decoder) a cross-attention and an FFN sublayer, each wrapped in
 * the residual of the config's normalization mode.
 */
#include "model/forward.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fault.h"
#include "model/gemm.h"
#include "model/ops.h"

/* Hypotheses of one source whose cross-attention runs as one dmt_attention_rows call
 * (each source key and value loaded once for all of them): a beam's width and more. */
#define CROSS_ROWS 8

/* How many hypotheses from h on (at most CROSS_ROWS, fewer than H - h) read the
 * source hyp_src[h]: one dmt_attention_rows call's rows. */
static int same_source_run(const int *hyp_src, int h, int H) {
    int g = 1;
    while (h + g < H && g < CROSS_ROWS && hyp_src[h + g] == hyp_src[h]) g++;
    return g;
}

/* A float buffer that only grows; its size is checked before each batch. */
typedef struct { float *p; size_t cap; } fbuf;

static int fbuf_reserve(fbuf *b, size_t n) {
    if (n <= b->cap) return 0;
    float *p = realloc(b->p, n * sizeof(float));
    if (!p) return -1;
    b->p = p;
    b->cap = n;
    return 0;
}

struct dmt_state {
    const dmt_model *m;
    /* encoder batch */
    /* Sources are packed, not padded: sentence i's rows are src_off[i] ..
     * src_off[i + 1] - 1, so no matrix product spends work on padding. */
    int n_src, src_max;          /* sentences, longest length */
    int *src_off;                /* [n_src + 1] (src_off[n_src]: all rows) */
    int *src_kt_off;             /* [n_src + 1]: the same with each length rounded up to
                                    16 (dmt_keys_stride): the keys of cross_k's panels */
    int src_off_cap;             /* sentences src_off has room for */
    fbuf enc_out;                /* [src rows][d] */
    fbuf cross_k;                /* [dec layers][d * src_kt_off[n_src]]: source i's K
                                    transposed in panels (ops.h) from d * src_kt_off[i] */
    fbuf cross_v;                /* [dec layers][src rows][d] */
    /* shared work buffers, sized for the larger of the encoder and decoder batches */
    fbuf q, k, v, attn, tmp, hidden, norm, scores;
    /* decoder */
    int n_hyps, hyp_cap, step, step_cap;
    int *hyp_src, *hyp_src_tmp;  /* [hyp_cap] */
    fbuf x;                      /* [hyp_cap][d] decoder activations */
    /* Self-attention KV cache as slots: the K/V row computed at step t for batch row h
     * lives in slot t * hyp_cap + h, and is never moved. history[h][t] names the slot
     * hypothesis h reads for position t, so reordering beams copies t ints per
     * hypothesis instead of t * d floats per layer. */
    fbuf self_k, self_v;         /* [dec layers][step_cap * hyp_cap][d] */
    int *history, *history_tmp;  /* [hyp_cap][step_cap] slot indices */
    fbuf logits;                 /* the beam search's log-probabilities, kept between searches */
    struct cont *cont;           /* continuous decoding, created on first use */
    /* alignment: the source position each hypothesis attended to most at the last
     * step, in the cross-attention of decoder layer align_layer (heads averaged) */
    int align_layer;
    int *align, align_cap;       /* [align_cap >= hypotheses] */
    fbuf align_sum;              /* [CROSS_ROWS][max_positions] */
    /* vocabulary restriction (dmt_state_restrict_vocab): the output projection's
     * columns of the vocab_n pieces steps score, gathered into vocab_buf */
    int vocab_n;                 /* 0: the whole vocabulary */
    int vocab_raw;               /* 1: steps write logits, not log-probabilities */
    dmt_linear vocab_proj;
    void *vocab_buf;
    size_t vocab_buf_bytes;
    fbuf vocab_bias;
};

/* Continuous decoding (forward.h "continuous decoding"). The slot pool is
 * [layer][slot][d]: growing it re-lays the layers out (rare: it doubles). */
typedef struct {
    float *k;                    /* [dec layers][dmt_keys_stride(len) * d] cross-attention K,
                                    transposed in panels (ops.h) */
    float *v;                    /* [dec layers][len][d] cross-attention V */
    int len;                     /* 0: a free entry */
} cont_source;

struct cont {
    cont_source *src;
    int n_src, src_cap;
    int hyps, hyp_cap, len_cap;  /* len_cap = max_positions */
    int *hyp_src, *hyp_len;      /* [hyp_cap] */
    int *hist, *hist_tmp;        /* [hyp_cap][len_cap] slot of each position */
    int *src_tmp, *len_tmp;
    float *k, *v;                /* [layers][n_slots][d] */
    int *ref, *free_slots;       /* [n_slots] references; stack of free slots */
    int n_slots, n_free;
};

dmt_state *dmt_state_new(const dmt_model *m) {
    dmt_state *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->m = m;
    s->align_layer = dmt_alignment_layer(m);
    return s;
}

int dmt_alignment_layer(const dmt_model *m) {
    int L = m->decoder.n_layers;
    const char *env = getenv("DEEPMT_ALIGN_LAYER");
    if (env && *env) {
        int l = atoi(env);
        if (l >= 0 && l < L) return l;
    }
    int l = m->cfg.decoding.alignment_layer;
    return l >= 0 && l < L ? l : L - 1;
}

const int *dmt_decode_alignment(const dmt_state *s) { return s->align; }

void dmt_state_free(dmt_state *s) {
    if (!s) return;
    fbuf *all[] = {&s->enc_out, &s->cross_k, &s->cross_v, &s->q, &s->k, &s->v, &s->attn, &s->tmp,
                   &s->hidden, &s->norm, &s->scores, &s->x, &s->self_k, &s->self_v, &s->logits, &s->align_sum};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]->p);
    free(s->src_off);
    free(s->src_kt_off);
    free(s->hyp_src);
    free(s->hyp_src_tmp);
    free(s->history);
    free(s->history_tmp);
    free(s->align);
    free(s->vocab_buf);
    free(s->vocab_bias.p);
    struct cont *c = s->cont;
    if (c) {
        for (int i = 0; i < c->n_src; i++) { free(c->src[i].k); free(c->src[i].v); }
        void *all[] = {c->src, c->hyp_src, c->hyp_len, c->hist, c->hist_tmp, c->src_tmp, c->len_tmp, c->k, c->v,
                       c->ref, c->free_slots};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]);
        free(c);
    }
    free(s);
}

const dmt_model *dmt_state_model(const dmt_state *s) { return s->m; }

float *dmt_state_logits(dmt_state *s, size_t floats) { return fbuf_reserve(&s->logits, floats) ? NULL : s->logits.p; }

/* Room in vocab_buf (and vocab_bias) for n gathered columns, with headroom for the
 * columns dmt_state_extend_vocab may add (what it holds is kept). */
static int reserve_vocab(dmt_state *s, int n) {
    const dmt_linear *full = &s->m->output_projection;
    size_t bytes = dmt_linear_gather_bytes(full, n);
    if (bytes > s->vocab_buf_bytes) {
        int room = n + n / 2 < full->out ? n + n / 2 : full->out;
        size_t want = dmt_linear_gather_bytes(full, room > n ? room : n);
        void *p = NULL;
        if (posix_memalign(&p, 64, want)) return -1;
        if (s->vocab_n) { /* the restriction stays whole, in the new buffer */
            memcpy(p, s->vocab_buf, s->vocab_buf_bytes);
            if (s->vocab_proj.packed) s->vocab_proj.packed = p;
            else s->vocab_proj.weight = p;
        }
        free(s->vocab_buf);
        s->vocab_buf = p;
        s->vocab_buf_bytes = want;
    }
    return full->bias && fbuf_reserve(&s->vocab_bias, (size_t)n) ? -1 : 0;
}

int dmt_state_restrict_vocab(dmt_state *s, int n, const int32_t *ids, int raw) {
    const dmt_linear *full = &s->m->output_projection;
    s->vocab_n = 0;
    s->vocab_raw = raw;
    if (n <= 0 || !ids) return 0;
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= full->out || (i > 0 && ids[i] <= ids[i - 1])) return -1;
    if (reserve_vocab(s, n)) return -1;
    dmt_linear_gather(&s->vocab_proj, s->vocab_buf, s->vocab_bias.p, full, n, ids);
    s->vocab_n = n;
    return 0;
}

int dmt_state_extend_vocab(dmt_state *s, int n, const int32_t *ids) {
    const dmt_linear *full = &s->m->output_projection;
    if (!s->vocab_n || n <= 0 || !ids || n > full->out - s->vocab_n) return -1;
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= full->out) return -1;
    if (reserve_vocab(s, s->vocab_n + n)) return -1;
    dmt_linear_gather_more(&s->vocab_proj, s->vocab_buf, s->vocab_bias.p, full, n, ids);
    s->vocab_n += n;
    return 0;
}

int dmt_state_vocab_size(const dmt_state *s) { return s->vocab_n ? s->vocab_n : s->m->cfg.vocab_size; }

/* The decoder's last step: log-probabilities of the scored pieces from x [H][d]. */
static void output_logprobs(dmt_state *s, float *logprobs, const float *x, int H) {
    dmt_matmul(logprobs, x, H, s->vocab_n ? &s->vocab_proj : &s->m->output_projection);
    if (!s->vocab_raw) dmt_log_softmax(logprobs, H, dmt_state_vocab_size(s));
}

/* Work buffers for `rows` activation rows and `scores` floats of attention scratch. */
static int reserve_work(dmt_state *s, size_t rows, size_t scores) {
    const dmt_config *c = &s->m->cfg;
    size_t d = (size_t)c->d_model;
    return fbuf_reserve(&s->q, rows * d) || fbuf_reserve(&s->k, rows * d) || fbuf_reserve(&s->v, rows * d) ||
           fbuf_reserve(&s->attn, rows * d) || fbuf_reserve(&s->tmp, rows * d) ||
           fbuf_reserve(&s->norm, rows * d) || fbuf_reserve(&s->hidden, rows * (size_t)c->ffn_dim) ||
           fbuf_reserve(&s->scores, scores);
}

/* x[rows] = embed_scale * E[tok] + P[pos + offset] (+ layernorm_embedding). */
static void embed(const dmt_model *m, const dmt_stack_weights *st, float *x, const int32_t *tok, int n, int pos0,
                  int pos_stride) {
    const dmt_config *c = &m->cfg;
    int d = c->d_model;
    for (int i = 0; i < n; i++) {
        const float *p = st->positions + (size_t)(pos0 + i * pos_stride + c->position_offset) * d;
        float *r = x + (size_t)i * d;
        if (st->embed_tokens) memcpy(r, st->embed_tokens + (size_t)tok[i] * d, (size_t)d * sizeof(float));
        else dmt_linear_row(&m->output_projection, tok[i], r); /* tied table, stored packed */
        for (int j = 0; j < d; j++) r[j] = c->embed_scale * r[j] + p[j];
    }
    if (st->layernorm_embedding.weight) dmt_layer_norm(x, n, d, &st->layernorm_embedding, c->layer_norm_eps);
}

/* The input a sublayer reads: x itself (Post-LN) or LayerNorm(x) in s->norm (Pre-LN). */
static const float *sublayer_input(dmt_state *s, const float *x, int rows, const dmt_norm_weights *w) {
    const dmt_config *c = &s->m->cfg;
    if (c->normalization != DMT_NORM_PRE) return x;
    memcpy(s->norm.p, x, (size_t)rows * c->d_model * sizeof(float));
    dmt_layer_norm(s->norm.p, rows, c->d_model, w, c->layer_norm_eps);
    return s->norm.p;
}

static int grow_ints(int **p, size_t n) {
    int *q = realloc(*p, n * sizeof *q);
    if (!q) return -1;
    *p = q;
    return 0;
}

/* The rows of all encoded sources together (0 before the first dmt_encode). */
static int source_rows(const dmt_state *s) { return s->src_off ? s->src_off[s->n_src] : 0; }

/* Sentence i's length in tokens, </s> included. */
static int source_len(const dmt_state *s, int i) { return s->src_off[i + 1] - s->src_off[i]; }

/* x = residual(x, f) where s->tmp holds f(input). */
static void residual(dmt_state *s, float *x, int rows, float alpha, const dmt_norm_weights *w) {
    const dmt_config *c = &s->m->cfg;
    if (c->normalization == DMT_NORM_PRE) dmt_add(x, s->tmp.p, (long)rows * c->d_model);
    else dmt_residual_norm(x, s->tmp.p, rows, c->d_model, alpha, w, c->layer_norm_eps);
}

static void scale(float *x, long n, float a) {
    for (long i = 0; i < n; i++) x[i] *= a;
}

/* FFN sublayer on x[rows]: s->tmp = fc2(act(fc1(input))), then the residual. */
static void ffn_block(dmt_state *s, float *x, int rows, const dmt_layer_weights *w, float alpha) {
    const dmt_config *c = &s->m->cfg;
    const float *in = sublayer_input(s, x, rows, &w->final_norm);
    dmt_matmul(s->hidden.p, in, rows, &w->fc1);
    if (c->activation == DMT_ACT_GELU) dmt_gelu(s->hidden.p, (long)rows * c->ffn_dim);
    else dmt_relu(s->hidden.p, (long)rows * c->ffn_dim);
    dmt_matmul(s->tmp.p, s->hidden.p, rows, &w->fc2);
    residual(s, x, rows, alpha, &w->final_norm);
}

static void final_norm(const dmt_stack_weights *st, float *x, int rows, const dmt_config *c) {
    if (c->normalization == DMT_NORM_PRE) dmt_layer_norm(x, rows, c->d_model, &st->layer_norm, c->layer_norm_eps);
}

/* ---------------------------------------------------------------- encoder -- */

static void encoder_layer(dmt_state *s, const dmt_layer_weights *w) {
    const dmt_config *c = &s->m->cfg;
    int d = c->d_model, rows = source_rows(s);
    float *x = s->enc_out.p;
    const float *in = sublayer_input(s, x, rows, &w->self_attn_norm);
    float *const qkv[3] = {s->q.p, s->k.p, s->v.p};
    const dmt_linear *const proj[3] = {&w->self_attn.q, &w->self_attn.k, &w->self_attn.v};
    dmt_matmul_shared(qkv, in, rows, proj, 3);
    scale(s->q.p, (long)rows * d, 1.0f / sqrtf((float)(d / c->heads)));
    for (int i = 0; i < s->n_src; i++) {
        size_t off = (size_t)s->src_off[i] * d;
        int len = source_len(s, i);
        dmt_attention(s->attn.p + off, d, s->q.p + off, d, s->k.p + off, s->v.p + off, d, len, len, c->heads, d,
                      -1, s->scores.p);
    }
    dmt_matmul(s->tmp.p, s->attn.p, rows, &w->self_attn.out);
    residual(s, x, rows, s->m->encoder.alpha, &w->self_attn_norm);
    ffn_block(s, x, rows, w, s->m->encoder.alpha);
}

int dmt_encode(dmt_state *s, int n, const int32_t *const *src, const int *src_len, char *err, size_t errlen) {
    const dmt_model *m = s->m;
    const dmt_config *c = &m->cfg;
    int d = c->d_model, S = 0;
    size_t rows = 0, kt_rows = 0; /* tokens; the same with each sentence padded to 16 */
    for (int i = 0; i < n; i++) {
        if (src_len[i] < 1) { snprintf(err, errlen, "sentence %d is empty", i); return -1; }
        if (src_len[i] > c->max_positions) {
            snprintf(err, errlen, "sentence %d has %d tokens, the model takes at most %d", i, src_len[i],
                     c->max_positions);
            return -1;
        }
        for (int t = 0; t < src_len[i]; t++)
            if (src[i][t] < 0 || src[i][t] >= c->vocab_size) {
                snprintf(err, errlen, "sentence %d: token id %d is outside the vocabulary", i, src[i][t]);
                return -1;
            }
        S = src_len[i] > S ? src_len[i] : S;
        rows += (size_t)src_len[i];
        kt_rows += dmt_keys_stride(src_len[i]);
    }
    if (kt_rows > INT_MAX) { /* src_kt_off's int; kt_rows >= rows */
        snprintf(err, errlen, "a batch of %zu tokens is too large", rows);
        return -1;
    }
    if (n > s->src_off_cap || !s->src_off) {
        size_t cap = n > 0 ? (size_t)n : 1;
        if (grow_ints(&s->src_off, cap + 1) || grow_ints(&s->src_kt_off, cap + 1)) goto oom;
        s->src_off_cap = (int)cap;
    }
    if (fbuf_reserve(&s->enc_out, rows * d) || reserve_work(s, rows, dmt_attention_scratch(S, S, d))) goto oom;
    s->n_src = n;
    s->src_max = S;
    s->n_hyps = 0;
    s->src_off[0] = s->src_kt_off[0] = 0;
    for (int i = 0; i < n; i++) {
        s->src_off[i + 1] = s->src_off[i] + src_len[i];
        s->src_kt_off[i + 1] = s->src_kt_off[i] + (int)dmt_keys_stride(src_len[i]);
        embed(m, &m->encoder, s->enc_out.p + (size_t)s->src_off[i] * d, src[i], src_len[i], 0, 1);
    }
    for (int l = 0; l < m->encoder.n_layers; l++) encoder_layer(s, &m->encoder.layers[l]);
    final_norm(&m->encoder, s->enc_out.p, (int)rows, c);
    return 0;
oom:
    snprintf(err, errlen, "out of memory for a batch of %d sentences x %d tokens", n, S);
    return -1;
}

const float *dmt_encoder_out(const dmt_state *s, int i) {
    return s->enc_out.p + (size_t)s->src_off[i] * s->m->cfg.d_model;
}

/* ---------------------------------------------------------------- decoder -- */

/* Room for the alignments of n hypotheses over sources of up to max_positions. */
static int reserve_align(dmt_state *s, int n) {
    if (fbuf_reserve(&s->align_sum, (size_t)CROSS_ROWS * s->m->cfg.max_positions)) return -1;
    if (n <= s->align_cap) return 0;
    if (grow_ints(&s->align, (size_t)n)) return -1;
    s->align_cap = n;
    return 0;
}

int dmt_decode_begin(dmt_state *s, int n_hyps, const int *hyp_src, int max_hyps, int max_steps, char *err,
                     size_t errlen) {
    const dmt_model *m = s->m;
    const dmt_config *c = &m->cfg;
    int d = c->d_model, L = m->decoder.n_layers;
    if (max_steps > c->max_positions) max_steps = c->max_positions;
    if (max_hyps < n_hyps) max_hyps = n_hyps;
    for (int h = 0; h < n_hyps; h++)
        if (hyp_src[h] < 0 || hyp_src[h] >= s->n_src) {
            snprintf(err, errlen, "hypothesis %d reads source %d, but %d were encoded", h, hyp_src[h], s->n_src);
            return -1;
        }
    size_t src_rows = (size_t)source_rows(s), keys = (size_t)(max_steps > s->src_max ? max_steps : s->src_max);
    if (max_hyps > s->hyp_cap || max_steps > s->step_cap) {
        int hc = max_hyps > s->hyp_cap ? max_hyps : s->hyp_cap, sc = max_steps > s->step_cap ? max_steps : s->step_cap;
        size_t cache = (size_t)L * hc * sc * d;
        if (grow_ints(&s->hyp_src, hc) || grow_ints(&s->hyp_src_tmp, hc) || reserve_align(s, hc) ||
            grow_ints(&s->history, (size_t)hc * sc) || grow_ints(&s->history_tmp, (size_t)hc * sc) ||
            fbuf_reserve(&s->self_k, cache) || fbuf_reserve(&s->self_v, cache) || fbuf_reserve(&s->x, (size_t)hc * d))
            goto oom;
        s->hyp_cap = hc;
        s->step_cap = sc;
    }
    size_t kt_keys = (size_t)s->src_kt_off[s->n_src];
    if (fbuf_reserve(&s->cross_k, (size_t)L * d * kt_keys) || fbuf_reserve(&s->cross_v, (size_t)L * src_rows * d) ||
        reserve_work(s, (size_t)max_hyps > src_rows ? (size_t)max_hyps : src_rows, CROSS_ROWS * dmt_keys_stride(keys)))
        goto oom;
    for (int l = 0; l < L; l++) { /* K into the work buffer, then each source's transposed */
        const dmt_attention_weights *a = &m->decoder.layers[l].cross_attn;
        float *const kv[2] = {s->k.p, s->cross_v.p + (size_t)l * src_rows * d};
        const dmt_linear *const proj[2] = {&a->k, &a->v};
        dmt_matmul_shared(kv, s->enc_out.p, (int)src_rows, proj, 2);
        float *kt = s->cross_k.p + (size_t)l * d * kt_keys;
        for (int i = 0; i < s->n_src; i++)
            dmt_transpose_keys(kt + (size_t)d * s->src_kt_off[i], s->k.p + (size_t)s->src_off[i] * d, d,
                               source_len(s, i), d);
    }
    memcpy(s->hyp_src, hyp_src, (size_t)n_hyps * sizeof *hyp_src);
    s->n_hyps = n_hyps;
    s->step = 0;
    return 0;
oom:
    snprintf(err, errlen, "out of memory for %d hypotheses x %d steps", max_hyps, max_steps);
    return -1;
}

/* Self-attention of every hypothesis over its cached positions; this step's K/V rows
 * go into the slots of step s->step (see struct dmt_state). */
static void decoder_self_attention(dmt_state *s, int l, const float *in) {
    const dmt_config *c = &s->m->cfg;
    const dmt_attention_weights *a = &s->m->decoder.layers[l].self_attn;
    int d = c->d_model, H = s->n_hyps;
    size_t layer = (size_t)s->step_cap * s->hyp_cap * d, step_block = (size_t)s->step * s->hyp_cap * d;
    float *kc = s->self_k.p + l * layer, *vc = s->self_v.p + l * layer;
    float *const qkv[3] = {s->q.p, kc + step_block, vc + step_block};
    const dmt_linear *const proj[3] = {&a->q, &a->k, &a->v};
    dmt_matmul_shared(qkv, in, H, proj, 3);
    scale(s->q.p, (long)H * d, 1.0f / sqrtf((float)(d / c->heads)));
    for (int h = 0; h < H; h++)
        dmt_attention_slots(s->attn.p + (size_t)h * d, s->q.p + (size_t)h * d, kc, vc, d,
                            s->history + (size_t)h * s->step_cap, s->step + 1, c->heads, s->scores.p);
    dmt_matmul(s->tmp.p, s->attn.p, H, &a->out);
}

static void decoder_cross_attention(dmt_state *s, int l, const float *in) {
    const dmt_config *c = &s->m->cfg;
    const dmt_attention_weights *a = &s->m->decoder.layers[l].cross_attn;
    int d = c->d_model, H = s->n_hyps;
    const float *kc = s->cross_k.p + (size_t)l * d * s->src_kt_off[s->n_src];
    const float *vc = s->cross_v.p + (size_t)l * source_rows(s) * d;
    dmt_matmul(s->q.p, in, H, &a->q);
    scale(s->q.p, (long)H * d, 1.0f / sqrtf((float)(d / c->heads)));
    for (int h = 0, g; h < H; h += g) { /* the hypotheses of one source together */
        int src = s->hyp_src[h], len = source_len(s, src);
        g = same_source_run(s->hyp_src, h, H);
        dmt_attention_rows(s->attn.p + (size_t)h * d, s->q.p + (size_t)h * d, kc + (size_t)d * s->src_kt_off[src],
                           vc + (size_t)s->src_off[src] * d, d, g, len, c->heads, s->scores.p,
                           l == s->align_layer ? s->align + h : NULL, s->align_sum.p);
    }
    dmt_matmul(s->tmp.p, s->attn.p, H, &a->out);
}

int dmt_decode_step(dmt_state *s, const int32_t *tokens, float *logprobs) {
    const dmt_model *m = s->m;
    const dmt_config *c = &m->cfg;
    int H = s->n_hyps;
    if (s->step >= s->step_cap) return -1;
    for (int h = 0; h < H; h++)
        if (tokens[h] < 0 || tokens[h] >= c->vocab_size) return -1;
    for (int h = 0; h < H; h++) s->history[(size_t)h * s->step_cap + s->step] = s->step * s->hyp_cap + h;
    float *x = s->x.p;
    embed(m, &m->decoder, x, tokens, H, s->step, 0);
    float alpha = m->decoder.alpha;
    for (int l = 0; l < m->decoder.n_layers; l++) {
        const dmt_layer_weights *w = &m->decoder.layers[l];
        decoder_self_attention(s, l, sublayer_input(s, x, H, &w->self_attn_norm));
        residual(s, x, H, alpha, &w->self_attn_norm);
        decoder_cross_attention(s, l, sublayer_input(s, x, H, &w->cross_attn_norm));
        residual(s, x, H, alpha, &w->cross_attn_norm);
        ffn_block(s, x, H, w, alpha);
    }
    final_norm(&m->decoder, x, H, c);
    output_logprobs(s, logprobs, x, H);
    s->step++;
    return 0;
}

void dmt_decode_reorder(dmt_state *s, int n_new, const int *parent) {
    int identity = n_new == s->n_hyps;
    for (int j = 0; identity && j < n_new; j++) identity = parent[j] == j;
    if (identity) return;
    size_t live = (size_t)s->step * sizeof(int);
    for (int j = 0; j < n_new; j++)
        memcpy(s->history_tmp + (size_t)j * s->step_cap, s->history + (size_t)parent[j] * s->step_cap, live);
    int *t = s->history;
    s->history = s->history_tmp;
    s->history_tmp = t;
    for (int j = 0; j < n_new; j++) s->hyp_src_tmp[j] = s->hyp_src[parent[j]];
    memcpy(s->hyp_src, s->hyp_src_tmp, (size_t)n_new * sizeof *s->hyp_src);
    s->n_hyps = n_new;
}

int dmt_decode_steps(const dmt_state *s) { return s->step; }
int dmt_decode_hyps(const dmt_state *s) { return s->n_hyps; }

/* ----------------------------------------------------- continuous decoding -- */

static struct cont *cont_get(dmt_state *s) {
    if (!s->cont) {
        s->cont = dmt_fault_hit() ? NULL : calloc(1, sizeof *s->cont);
        if (s->cont) s->cont->len_cap = s->m->cfg.max_positions;
    }
    return s->cont;
}

int dmt_cont_add_sources(dmt_state *s, int n, const int32_t *const *src, const int *src_len, int *ids, char *err,
                         size_t errlen) {
    const dmt_model *m = s->m;
    int d = m->cfg.d_model, L = m->decoder.n_layers, taken = 0;
    struct cont *c = cont_get(s);
    if (!c) goto oom;
    if (dmt_encode(s, n, src, src_len, err, errlen)) return -1;
    for (int i = 0; i < n; i++, taken++) {
        int id = 0;
        while (id < c->n_src && c->src[id].len) id++;
        if (id == c->n_src) {
            if (c->n_src == c->src_cap) {
                int cap = c->src_cap ? 2 * c->src_cap : 64;
                cont_source *p = dmt_fault_hit() ? NULL : realloc(c->src, (size_t)cap * sizeof *p);
                if (!p) goto oom;
                c->src = p;
                c->src_cap = cap;
            }
            c->src[c->n_src++] = (cont_source){0};
        }
        cont_source *cs = &c->src[id];
        size_t len = (size_t)source_len(s, i);
        cs->k = dmt_fault_hit() ? NULL : malloc((size_t)L * dmt_keys_stride((int)len) * d * sizeof(float));
        cs->v = dmt_fault_hit() ? NULL : malloc((size_t)L * len * d * sizeof(float));
        if (!cs->k || !cs->v) { free(cs->k); free(cs->v); cs->k = cs->v = NULL; goto oom; }
        cs->len = (int)len;
        ids[i] = id;
    }
    /* every buffer in hand: now V straight into each source's cache, and K through the
     * work buffer (dmt_encode sized it for every source's rows), transposed */
    for (int i = 0; i < n; i++) {
        cont_source *cs = &c->src[ids[i]];
        size_t len = (size_t)cs->len, kt_keys = dmt_keys_stride(cs->len);
        const float *x = dmt_encoder_out(s, i);
        for (int l = 0; l < L; l++) {
            const dmt_attention_weights *a = &m->decoder.layers[l].cross_attn;
            float *const kv[2] = {s->k.p, cs->v + (size_t)l * len * d};
            const dmt_linear *const proj[2] = {&a->k, &a->v};
            dmt_matmul_shared(kv, x, (int)len, proj, 2);
            dmt_transpose_keys(cs->k + (size_t)l * kt_keys * d, s->k.p, d, cs->len, d);
        }
    }
    return 0;
oom:
    for (int i = 0; i < taken; i++) dmt_cont_release_source(s, ids[i]); /* all or none */
    snprintf(err, errlen, "out of memory for %d more sources", n);
    return -1;
}

int dmt_cont_sources(const dmt_state *s) {
    int live = 0;
    for (int id = 0; s->cont && id < s->cont->n_src; id++) live += s->cont->src[id].len > 0;
    return live;
}

void dmt_cont_release_source(dmt_state *s, int id) {
    struct cont *c = s->cont;
    if (!c || id < 0 || id >= c->n_src) return;
    free(c->src[id].k);
    free(c->src[id].v);
    c->src[id] = (cont_source){0};
}

static int cont_reserve_hyps(dmt_state *s, struct cont *c, int n) {
    if (n <= c->hyp_cap) return 0;
    int cap = c->hyp_cap ? c->hyp_cap : 64;
    while (cap < n) cap *= 2;
    size_t hl = (size_t)cap * c->len_cap;
    if (grow_ints(&c->hyp_src, cap) || grow_ints(&c->hyp_len, cap) || grow_ints(&c->src_tmp, cap) || reserve_align(s, cap) ||
        grow_ints(&c->len_tmp, cap) || grow_ints(&c->hist, hl) || grow_ints(&c->hist_tmp, hl))
        return -1;
    c->hyp_cap = cap;
    return 0;
}

int dmt_cont_add_hyps(dmt_state *s, int n, const int *src_ids, char *err, size_t errlen) {
    struct cont *c = cont_get(s);
    if (!c || cont_reserve_hyps(s, c, c->hyps + n)) {
        snprintf(err, errlen, "out of memory for %d hypotheses", n);
        return -1;
    }
    for (int j = 0; j < n; j++) {
        if (src_ids[j] < 0 || src_ids[j] >= c->n_src || !c->src[src_ids[j]].len) {
            snprintf(err, errlen, "hypothesis reads source %d, which is not held", src_ids[j]);
            return -1;
        }
        c->hyp_src[c->hyps + j] = src_ids[j];
        c->hyp_len[c->hyps + j] = 0;
    }
    c->hyps += n;
    return 0;
}

/* One free slot (growing the pool when none is left); -1 when out of memory. */
static int cont_slot(const dmt_model *m, struct cont *c) {
    if (c->n_free == 0) {
        int add = c->n_slots ? c->n_slots : 1024, n = c->n_slots + add, L = m->decoder.n_layers;
        size_t d = (size_t)m->cfg.d_model, old = (size_t)c->n_slots * d, now = (size_t)n * d;
        float *k = malloc((size_t)L * now * sizeof *k), *v = malloc((size_t)L * now * sizeof *v);
        if (!k || !v || grow_ints(&c->ref, (size_t)n) || grow_ints(&c->free_slots, (size_t)n)) {
            free(k);
            free(v);
            return -1;
        }
        for (int l = 0; l < L && old; l++) {
            memcpy(k + l * now, c->k + l * old, old * sizeof *k);
            memcpy(v + l * now, c->v + l * old, old * sizeof *v);
        }
        free(c->k);
        free(c->v);
        c->k = k;
        c->v = v;
        for (int i = n - 1; i >= c->n_slots; i--) {
            c->ref[i] = 0;
            c->free_slots[c->n_free++] = i;
        }
        c->n_slots = n;
    }
    int slot = c->free_slots[--c->n_free];
    c->ref[slot] = 1;
    return slot;
}

static void cont_unref(struct cont *c, int slot) {
    if (--c->ref[slot] == 0) c->free_slots[c->n_free++] = slot;
}

int dmt_cont_step(dmt_state *s, const int32_t *tokens, float *logprobs) {
    const dmt_model *m = s->m;
    const dmt_config *cfg = &m->cfg;
    struct cont *c = s->cont;
    if (!c || c->hyps == 0) return 0;
    int H = c->hyps, d = cfg->d_model, L = m->decoder.n_layers;
    if (fbuf_reserve(&s->x, (size_t)H * d) || reserve_work(s, (size_t)H, CROSS_ROWS * dmt_keys_stride(c->len_cap)))
        return -1;
    for (int h = 0; h < H; h++) {
        if (tokens[h] < 0 || tokens[h] >= cfg->vocab_size || c->hyp_len[h] >= c->len_cap) return -1;
        int slot = cont_slot(m, c);
        if (slot < 0) return -1;
        c->hist[(size_t)h * c->len_cap + c->hyp_len[h]] = slot;
        embed(m, &m->decoder, s->x.p + (size_t)h * d, tokens + h, 1, c->hyp_len[h], 0);
    }
    float *x = s->x.p, alpha = m->decoder.alpha, qscale = 1.0f / sqrtf((float)(d / cfg->heads));
    for (int l = 0; l < L; l++) {
        const dmt_layer_weights *w = &m->decoder.layers[l];
        /* self-attention over each hypothesis' own positions */
        const float *in = sublayer_input(s, x, H, &w->self_attn_norm);
        float *const qkv[3] = {s->q.p, s->k.p, s->v.p};
        const dmt_linear *const proj[3] = {&w->self_attn.q, &w->self_attn.k, &w->self_attn.v};
        dmt_matmul_shared(qkv, in, H, proj, 3);
        scale(s->q.p, (long)H * d, qscale);
        float *kc = c->k + (size_t)l * c->n_slots * d, *vc = c->v + (size_t)l * c->n_slots * d;
        for (int h = 0; h < H; h++) {
            const int *hist = c->hist + (size_t)h * c->len_cap;
            size_t at = (size_t)hist[c->hyp_len[h]] * d;
            memcpy(kc + at, s->k.p + (size_t)h * d, (size_t)d * sizeof(float));
            memcpy(vc + at, s->v.p + (size_t)h * d, (size_t)d * sizeof(float));
            dmt_attention_slots(s->attn.p + (size_t)h * d, s->q.p + (size_t)h * d, kc, vc, d, hist, c->hyp_len[h] + 1,
                                cfg->heads, s->scores.p);
        }
        dmt_matmul(s->tmp.p, s->attn.p, H, &w->self_attn.out);
        residual(s, x, H, alpha, &w->self_attn_norm);
        /* cross-attention over each hypothesis' source */
        in = sublayer_input(s, x, H, &w->cross_attn_norm);
        dmt_matmul(s->q.p, in, H, &w->cross_attn.q);
        scale(s->q.p, (long)H * d, qscale);
        for (int h = 0, g; h < H; h += g) { /* the hypotheses of one source together */
            g = same_source_run(c->hyp_src, h, H);
            const cont_source *cs = &c->src[c->hyp_src[h]];
            size_t kt_keys = dmt_keys_stride(cs->len);
            dmt_attention_rows(s->attn.p + (size_t)h * d, s->q.p + (size_t)h * d, cs->k + (size_t)l * kt_keys * d,
                               cs->v + (size_t)l * cs->len * d, d, g, cs->len, cfg->heads, s->scores.p,
                               l == s->align_layer ? s->align + h : NULL, s->align_sum.p);
        }
        dmt_matmul(s->tmp.p, s->attn.p, H, &w->cross_attn.out);
        residual(s, x, H, alpha, &w->cross_attn_norm);
        ffn_block(s, x, H, w, alpha);
    }
    final_norm(&m->decoder, x, H, cfg);
    output_logprobs(s, logprobs, x, H);
    for (int h = 0; h < H; h++) c->hyp_len[h]++;
    return 0;
}

int dmt_cont_reorder(dmt_state *s, int n_new, const int *parent) {
    struct cont *c = s->cont;
    if (!c) return n_new == 0 ? 0 : -1;
    int identity = n_new == c->hyps;
    for (int j = 0; identity && j < n_new; j++) identity = parent[j] == j;
    if (identity) return 0;
    if (cont_reserve_hyps(s, c, n_new)) return -1;
    size_t cap = (size_t)c->len_cap;
    for (int j = 0; j < n_new; j++) { /* new references first, so shared slots never hit 0 */
        int p = parent[j], len = c->hyp_len[p];
        const int *from = c->hist + (size_t)p * cap;
        memcpy(c->hist_tmp + (size_t)j * cap, from, (size_t)len * sizeof *from);
        for (int t = 0; t < len; t++) c->ref[from[t]]++;
        c->src_tmp[j] = c->hyp_src[p];
        c->len_tmp[j] = len;
    }
    for (int h = 0; h < c->hyps; h++)
        for (int t = 0; t < c->hyp_len[h]; t++) cont_unref(c, c->hist[(size_t)h * cap + t]);
    int *t = c->hist; c->hist = c->hist_tmp; c->hist_tmp = t;
    t = c->hyp_src; c->hyp_src = c->src_tmp; c->src_tmp = t;
    t = c->hyp_len; c->hyp_len = c->len_tmp; c->len_tmp = t;
    c->hyps = n_new;
    return 0;
}

int dmt_cont_hyps(const dmt_state *s) { return s->cont ? s->cont->hyps : 0; }
int dmt_cont_slots_used(const dmt_state *s) { return s->cont ? s->cont->n_slots - s->cont->n_free : 0; }
