/* test_registry.c — model lists, routing and reloads (server/sched/registry.h).
 *
 * Model directories are made in a temporary folder from the tiny fixture
 * (tests/fixtures/tiny-model, or $DEEPMT_FIXTURES/tiny-model), their config.json
 * rewritten to other language sets; the checks: list reading (DIR, NAME=DIR, a
 * folder with and without models.json, every refusal), routing (direct, preferred,
 * through English, unreachable), and reloads: an unchanged model is kept (the same
 * object), a changed one is loaded anew and the old one retired, a removed one is
 * retired and freed when its last reference goes, a corrupt one leaves the
 * previous version serving with the failure recorded.
 */
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/sched/registry.h"

static char tmp[256], fixture[512];

static int copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    char buf[65536];
    size_t n;
    int ok = a && b;
    while (ok && (n = fread(buf, 1, sizeof buf, a)) > 0) ok = fwrite(buf, 1, n, b) == n;
    if (a) fclose(a);
    if (b) fclose(b);
    return ok ? 0 : -1;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* A copy of the tiny model at tmp/name whose languages are langs, e.g.
 * "en:__en__:4,es:__de__:5" (code:token:id). */
static void make_model(const char *name, const char *langs) {
    char dir[512], from[700], to[700];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    mkdir(dir, 0755);
    static const char *const files[] = {"model.safetensors", "sentencepiece.model"};
    for (int i = 0; i < 2; i++) {
        snprintf(from, sizeof from, "%s/%s", fixture, files[i]);
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        copy_file(from, to);
    }
    snprintf(from, sizeof from, "%s/config.json", fixture);
    FILE *f = fopen(from, "rb");
    static char cfg[1 << 16];
    size_t n = f ? fread(cfg, 1, sizeof cfg - 1, f) : 0;
    if (f) fclose(f);
    cfg[n] = 0;
    char *l = strstr(cfg, "\"languages\""), *e = l ? strchr(l, ']') : NULL;
    if (!e) return;
    char out[1 << 16], list[2048] = "";
    size_t o = 0;
    char copy[512];
    snprintf(copy, sizeof copy, "%s", langs);
    for (char *save, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char code[16], token[32];
        int id;
        if (sscanf(tok, "%15[^:]:%31[^:]:%d", code, token, &id) != 3) continue;
        o += (size_t)snprintf(list + o, sizeof list - o, "%s{\"code\":\"%s\",\"name\":\"%s\",\"token\":\"%s\",\"id\":%d}",
                              o ? "," : "", code, code, token, id);
    }
    snprintf(out, sizeof out, "%.*s\"languages\": [%s%s", (int)(l - cfg), cfg, list, e);
    snprintf(to, sizeof to, "%s/config.json", dir);
    write_text(to, out);
}

static char *path_of(const char *name) {
    static char p[8][512];
    static int k;
    char *s = p[k++ % 8];
    snprintf(s, 512, "%s/%s", tmp, name);
    return s;
}

static void test_lists(void) {
    dmt_model_spec specs[DMT_MAX_MODELS];
    char err[512] = "";
    char named[600];
    snprintf(named, sizeof named, "other=%s", path_of("main"));
    const char *dirs[] = {path_of("main"), named};
    dmt_model_source src = {.dirs = dirs, .n_dirs = 2, .precision = 0};
    int n = dmt_model_list_read(&src, specs, err, sizeof err);
    CHECK(n == 2 && !strcmp(specs[0].name, "main") && !strcmp(specs[1].name, "other") &&
              !strcmp(specs[1].dir, path_of("main")),
          "DIR is named by its folder, NAME=DIR by NAME", "n %d: %s", n, err);
    const char *twice[] = {path_of("main"), path_of("main")};
    src = (dmt_model_source){.dirs = twice, .n_dirs = 2};
    CHECK(dmt_model_list_read(&src, specs, err, sizeof err) == -1 && strstr(err, "two models named 'main'"),
          "a name twice is refused", "%s", err);
    const char *bad[] = {"a b=/x"};
    src = (dmt_model_source){.dirs = bad, .n_dirs = 1};
    CHECK(dmt_model_list_read(&src, specs, err, sizeof err) == -1 && strstr(err, "model name 'a b'"),
          "a name with a space is refused", "%s", err);
    src = (dmt_model_source){.folder = tmp};
    n = dmt_model_list_read(&src, specs, err, sizeof err);
    CHECK(n == 4 && !strcmp(specs[0].name, "asia") && !strcmp(specs[3].name, "main"),
          "a folder: every model directory in it, by name", "n %d: %s", n, err);
    write_text(path_of("models.json"), "{\"models\": [{\"name\": \"m\", \"dir\": \"main\", \"precision\": \"bf16\"}, "
                                       "{\"dir\": \"esp\"}]}");
    n = dmt_model_list_read(&src, specs, err, sizeof err);
    CHECK(n == 2 && !strcmp(specs[0].name, "m") && specs[0].precision == DMT_PRECISION_BF16 &&
              !strcmp(specs[1].name, "esp") && !strcmp(specs[1].dir, path_of("esp")),
          "models.json: its models, in its order, with their options", "n %d: %s", n, err);
    static const char *const broken[] = {
        "{\"models\": 3}", "[1, 2]", "{\"models\": [{\"precision\": \"f32\"}]}",
        "{\"models\": [{\"name\": \"x\", \"precision\": \"f64\"}]}", "{\"models\": [{\"name\": \"x/y\"}]}", "not json"};
    for (size_t i = 0; i < sizeof broken / sizeof *broken; i++) {
        write_text(path_of("models.json"), broken[i]);
        err[0] = 0;
        int rc = dmt_model_list_read(&src, specs, err, sizeof err);
        CHECK(rc == -1 && (strstr(err, "models.json") || strstr(err, "model name 'x/y'")),
              "a broken models.json is refused with a message", "%s: %d '%s'", broken[i], rc, err);
    }
    unlink(path_of("models.json"));
    src = (dmt_model_source){.folder = path_of("nowhere")};
    CHECK(dmt_model_list_read(&src, specs, err, sizeof err) == -1 && strstr(err, "nowhere"),
          "a missing folder is refused", "%s", err);
}

static int names_are(const dmt_model_set *set, const char *want) {
    char got[256] = "";
    for (int i = 0; i < set->n; i++) {
        strcat(got, i ? "," : "");
        strcat(got, set->models[i]->spec.name);
    }
    return !strcmp(got, want);
}

static void test_routes_and_reloads(void) {
    char err[512] = "";
    const char *dirs[] = {path_of("main"), path_of("esp"), path_of("asia")};
    dmt_model_source src = {.dirs = dirs, .n_dirs = 3};
    dmt_registry *reg = dmt_registry_new();
    CHECK(!dmt_registry_acquire(reg), "no set before the first load");
    CHECK(dmt_registry_reload(reg, &src, err, sizeof err) == 0, "the first load", "%s", err);
    dmt_model_set *s1 = dmt_registry_acquire(reg);
    if (!s1) return;
    CHECK(names_are(s1, "main,esp,asia") && s1->generation == 1 && s1->n_failures == 0, "three models, in order");
    CHECK(s1->languages.n_languages == 6 && !strcmp(s1->languages.languages[3].code, "es"),
          "the set's languages: the union, first appearance first", "%d", s1->languages.n_languages);
    dmt_served *d, *a, *b;
    CHECK(!dmt_model_set_route(s1, "en", "de", NULL, &d, &a, &b) && d == s1->models[0] && !a && !b,
          "en->de: direct, on the first model that has it");
    CHECK(!dmt_model_set_route(s1, "en", "es", NULL, &d, &a, &b) && d == s1->models[1], "en->es on esp");
    CHECK(!dmt_model_set_route(s1, "de", "es", NULL, &d, &a, &b) && !d && a == s1->models[0] && b == s1->models[1],
          "de->es: through English, main then esp");
    CHECK(dmt_model_set_route(s1, "ja", "de", NULL, &d, &a, &b) == -1, "ja->de: nothing reaches it");
    CHECK(dmt_model_set_route(s1, "de", "es", "main", &d, &a, &b) == -1,
          "a preferred model without the pair: no route (no pivot either)");
    CHECK(!dmt_model_set_route(s1, "en", "en", NULL, &d, &a, &b) && d == s1->models[0], "en->en: the first with en");

    /* reload: esp changed on disk, asia removed, ita added */
    dmt_served *main1 = s1->models[0], *esp1 = s1->models[1], *asia1 = s1->models[2];
    sleep(1); /* a new modification time even on coarse clocks */
    make_model("esp", "en:__en__:4,es:__fr__:6");
    const char *dirs2[] = {path_of("main"), path_of("esp"), path_of("ita")};
    src = (dmt_model_source){.dirs = dirs2, .n_dirs = 3};
    CHECK(dmt_registry_reload(reg, &src, err, sizeof err) == 0, "a reload", "%s", err);
    dmt_model_set *s2 = dmt_registry_acquire(reg);
    CHECK(s2 && s2->generation == 2 && names_are(s2, "main,esp,ita"), "the new list is installed");
    CHECK(s2 && s2->models[0] == main1 && !atomic_load(&main1->retired), "an unchanged model is kept as it is");
    CHECK(s2 && s2->models[1] != esp1 && atomic_load(&esp1->retired), "a changed one is loaded anew, the old retired");
    CHECK(atomic_load(&asia1->retired), "a removed one is retired");
    CHECK(atomic_load(&asia1->refs) == 1, "... and only the old set still holds it", "refs %d",
          atomic_load(&asia1->refs));
    CHECK(names_are(s1, "main,esp,asia"), "a request's set is unchanged by the reload");
    dmt_served_ref(asia1); /* a worker's state, say */
    dmt_model_set_release(s1); /* the last request of the old set ends */
    CHECK(atomic_load(&asia1->refs) == 1, "the worker's reference keeps it", "refs %d", atomic_load(&asia1->refs));
    dmt_served_unref(asia1); /* freed here (ASan would see a leak or a use after free otherwise) */

    /* a corrupt new version */
    dmt_served *esp2 = s2->models[1];
    char p[600];
    snprintf(p, sizeof p, "%s/model.safetensors", path_of("esp"));
    sleep(1);
    CHECK(truncate(p, 100) == 0, "a model file is truncated on disk");
    CHECK(dmt_registry_reload(reg, &src, err, sizeof err) == 0, "a reload with a corrupt model still installs",
          "%s", err);
    dmt_model_set *s3 = dmt_registry_acquire(reg);
    CHECK(s3 && s3->n_failures == 1 && !strcmp(s3->failures[0].name, "esp") && strstr(s3->failures[0].error, "safetensors"),
          "... and records the failure", "%s", s3 && s3->n_failures ? s3->failures[0].error : "none");
    CHECK(s3 && s3->models[1] == esp2 && !atomic_load(&esp2->retired), "... and the previous version serves on");
    const char *gone[] = {path_of("none")};
    dmt_model_source bad = {.dirs = gone, .n_dirs = 1};
    err[0] = 0;
    CHECK(dmt_registry_reload(reg, &bad, err, sizeof err) == -1 && strstr(err, "none"),
          "a list where nothing loads: refused, with the loader's message", "%s", err);
    dmt_model_set *s4 = dmt_registry_acquire(reg);
    CHECK(s4 == s3 && names_are(s4, "main,esp,ita"), "... and the current set stays");
    dmt_model_set_release(s4);
    dmt_model_set_release(s3);
    dmt_model_set_release(s2);
    dmt_registry_free(reg);
}

int main(void) {
    const char *root = getenv("DEEPMT_FIXTURES");
    snprintf(fixture, sizeof fixture, "%s/tiny-model", root && *root ? root : "tests/fixtures");
    snprintf(tmp, sizeof tmp, "/tmp/deepmt-test-registry-XXXXXX");
    if (!mkdtemp(tmp)) {
        CHECK(0, "a temporary folder");
        return check_done();
    }
    make_model("main", "en:__en__:4,de:__de__:5,fr:__fr__:6");
    make_model("esp", "en:__en__:4,es:__de__:5");
    make_model("ita", "it:__de__:5,en:__en__:4");
    make_model("asia", "ja:__de__:5,ko:__fr__:6");
    test_lists();
    test_routes_and_reloads();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd)) { /* a leftover folder in /tmp: not a failure of the code under test */ }
    return check_done();
}
