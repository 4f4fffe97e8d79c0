/* test_policy.c — the server's batching policy (server/sched/policy.h), step by step,
 * without threads or a model: cost accounting and limits, fairness (a small request
 * runs in the next batch while a large one is queued), no starvation of the large
 * one, order within a request, option keys, deadlines and cancellation.
 */
#include <stdlib.h>
#include <string.h>

#include "server/sched/policy.h"
#include "tests/c/check.h"

#define MAXN 512

typedef struct {
    int id;
    long cost[MAXN];
    int tokens[MAXN];
    int n;
} req;

static void fill(req *r, int id, int n, int beam, int tokens) {
    r->id = id;
    r->n = n;
    for (int i = 0; i < n; i++) {
        r->tokens[i] = tokens;
        r->cost[i] = dmt_policy_cost(beam, tokens, 254);
    }
}

static int add_from(dmt_policy *p, req *r, const char *client, const void *key, double deadline, double now) {
    dmt_policy_request pr = {.owner = r, .client = client, .key = key, .n = r->n, .cost = r->cost,
                             .tokens = r->tokens, .deadline = deadline};
    return dmt_policy_add(p, &pr, now);
}

static int add(dmt_policy *p, req *r, const void *key, double deadline, double now) {
    return add_from(p, r, NULL, key, deadline, now);
}

static int count_of(const dmt_policy_pick *b, int n, const req *r) {
    int k = 0;
    for (int i = 0; i < n; i++) k += b[i].owner == r;
    return k;
}

static void test_cost(void) {
    CHECK(dmt_policy_cost(4, 10, 254) == 4 * (10 + 1 + 16), "cost = beam x (source + </s> + expected output)",
          "%ld", dmt_policy_cost(4, 10, 254));
    CHECK(dmt_policy_cost(16, 190, 254) == 16L * (191 + 241), "a long source at beam 16", "%ld",
          dmt_policy_cost(16, 190, 254));
    CHECK(dmt_policy_cost(4, 100, 20) == 4 * (101 + 20), "the expected output is capped by max_length");
    CHECK(dmt_policy_cost(8, 10, 254) == 2 * dmt_policy_cost(4, 10, 254), "cost grows with the beam (alternatives)");
    dmt_policy *p = dmt_policy_new((dmt_policy_limits){.max_batch_sentences = 8}, NULL);
    static req a, b;
    fill(&a, 1, 3, 4, 10);
    fill(&b, 2, 2, 16, 50);
    add(p, &a, NULL, 0, 1.0);
    add(p, &b, NULL, 0, 2.0);
    long want = 3 * a.cost[0] + 2 * b.cost[0];
    CHECK(dmt_policy_queued(p) == 5 && dmt_policy_queued_cost(p) == want && dmt_policy_requests(p) == 2,
          "queued sentences, requests and cost are accounted", "%d %ld", dmt_policy_queued(p),
          dmt_policy_queued_cost(p));
    CHECK(dmt_policy_oldest(p) == 1.0, "the oldest waiting request's arrival");
    dmt_policy_pick out[8];
    int n = dmt_policy_take(p, 8, out);
    CHECK(n == 5 && dmt_policy_queued(p) == 0 && dmt_policy_queued_cost(p) == 0 && dmt_policy_requests(p) == 0,
          "taking everything empties the accounts");
    dmt_policy_free(p);
}

static void test_check(void) {
    dmt_policy_limits lim = {.max_batch_sentences = 32, .max_batch_tokens = 4096, .max_batch_cost = 10000,
                             .max_request_cost = 50000};
    char err[512];
    long c[3] = {5000, 9000, 100};
    int t[3] = {100, 200, 5};
    CHECK(dmt_policy_check(&lim, 3, c, t, err, sizeof err) == 0, "a request within the limits passes");
    c[1] = 12000;
    CHECK(dmt_policy_check(&lim, 3, c, t, err, sizeof err) == 413 && strstr(err, "sentence 2") &&
              strstr(err, "--max-batch-cost"),
          "a sentence over the batch cost: 413 naming it and the limit", "%s", err);
    c[1] = 9000;
    t[2] = 5000;
    CHECK(dmt_policy_check(&lim, 3, c, t, err, sizeof err) == 413 && strstr(err, "sentence 3"),
          "a sentence over the batch tokens: 413", "%s", err);
    t[2] = 5;
    long many[10];
    int tok[10];
    for (int i = 0; i < 10; i++) many[i] = 6000, tok[i] = 10;
    CHECK(dmt_policy_check(&lim, 10, many, tok, err, sizeof err) == 413 && strstr(err, "--max-request-cost") &&
              strstr(err, "60000"),
          "a request over the request cost: 413 with its cost and the limit", "%s", err);
    lim.max_request_cost = 0;
    CHECK(dmt_policy_check(&lim, 10, many, tok, err, sizeof err) == 0, "max_request_cost 0: no request limit");
}

/* A large request is queued; a small one arriving later runs in the very next
 * batch, and the large one keeps progressing while small ones keep coming. */
static void test_fairness(void) {
    static req big, small[40];
    fill(&big, 0, 200, 16, 190); /* the heavy request: 200 long sentences, beam 16 */
    long per = big.cost[0];
    dmt_policy_limits lim = {.max_batch_sentences = 32, .max_batch_tokens = 1 << 20, .max_batch_cost = 2 * per};
    dmt_policy *p = dmt_policy_new(lim, NULL);
    add(p, &big, NULL, 0, 0);
    dmt_policy_pick b[32];
    int n = dmt_policy_take(p, 32, b);
    CHECK(n == 2 && count_of(b, n, &big) == 2 && b[0].index == 0 && b[1].index == 1,
          "the batch cost caps a batch of heavy sentences (2 of them), taken in order", "n=%d", n);
    fill(&small[0], 1, 1, 4, 12);
    add(p, &small[0], NULL, 0, 1);
    n = dmt_policy_take(p, 32, b);
    CHECK(count_of(b, n, &small[0]) == 1, "a small request arriving while a large one waits runs in the next batch",
          "n=%d", n);
    /* a steady stream: one small request per batch, for 39 batches */
    int big_taken = 0, small_late = 0;
    for (int k = 1; k < 40; k++) {
        fill(&small[k], 1 + k, 1, 4, 12);
        add(p, &small[k], NULL, 0, 1 + k);
        n = dmt_policy_take(p, 32, b);
        big_taken += count_of(b, n, &big);
        small_late += count_of(b, n, &small[k]) != 1;
        for (int i = 1; i < n; i++)
            if (b[i].owner == &big && b[i - 1].owner == &big && b[i].index != b[i - 1].index + 1) small_late += 100;
    }
    CHECK(small_late == 0, "every small request of a steady stream runs in the batch after it arrives", "%d",
          small_late);
    CHECK(big_taken >= 39, "the large request is not starved: at least one of its sentences in each batch",
          "%d sentences in 39 batches", big_taken);
    while (dmt_policy_queued(p) > 0) n = dmt_policy_take(p, 32, b);
    CHECK(dmt_policy_requests(p) == 0, "the large request is eventually taken completely");
    dmt_policy_free(p);
}

/* Two medium requests of equal sentences share batches half and half. */
static void test_round_robin(void) {
    static req a, c;
    fill(&a, 1, 40, 4, 20);
    fill(&c, 2, 40, 4, 20);
    dmt_policy *p = dmt_policy_new((dmt_policy_limits){.max_batch_sentences = 8}, NULL);
    add(p, &a, NULL, 0, 0);
    add(p, &c, NULL, 0, 0.5);
    dmt_policy_pick b[8];
    int n = dmt_policy_take(p, 8, b), na = count_of(b, n, &a), nc = count_of(b, n, &c);
    CHECK(n == 8 && na == 4 && nc == 4, "two equal requests share a batch half and half", "%d %d", na, nc);
    n = dmt_policy_take(p, 3, b);
    CHECK(n == 3, "the caller's limit (an even share for idle workers) bounds the batch");
    dmt_policy_free(p);
}

static int same_int(const void *x, const void *y) { return *(const int *)x == *(const int *)y; }

static void test_keys(void) {
    static req a, c, d;
    int k4a = 4, k4b = 4, k8 = 8;
    fill(&a, 1, 3, 4, 10);
    fill(&c, 2, 3, 8, 10);
    fill(&d, 3, 3, 4, 10);
    dmt_policy *p = dmt_policy_new((dmt_policy_limits){.max_batch_sentences = 16}, same_int);
    add(p, &a, &k4a, 0, 0);
    add(p, &c, &k8, 0, 1);
    add(p, &d, &k4b, 0, 2);
    dmt_policy_pick b[16];
    int n = dmt_policy_take(p, 16, b);
    CHECK(n == 6 && count_of(b, n, &a) == 3 && count_of(b, n, &d) == 3,
          "only requests with equal decoding options share a batch", "n=%d", n);
    n = dmt_policy_take(p, 16, b);
    CHECK(n == 3 && count_of(b, n, &c) == 3, "the other options get the next batch");
    dmt_policy_free(p);
}

/* Continuous batching: adding to a running batch keeps its options and the cost
 * left; a heavy sentence that does not fit waits while a light one joins. */
static void test_take_more(void) {
    static req heavy, light, other;
    int k16a = 16, k16b = 16, k4 = 4;
    fill(&heavy, 1, 10, 16, 190);
    fill(&light, 2, 1, 16, 10);
    fill(&other, 3, 2, 4, 10);
    long per = heavy.cost[0];
    dmt_policy *p = dmt_policy_new((dmt_policy_limits){.max_batch_sentences = 32, .max_batch_cost = 2 * per + 1000},
                                   same_int);
    add(p, &heavy, &k16a, 0, 0);
    add(p, &other, &k4, 0, 0.5);
    dmt_policy_pick b[32];
    int n = dmt_policy_take_more(p, NULL, 0, 32, b);
    CHECK(n == 2 && count_of(b, n, &heavy) == 2, "an empty running batch: the first pick decides, 2 heavy fit",
          "n=%d", n);
    add(p, &light, &k16b, 0, 1);
    n = dmt_policy_take_more(p, &k16a, 2 * per, 32, b);
    CHECK(n == 1 && b[0].owner == &light, "running 2 heavy: a light sentence joins, the third heavy waits",
          "n=%d", n);
    n = dmt_policy_take_more(p, &k16a, per, 32, b);
    CHECK(n == 1 && b[0].owner == &heavy && b[0].index == 2, "one heavy left: the next heavy joins in order");
    n = dmt_policy_take_more(p, &k16a, 0, 0, b);
    CHECK(n == 0, "no room (limit 0): nothing joins");
    n = dmt_policy_take_more(p, NULL, 2 * per, 32, b);
    CHECK(n == 2 && count_of(b, n, &other) == 2,
          "another session running 2 heavy (no key, cost used): only what fits the cost left", "n=%d", n);
    add(p, &other, &k4, 0, 2);
    n = dmt_policy_take_more(p, &k4, 0, 32, b);
    CHECK(n == 2 && count_of(b, n, &other) == 2, "other options only join a batch of their own");
    dmt_policy_free(p);
}

/* A key's own room (a model measured to run fastest in small batches): room(k) =
 * what that key may still add. Keys here are ints; the room is the int's value
 * less the sentences already picked of it, read from ctx. */
typedef struct {
    int used[2]; /* picked so far of keys 2 and 4 */
} rooms;

static int room_of(const void *key, void *ctx) {
    const rooms *r = ctx;
    int k = *(const int *)key;
    return k == 2 ? 2 - r->used[0] : k == 4 ? -1 : 0; /* key 4: no limit of its own; others: full */
}

static void test_take_within(void) {
    static req small, big, blocked;
    int k2 = 2, k4 = 4, k0 = 0;
    fill(&small, 1, 5, 4, 10);
    fill(&big, 2, 5, 4, 10);
    fill(&blocked, 3, 3, 4, 10);
    dmt_policy *p = dmt_policy_new((dmt_policy_limits){.max_batch_sentences = 16}, same_int);
    add(p, &blocked, &k0, 0, 0);
    add(p, &small, &k2, 0, 1);
    add(p, &big, &k4, 0, 2);
    dmt_policy_pick b[16];
    rooms r = {{0, 0}};
    int n = dmt_policy_take_within(p, NULL, 0, 16, room_of, &r, b);
    CHECK(n == 2 && count_of(b, n, &small) == 2,
          "a key without room is passed over; the next key's batch stops at its room (2)", "n=%d", n);
    r.used[0] = 1;
    n = dmt_policy_take_within(p, &k2, 0, 16, room_of, &r, b);
    CHECK(n == 1 && b[0].owner == &small && b[0].index == 2, "a running batch of that key with 1: 1 more joins",
          "n=%d", n);
    r.used[0] = 2;
    n = dmt_policy_take_within(p, &k2, 0, 16, room_of, &r, b);
    CHECK(n == 0, "its batch full: nothing joins", "n=%d", n);
    n = dmt_policy_take_within(p, NULL, 0, 16, room_of, &r, b);
    CHECK(n == 5 && count_of(b, n, &big) == 5, "a key with no limit of its own fills to the batch limit", "n=%d",
          n);
    n = dmt_policy_take_within(p, NULL, 0, 16, NULL, NULL, b);
    CHECK(n == 3 && count_of(b, n, &blocked) == 3, "without a room function every key may run", "n=%d", n);
    CHECK(dmt_policy_queued(p) == 2, "the limited key's last 2 sentences still wait", "%d", dmt_policy_queued(p));
    dmt_policy_free(p);
}

/* A worker waiting for company stops once a batch is full: the batch limit, or a
 * key's own room (room_of: key 2 holds 2, key 4 has no limit of its own). */
static void test_batch_full(void) {
    static req one, two, four;
    int k2 = 2, k4 = 4, k2b = 2, k0 = 0;
    fill(&one, 1, 1, 4, 10);
    fill(&two, 2, 1, 4, 10);
    fill(&four, 3, 3, 4, 10);
    dmt_policy *p = dmt_policy_new((dmt_policy_limits){.max_batch_sentences = 16}, same_int);
    rooms r = {{0, 0}};
    CHECK(!dmt_policy_batch_full(p, 6, room_of, &r), "nothing waiting: not full");
    add(p, &four, &k4, 0, 0);
    add(p, &one, &k2, 0, 1);
    CHECK(!dmt_policy_batch_full(p, 6, room_of, &r), "3 of a key without a limit (6) and 1 of key 2 (room 2): not full");
    add(p, &two, &k2b, 0, 2);
    CHECK(dmt_policy_batch_full(p, 6, room_of, &r), "2 of key 2 in two requests fill its room (2): full");
    CHECK(!dmt_policy_batch_full(p, 6, NULL, NULL), "without a room function: 5 waiting, limit 6: not full");
    CHECK(dmt_policy_batch_full(p, 5, NULL, NULL), "5 waiting, limit 5: full");
    dmt_policy_pick b[4];
    int n = dmt_policy_take_within(p, &k2, 0, 1, NULL, NULL, b);
    CHECK(n == 1 && !dmt_policy_batch_full(p, 6, room_of, &r), "1 of key 2 taken: its room not filled again");
    static req blocked;
    fill(&blocked, 4, 1, 4, 10);
    add(p, &blocked, &k0, 0, 3);
    CHECK(!dmt_policy_batch_full(p, 6, room_of, &r), "a key with no room now does not count as full");
    dmt_policy_free(p);
}

/* Under a steady stream of one-sentence requests (each leaving once picked), a
 * two-sentence request's second sentence still runs within a couple of picks: the
 * newcomers do not start below the level the last pick reached. The same across
 * clients, each newcomer a client of its own. */
static void test_stream(void) {
    for (int across = 0; across < 2; across++) {
        static req two, first, fresh[12];
        static char names[12][16];
        fill(&two, 1, 2, 4, 10);
        fill(&first, 2, 1, 4, 10);
        dmt_policy *p = dmt_policy_new((dmt_policy_limits){.max_batch_sentences = 8}, NULL);
        add_from(p, &two, across ? "two" : NULL, NULL, 0, 0);
        add_from(p, &first, across ? "first" : NULL, NULL, 0, 0.1);
        dmt_policy_pick b[1];
        int n = dmt_policy_take(p, 1, b);
        CHECK(n == 1 && b[0].owner == &two && b[0].index == 0, "the stream: the two-sentence request starts");
        int second_at = -1;
        for (int i = 0; i < 12 && second_at < 0; i++) {
            fill(&fresh[i], 10 + i, 1, 4, 10);
            snprintf(names[i], sizeof names[i], "c%d", i);
            add_from(p, &fresh[i], across ? names[i] : NULL, NULL, 0, 1.0 + i);
            n = dmt_policy_take(p, 1, b);
            if (n == 1 && b[0].owner == &two) second_at = i;
        }
        CHECK(second_at >= 0 && second_at <= 2,
              across ? "a stream of new one-request clients does not hold back a client's second sentence"
                     : "a stream of new one-sentence requests does not hold back a request's second sentence",
              "picked at %d", second_at);
        dmt_policy_free(p);
    }
}

static void test_caps(void) {
    static req a, l, s;
    fill(&a, 1, 10, 4, 100);
    dmt_policy *p = dmt_policy_new((dmt_policy_limits){.max_batch_sentences = 16, .max_batch_tokens = 350}, NULL);
    add(p, &a, NULL, 0, 0);
    dmt_policy_pick b[16];
    int n = dmt_policy_take(p, 16, b);
    CHECK(n == 3, "source tokens cap a batch (3 x 100 <= 350)", "n=%d", n);
    dmt_policy_free(p);
    /* one long sentence and short ones: the cap counts pieces, not longest x sentences
     * (which would let the long one run alone: 300 x 2 > 350) */
    fill(&l, 2, 1, 4, 300);
    fill(&s, 3, 10, 4, 10);
    p = dmt_policy_new((dmt_policy_limits){.max_batch_sentences = 16, .max_batch_tokens = 350}, NULL);
    add(p, &l, NULL, 0, 0);
    add(p, &s, NULL, 0, 0.1);
    n = dmt_policy_take(p, 16, b);
    CHECK(n == 6 && count_of(b, n, &l) == 1 && count_of(b, n, &s) == 5,
          "summed, not padded: 300 + 5 x 10 <= 350 share a batch", "n=%d", n);
    dmt_policy_free(p);
}

static void test_deadline_cancel(void) {
    static req a, c, d;
    fill(&a, 1, 6, 4, 10);
    fill(&c, 2, 2, 4, 10);
    fill(&d, 3, 2, 4, 10);
    dmt_policy *p = dmt_policy_new((dmt_policy_limits){.max_batch_sentences = 2}, NULL);
    add(p, &a, NULL, 5.0, 0);
    add(p, &c, NULL, 5.0, 0.1);
    add(p, &d, NULL, 0, 0.2);
    dmt_policy_pick b[2];
    int n = dmt_policy_take(p, 2, b); /* one of a, one of c */
    CHECK(n == 2 && count_of(b, n, &a) == 1 && count_of(b, n, &c) == 1, "first batch: a and c start");
    void *gone[4];
    CHECK(dmt_policy_expire(p, 4.0, gone, 4) == 0, "nothing expires before its deadline");
    add(p, &(req){0}, NULL, 0, 0); /* n = 0: ignored */
    static req e;
    fill(&e, 4, 3, 4, 10);
    add(p, &e, NULL, 5.5, 4.5);
    int k = dmt_policy_expire(p, 6.0, gone, 4);
    CHECK(k == 1 && gone[0] == &e, "past its deadline, a request not started leaves the queue", "k=%d", k);
    CHECK(dmt_policy_queued(p) == 5 + 1 + 2, "a started request past its deadline keeps its queued sentences",
          "%d", dmt_policy_queued(p));
    CHECK(dmt_policy_remove(p, &a) == 5 && dmt_policy_queued(p) == 3, "cancelling drops its queued sentences");
    CHECK(dmt_policy_remove(p, &a) == 0, "cancelling twice is harmless");
    n = dmt_policy_take(p, 2, b);
    int ci = b[0].owner == &c ? 0 : 1;
    CHECK(n == 2 && b[ci].owner == &c && b[ci].index == 1 && b[!ci].owner == &d && b[!ci].index == 0,
          "the others run on, each in order");
    dmt_policy_free(p);
}

/* Fairness between clients: one client's flood of requests gets one share, not
 * one a request. */
static void test_clients(void) {
    dmt_policy *p = dmt_policy_new((dmt_policy_limits){.max_batch_sentences = 8}, NULL);
    static req flood[12], b, c;
    for (int i = 0; i < 12; i++) {
        fill(&flood[i], 100 + i, 1, 4, 10);
        add_from(p, &flood[i], "addr:10.0.0.1", NULL, 0, 1.0 + i * 0.01);
    }
    fill(&b, 2, 1, 4, 10);
    add_from(p, &b, "addr:10.0.0.2", NULL, 0, 2.0);
    dmt_policy_pick out[8];
    int when_b = -1;
    for (int k = 0; k < 13; k++) {
        int n = dmt_policy_take(p, 1, out);
        if (n == 1 && out[0].owner == &b) when_b = k;
    }
    CHECK(when_b == 1, "a client's one request runs 2nd beside another client's 12 (was 13th: shares were per request)",
          "picked %d-th", when_b + 1);
    CHECK(dmt_policy_requests(p) == 0, "and the flood still runs whole");

    /* a client that comes late joins at the least service among those waiting: it
     * is not owed the flood's past (it would then hold the workers for as long) */
    for (int i = 0; i < 12; i++) add_from(p, &flood[i], "addr:10.0.0.1", NULL, 0, 3.0);
    for (int k = 0; k < 6; k++) dmt_policy_take(p, 1, out);
    fill(&c, 3, 6, 4, 10);
    add_from(p, &c, "key:abc", NULL, 0, 4.0);
    int seq_c[8], m = 0;
    for (int k = 0; k < 8; k++) {
        dmt_policy_take(p, 1, out);
        seq_c[m++] = out[0].owner == &c;
    }
    int alternate = 1;
    for (int k = 1; k < 8; k++) alternate &= seq_c[k] != seq_c[k - 1];
    CHECK(alternate, "a late client alternates with the flooding one (neither starves)", "%d%d%d%d%d%d%d%d",
          seq_c[0], seq_c[1], seq_c[2], seq_c[3], seq_c[4], seq_c[5], seq_c[6], seq_c[7]);
    while (dmt_policy_take(p, 8, out) > 0) {
    }
    dmt_policy_free(p);
}

int main(void) {
    test_clients();
    test_cost();
    test_check();
    test_fairness();
    test_round_robin();
    test_keys();
    test_caps();
    test_take_more();
    test_take_within();
    test_batch_full();
    test_stream();
    test_deadline_cancel();
    return check_done();
}
