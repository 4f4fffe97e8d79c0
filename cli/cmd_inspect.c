/* cmd_inspect.c — `deepmt inspect [-m] MODEL_DIR`: what a model directory holds. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/options.h"

#include "cli/commands.h"
#include "model/gemm.h"
#include "model/model.h"
#include "model/shortlist.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    char model[4096];
} inspect_args;

static const dmt_option inspect_options[] = {
    DMT_OPTION_MODEL(offsetof(inspect_args, model), sizeof ((inspect_args *)0)->model),
};

int cmd_inspect(int argc, char **argv) {
    inspect_args a;
    snprintf(a.model, sizeof a.model, "%s", DMT_DEFAULT_MODEL);
    const char *pos[1];
    int n_pos = 0;
    char err[512];
    int rc = dmt_options_parse("inspect", inspect_options, 1, &a, argc, argv, NULL, pos, 1, &n_pos, err, sizeof err);
    if (rc) {
        FILE *f = rc > 0 ? stdout : stderr;
        if (rc < 0) fprintf(f, "deepmt inspect: %s\n", err);
        fprintf(f, "usage: deepmt inspect [-m] [MODEL_DIR]   what a model directory holds\n");
        dmt_options_usage(f, inspect_options, 1);
        return rc > 0 ? 0 : 2;
    }
    if (n_pos) snprintf(a.model, sizeof a.model, "%s", pos[0]);
    argv[1] = a.model; /* below: the directory */
    dmt_model *m = dmt_model_load(argv[1], (dmt_load_options){.ids_only = 1}, err, sizeof err);
    if (!m) {
        fprintf(stderr, "deepmt inspect: %s\n", err);
        return 1;
    }
    /* The tokenizer is optional for inspection: report it rather than fail. */
    dmt_tokenizer *tok = dmt_tokenizer_load(argv[1], m->cfg.vocab_size, m->cfg.unk_id, err, sizeof err);
    const dmt_config *c = &m->cfg;
    printf("model:            %s\n", argv[1]);
    printf("layers:           %d encoder + %d decoder\n", c->encoder_layers, c->decoder_layers);
    printf("d_model:          %d (heads %d, ffn %d)\n", c->d_model, c->heads, c->ffn_dim);
    printf("vocab:            %d\n", c->vocab_size);
    printf("normalization:    %s (alpha encoder %.4f, decoder %.4f)\n", dmt_norm_mode_name(c->normalization),
           c->encoder_alpha, c->decoder_alpha);
    printf("activation:       %s, layer-norm eps %g\n", dmt_activation_name(c->activation), c->layer_norm_eps);
    printf("embeddings:       scale %.4g, %s positions (offset %d, max %d)%s%s%s\n", c->embed_scale,
           c->positions == DMT_POS_LEARNED ? "learned" : "sinusoidal", c->position_offset, c->max_positions,
           c->layernorm_embedding ? ", layernorm_embedding" : "", c->share_embeddings ? ", shared enc/dec" : "",
           c->tie_output ? ", tied output" : "");
    printf("special ids:      pad %d, bos %d, eos %d, unk %d, decoder start %d\n", c->pad_id, c->bos_id, c->eos_id,
           c->unk_id, c->decoder_start_id);
    printf("languages:        ");
    for (int i = 0; i < c->n_languages; i++)
        printf("%s%s (%s, %s=%d)", i ? ", " : "", c->languages[i].code, c->languages[i].name, c->languages[i].token,
               c->languages[i].id);
    printf("%s\n", c->n_languages ? "" : "none");
    printf("decoding:         beam %d, length penalty %.2f, max length %.2f*src+%d%s%s", c->decoding.beam_size,
           c->decoding.length_penalty, c->decoding.max_len_a, c->decoding.max_len_b,
           c->decoding.all_caps_lower ? "; ALL-CAPS in sentence case" : "",
           c->decoding.pass_through ? "; URLs, e-mail addresses, emoji and words it cannot spell passed through" : "");
    if (c->decoding.pass_through && c->decoding.pass_through_characters[0])
        printf(" (and words with any of %s)", c->decoding.pass_through_characters);
    printf("\n");
    printf("parameters:       %lld (%.2f M)\n", m->n_params, m->n_params / 1e6);
    printf("dtype on disk:    %s, %.1f MB of tensor data\n", m->dtype_summary, m->weight_bytes_file / 1e6);
    char products[64];
    printf("memory as F32:    %.1f MB (as loaded: %.1f MB; linear layers %s)\n", m->weight_bytes_f32 / 1e6,
           m->weight_bytes_memory / 1e6,
           m->layout == DMT_LAYOUT_ROWS ? "row-major for OpenBLAS" : "packed for the kernels' panels");
    printf("kernels:          %s (%s products)\n", m->kernels->name,
           dmt_gemm_describe(m->kernels, m->layout, products, sizeof products));
    /* loaded as F32, so INT8 here means the file's weights are int8 */
    char why[192];
    dmt_precision p = dmt_precision_choose(c, m->kernels, m->precision == DMT_PRECISION_INT8, why, sizeof why);
    printf("precision auto:   %s (%s)\n", dmt_precision_name(p), why);
    printf("tokenizer:        %s\n", tok ? "sentencepiece.model ok" : err);
    char sl[160];
    printf("shortlist:        %s%s\n", m->shortlist ? "shortlist.bin: " : "none (every step scores the whole vocabulary)",
           m->shortlist ? dmt_shortlist_describe(m->shortlist, sl, sizeof sl) : "");
    dmt_tokenizer_free(tok);
    dmt_model_free(m);
    return 0;
}
