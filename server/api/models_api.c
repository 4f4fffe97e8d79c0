/* models_api.c — GET /models: what the server serves (api.h). An extension of the
 * LibreTranslate API: its clients never ask it. */
#include "server/api/api.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "model/gemm.h"

json_t *dmt_api_models(const dmt_model_set *set) {
    json_t *models = json_array(), *failures = json_array();
    for (int i = 0; i < set->n; i++) {
        const dmt_served *m = set->models[i];
        json_t *langs = json_array();
        for (int l = 0; l < m->cfg.n_languages; l++) json_array_append_new(langs, json_string(m->cfg.languages[l].code));
        char products[64];
        json_array_append_new(
            models, json_pack("{s:s, s:s, s:o, s:s, s:s, s:s, s:b, s:I, s:I, s:s, s:f, s:b}", "name", m->spec.name,
                              "dir", m->spec.dir, "languages", langs, "products",
                              dmt_gemm_describe(m->model->kernels, m->model->layout, products, sizeof products),
                              "precision", dmt_precision_name(m->model->precision), "precision_reason",
                              m->model->precision_reason, "shortlist", m->model->shortlist != NULL, "parameters", (json_int_t)m->model->n_params, "weight_bytes",
                              (json_int_t)m->model->weight_bytes_memory, "summary", m->summary, "load_seconds",
                              round(m->load_seconds * 1000) / 1000, "preferred", i == 0));
    }
    for (int i = 0; i < set->n_failures; i++) {
        const dmt_load_failure *f = &set->failures[i];
        json_array_append_new(failures, json_pack("{s:s, s:s, s:s, s:b}", "name", f->name, "dir", f->dir, "error",
                                                  f->error, "serving_previous",
                                                  dmt_model_set_find(set, f->name) != NULL));
    }
    return json_pack("{s:I, s:o, s:o}", "generation", (json_int_t)set->generation, "models", models, "failures",
                     failures);
}

/* Per-model counters in the Prometheus text format, appended to /metrics. Model
 * names are [A-Za-z0-9._-] (registry.c): safe as label values unescaped. */
char *dmt_api_model_metrics(const dmt_model_set *set) {
    static const struct {
        const char *name, *help;
        size_t field;
    } counters[] = {
        {"deepmt_model_requests_total", "requests that used the model", offsetof(dmt_served, requests)},
        {"deepmt_model_pivot_requests_total", "requests that used it as a leg of a pivot through English",
         offsetof(dmt_served, pivot_requests)},
        {"deepmt_model_sentences_total", "sentences it translated", offsetof(dmt_served, sentences)},
        {"deepmt_model_source_tokens_total", "source pieces it read", offsetof(dmt_served, src_tokens)},
        {"deepmt_model_generated_tokens_total", "pieces it generated", offsetof(dmt_served, out_tokens)},
        {"deepmt_model_request_seconds_total", "summed latency of its requests", offsetof(dmt_served, latency_us)},
    };
    size_t cap = 4096 + (size_t)set->n * 2048, o = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    out[0] = 0;
    for (size_t c = 0; c < sizeof counters / sizeof *counters; c++) {
        o += (size_t)snprintf(out + o, cap - o, "# HELP %s %s\n# TYPE %s counter\n", counters[c].name,
                              counters[c].help, counters[c].name);
        for (int i = 0; i < set->n; i++) {
            long v = atomic_load((atomic_long *)((char *)set->models[i] + counters[c].field));
            if (counters[c].field == offsetof(dmt_served, latency_us))
                o += (size_t)snprintf(out + o, cap - o, "%s{model=\"%s\"} %.6f\n", counters[c].name,
                                      set->models[i]->spec.name, v * 1e-6);
            else
                o += (size_t)snprintf(out + o, cap - o, "%s{model=\"%s\"} %ld\n", counters[c].name,
                                      set->models[i]->spec.name, v);
        }
    }
    o += (size_t)snprintf(out + o, cap - o,
                          "# HELP deepmt_models_generation model sets installed (1, then +1 a reload)\n"
                          "# TYPE deepmt_models_generation gauge\ndeepmt_models_generation %lu\n"
                          "# HELP deepmt_models_load_failures models of the latest reload that failed to load\n"
                          "# TYPE deepmt_models_load_failures gauge\ndeepmt_models_load_failures %d\n",
                          set->generation, set->n_failures);
    return out;
}
