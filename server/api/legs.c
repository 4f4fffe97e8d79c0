/* legs.c — a routed request's work in the scheduler (api.h).
 *
 * A request's texts are grouped by route (api.c): each group is a part, queued as
 * one dmt_work on its model. A pivot part runs in two legs: its sentences into
 * English on the first model (best hypothesis only), then those English sentences
 * into the target on the second (with the alternatives asked for), batched with
 * everything else that model runs. Each English sentence is a text of its own
 * there, split into sentences and chunks as a request's text would be, so a pivot
 * gives exactly what two requests by hand give. The second leg is queued from the
 * first's done callback, on a scheduler thread. The request is done when its last
 * part is.
 *
 * A pivot's word alignment is the composition of the two: source word s is aligned
 * to target word t when the first leg aligned s to some English word e and the
 * second aligned e to t.
 */
#include "server/api/api.h"
#include "base/words.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void request_part_done(dmt_api_request *r) {
    if (atomic_fetch_sub(&r->parts_pending, 1) == 1) r->done(r);
}

static int part_alive(dmt_work *w) {
    dmt_api_part *p = w->user;
    return !p->req->alive || p->req->alive(p->req);
}

static int leg_dropped(const dmt_work *w) {
    return atomic_load(&w->cancelled) || atomic_load(&w->disconnected) || atomic_load(&w->timed_out);
}

/* (s, t) for every (s, e) of the first leg and (e, t) of the second, in target
 * order, each once: the source -> target alignment of a pivoted sentence. */
static void compose_alignment(const dmt_translate_output *first, dmt_translate_output *second) {
    int n = 0, cap = first->n_alignment * (second->n_alignment ? second->n_alignment : 1) + 1;
    int *pairs = malloc((size_t)cap * 2 * sizeof *pairs);
    if (!pairs) { /* no alignment rather than a wrong one */
        free(second->alignment);
        second->alignment = NULL;
        second->n_alignment = 0;
        return;
    }
    for (int q = 0; q < second->n_alignment; q++)
        for (int p = 0; p < first->n_alignment; p++) {
            if (first->alignment[2 * p + 1] != second->alignment[2 * q]) continue;
            int s = first->alignment[2 * p], t = second->alignment[2 * q + 1], seen = 0;
            for (int k = n - 1; k >= 0 && !seen && pairs[2 * k + 1] == t; k--) seen = pairs[2 * k] == s;
            if (seen) continue;
            pairs[2 * n] = s;
            pairs[2 * n + 1] = t;
            n++;
        }
    free(second->alignment);
    second->alignment = pairs;
    second->n_alignment = n;
}

/* Joins the second leg's pieces of English text i (its sentences and chunks) into
 * final output o, as a request's answer joins a text's sentences: the English
 * gaps between them kept, hypothesis k of each piece (its best where it has fewer),
 * word alignments numbered over the joined text. 0, or -1 with o's error set. */
static int join_pieces(const dmt_api_part *p, int i, dmt_translate_output *o) {
    const char *en = p->pivot_jobs[i].out.texts[0];
    size_t en_len = strlen(en);
    int f = p->leg2_first[i], e = p->leg2_first[i + 1], n = 1, pairs = 0;
    memset(o, 0, sizeof *o);
    for (int q = f; q < e; q++) {
        const dmt_translate_output *po = &p->leg2_jobs[q].out;
        if (po->error[0] || !po->texts || po->n < 1) {
            snprintf(o->error, sizeof o->error, "%s", po->error[0] ? po->error : "no translation");
            return -1;
        }
        if (po->n > n) n = po->n;
        pairs += po->n_alignment;
    }
    pairs += dmt_gap_pairs(en, en_len, 0, en_len, NULL, 0, 0, NULL); /* the gaps' words: at most all */
    o->texts = calloc((size_t)n, sizeof *o->texts);
    o->scores = calloc((size_t)n, sizeof *o->scores);
    o->alignment = malloc(((size_t)pairs + 1) * 2 * sizeof *o->alignment);
    if (!o->texts || !o->scores || !o->alignment) goto oom;
    o->n = n;
    for (int k = 0; k < n; k++) {
        size_t cap = en_len + 1, pos = 0, len = 0;
        for (int q = f; q < e; q++) {
            const dmt_translate_output *po = &p->leg2_jobs[q].out;
            cap += strlen(po->texts[k < po->n ? k : 0]);
        }
        char *t = malloc(cap);
        if (!t) goto oom;
        for (int q = f; q < e; q++) {
            const dmt_translate_output *po = &p->leg2_jobs[q].out;
            const dmt_span *sp = &p->leg2_spans[q];
            const char *piece = po->texts[k < po->n ? k : 0];
            memcpy(t + len, en + pos, sp->start - pos); /* the gap before it */
            len += sp->start - pos;
            if (k == 0) /* its words (list markers) copied: paired with themselves */
                o->n_alignment += dmt_gap_pairs(en, en_len, pos, sp->start, t, len, len - (sp->start - pos),
                                                o->alignment + 2 * o->n_alignment);
            if (k == 0) { /* the best's alignment, renumbered over the whole text */
                int e0 = dmt_word_index_at(en, en_len, sp->start), t0 = dmt_word_index_at(t, len, len);
                for (int a = 0; a < po->n_alignment; a++) {
                    o->alignment[2 * o->n_alignment] = e0 + po->alignment[2 * a];
                    o->alignment[2 * o->n_alignment + 1] = t0 + po->alignment[2 * a + 1];
                    o->n_alignment++;
                }
                o->src_tokens += po->src_tokens;
                o->out_tokens += po->out_tokens;
            }
            memcpy(t + len, piece, strlen(piece));
            len += strlen(piece);
            o->scores[k] += po->scores ? po->scores[k < po->n ? k : 0] : 0;
            pos = sp->start + sp->len;
        }
        memcpy(t + len, en + pos, en_len - pos);
        len += en_len - pos;
        t[len] = 0;
        o->texts[k] = t;
    }
    return 0;
oom:
    dmt_translate_output_clear(o);
    memset(o, 0, sizeof *o);
    snprintf(o->error, sizeof o->error, "out of memory");
    return -1;
}

static void second_leg_done(dmt_work *w) {
    dmt_api_part *p = w->user;
    const dmt_model *m = p->model->model;
    for (int i = 0; i < p->count; i++) {
        dmt_job *j = &p->req->jobs[p->first + i];
        if (p->leg2_first[i + 1] == p->leg2_first[i]) { /* empty English: empty translation */
            memset(&j->out, 0, sizeof j->out);
            dmt_translate_decode(m, NULL, &j->out);
            continue;
        }
        int internal = 0;
        for (int q = p->leg2_first[i]; q < p->leg2_first[i + 1]; q++) internal |= p->leg2_jobs[q].internal_error;
        if (join_pieces(p, i, &j->out)) j->internal_error = internal || !strcmp(j->out.error, "out of memory");
        else compose_alignment(&p->pivot_jobs[i].out, &j->out);
    }
    request_part_done(p->req);
}

/* Sets up the second leg: each English output as a text of its own. 0, or -1 out
 * of memory. */
static int prepare_second_leg(dmt_api_part *p) {
    const dmt_model *m = p->model->model;
    if (!(p->leg2_first = calloc((size_t)p->count + 1, sizeof *p->leg2_first))) return -1;
    int total = 0;
    for (int i = 0; i < p->count; i++) {
        const char *en = p->pivot_jobs[i].out.texts[0];
        p->leg2_first[i] = total;
        int k = dmt_api_text_jobs(m, en, strlen(en), NULL, 0);
        if (k < 0) return -1;
        total += k;
    }
    p->leg2_first[p->count] = total;
    p->n_leg2 = total;
    p->leg2_jobs = calloc((size_t)total + 1, sizeof *p->leg2_jobs);
    p->leg2_spans = calloc((size_t)total + 1, sizeof *p->leg2_spans);
    if (!p->leg2_jobs || !p->leg2_spans) return -1;
    for (int i = 0; i < p->count; i++) {
        const char *en = p->pivot_jobs[i].out.texts[0];
        int f = p->leg2_first[i], k = p->leg2_first[i + 1] - f;
        dmt_api_text_jobs(m, en, strlen(en), p->leg2_spans + f, k);
        for (int q = f; q < f + k; q++)
            p->leg2_jobs[q] = (dmt_job){.text = en + p->leg2_spans[q].start, .len = p->leg2_spans[q].len,
                                        .target_id = p->target_id};
    }
    return 0;
}

/* The first leg of a pivot is done: its English goes to the second model. */
static void first_leg_done(dmt_work *w) {
    dmt_api_part *p = w->user;
    dmt_api_request *r = p->req;
    int failed = leg_dropped(w);
    for (int i = 0; i < p->count && !failed; i++) {
        const dmt_translate_output *o = &p->pivot_jobs[i].out;
        failed = o->error[0] || !o->texts || o->n < 1;
    }
    if (failed) { /* the answer reports the first leg's failure (api.c) */
        for (int i = 0; i < p->count; i++) {
            dmt_job *j = &r->jobs[p->first + i];
            snprintf(j->out.error, sizeof j->out.error, "%s", p->pivot_jobs[i].out.error);
            if (!j->out.error[0] && leg_dropped(w)) snprintf(j->out.error, sizeof j->out.error, "dropped");
            j->internal_error = p->pivot_jobs[i].internal_error;
        }
        request_part_done(r);
        return;
    }
    char err[256];
    if (prepare_second_leg(p)) {
        r->fail_status = 500;
        snprintf(r->fail_error, sizeof r->fail_error, "out of memory");
        request_part_done(r);
        return;
    }
    p->work2.jobs = p->leg2_jobs;
    p->work2.n_jobs = p->n_leg2;
    p->work2.key.model = p->model;
    p->work2.done = second_leg_done;
    p->work2.alive = part_alive;
    p->work2.user = p;
    p->work2.deadline = 0; /* started: the rest is not dropped for waiting */
    snprintf(p->work2.client, sizeof p->work2.client, "%s", r->client);
    if (p->n_leg2 == 0) { /* nothing but empty English */
        second_leg_done(&p->work2);
        return;
    }
    int rc = dmt_scheduler_submit(r->sched, &p->work2, err, sizeof err);
    if (rc == DMT_SUBMIT_OK) return;
    r->fail_status = rc == DMT_SUBMIT_TOO_LARGE ? 413 : rc == DMT_SUBMIT_FULL ? 429 : 503;
    snprintf(r->fail_error, sizeof r->fail_error, "%s",
             rc == DMT_SUBMIT_TOO_LARGE ? err
             : rc == DMT_SUBMIT_FULL    ? "too many requests: the translation queue is full"
                                        : "the server is shutting down");
    request_part_done(r);
}

static void direct_done(dmt_work *w) {
    dmt_api_part *p = w->user;
    request_part_done(p->req);
}

/* Sets up part p's first (or only) leg. 0, or -1 out of memory. */
static int prepare(dmt_api_request *r, dmt_api_part *p) {
    dmt_work *w = &p->work;
    w->jobs = r->jobs + p->first;
    w->n_jobs = p->count;
    w->key.model = p->model;
    w->done = direct_done;
    if (p->pivot_model) {
        p->pivot_jobs = calloc((size_t)p->count, sizeof *p->pivot_jobs);
        if (!p->pivot_jobs) return -1;
        int en = dmt_config_language(&p->pivot_model->cfg, DMT_PIVOT_LANGUAGE)->id;
        for (int i = 0; i < p->count; i++)
            p->pivot_jobs[i] = (dmt_job){.text = w->jobs[i].text, .len = w->jobs[i].len, .target_id = en};
        w->jobs = p->pivot_jobs;
        w->key.model = p->pivot_model;
        w->done = first_leg_done;
    }
    w->alive = part_alive;
    w->user = p;
    w->deadline = r->deadline;
    snprintf(w->client, sizeof w->client, "%s", r->client);
    return 0;
}

int dmt_api_submit(dmt_scheduler *s, dmt_api_request *r, char *err, size_t errlen) {
    r->sched = s;
    int queued = 0, rc = DMT_SUBMIT_OK;
    atomic_store(&r->parts_pending, r->n_parts + 1); /* + 1: none finishes the request while others are queued */
    for (int i = 0; i < r->n_parts; i++) {
        dmt_api_part *p = &r->parts[i];
        if (p->count == 0) {
            atomic_fetch_sub(&r->parts_pending, 1);
            continue;
        }
        rc = prepare(r, p) ? DMT_SUBMIT_FULL : dmt_scheduler_submit(s, &p->work, err, errlen);
        if (rc == DMT_SUBMIT_OK) {
            queued++;
            continue;
        }
        atomic_fetch_sub(&r->parts_pending, 1);
        if (!r->fail_status) {
            r->fail_status = rc == DMT_SUBMIT_TOO_LARGE ? 413 : rc == DMT_SUBMIT_FULL ? 429 : 503;
            snprintf(r->fail_error, sizeof r->fail_error, "%s",
                     rc == DMT_SUBMIT_TOO_LARGE ? err
                     : rc == DMT_SUBMIT_FULL    ? "too many requests: the translation queue is full"
                                                : "the server is shutting down");
        }
    }
    if (queued == 0) return rc == DMT_SUBMIT_OK ? DMT_SUBMIT_FULL : rc;
    /* the + 1: when the parts are all done already, done() is not called here (the
     * caller may hold the lock done() takes): the caller answers at once */
    return atomic_fetch_sub(&r->parts_pending, 1) == 1 ? DMT_API_SUBMIT_FINISHED : DMT_SUBMIT_OK;
}

int dmt_api_dropped(const dmt_api_request *r, const char **msg) {
    int cancelled = 0, gone = 0, late = 0;
    for (int i = 0; i < r->n_parts; i++)
        for (int k = 0; k < 2; k++) {
            const dmt_work *w = k ? &r->parts[i].work2 : &r->parts[i].work;
            cancelled |= atomic_load(&w->cancelled);
            gone |= atomic_load(&w->disconnected);
            late |= atomic_load(&w->timed_out);
        }
    if (cancelled) return *msg = "the server is shutting down", 503;
    if (gone) return *msg = "the client went away", 499; /* nobody reads it */
    if (late) return *msg = "the request waited too long in the queue; try again later", 503;
    return 0;
}

void dmt_api_account(const dmt_api_request *r, int status, double seconds) {
    for (int i = 0; i < r->n_parts; i++) {
        const dmt_api_part *p = &r->parts[i];
        for (int leg = 0; leg < (p->pivot_model ? 2 : 1); leg++) {
            dmt_served *m = leg == 0 ? p->model : p->pivot_model;
            const dmt_job *jobs = leg == 0 ? r->jobs + p->first : p->pivot_jobs;
            int seen = 0; /* a model counts a request once, however many parts it served */
            for (int k = 0; k < i && !seen; k++)
                seen = r->parts[k].model == m || r->parts[k].pivot_model == m;
            if (!seen) {
                atomic_fetch_add(&m->requests, 1);
                atomic_fetch_add(&m->latency_us, (long)(seconds * 1e6));
                if (p->pivot_model) atomic_fetch_add(&m->pivot_requests, 1);
            }
            if (status != 200) continue;
            long src = 0, out = 0;
            for (int j = 0; jobs && j < p->count; j++) {
                src += jobs[j].out.src_tokens;
                out += jobs[j].out.out_tokens;
            }
            atomic_fetch_add(&m->sentences, p->count);
            atomic_fetch_add(&m->src_tokens, src);
            atomic_fetch_add(&m->out_tokens, out);
        }
    }
}

const char *dmt_api_models_used(const dmt_api_request *r, char *buf, size_t cap) {
    const dmt_served *seen[2 * DMT_MAX_MODELS];
    int n_seen = 0;
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < r->n_parts; i++)
        for (int leg = 0; leg < 2; leg++) { /* in the order they ran: a pivot's first leg first */
            const dmt_served *m = leg == 0 ? r->parts[i].pivot_model : r->parts[i].model;
            int dup = !m;
            for (int k = 0; k < n_seen && !dup; k++) dup = seen[k] == m;
            if (dup || n_seen == 2 * DMT_MAX_MODELS || o >= cap) continue;
            seen[n_seen++] = m;
            o += (size_t)snprintf(buf + o, cap - o, "%s%s", o ? "," : "", m->spec.name);
        }
    return buf;
}
