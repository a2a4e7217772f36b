// am_sets — two-level logic minimisation's inner work, as espresso's: covers of
// cubes (bit vectors of 2 bits a variable) are intersected pairwise, the non-empty
// results kept in growing arrays and deduplicated through a hash set of heap entries,
// then the cover is replaced by what survived. Many small blocks of a few sizes and
// arrays grown by realloc. A calibration program of seconds (bench/calibration.py),
// written here: the peer's espresso is not served by any registry this project may use.
//
// usage: am_sets VARS CUBES ROUNDS [SEED]
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    size_t n, cap;
    uint64_t **cube;
} am_cover;

typedef struct am_entry {
    uint64_t hash;
    uint64_t *cube;
    struct am_entry *next;
} am_entry;

static size_t am_words;  // 64-bit words a cube takes
static uint64_t am_seed = 88172645463325252ULL;

static uint64_t am_rand(void) {
    am_seed ^= am_seed << 13, am_seed ^= am_seed >> 7, am_seed ^= am_seed << 17;
    return am_seed;
}

static void *am_alloc(size_t n) {
    void *p = malloc(n);
    if (!p) {
        perror("malloc");
        exit(1);
    }
    return p;
}

static void am_push(am_cover *c, uint64_t *cube) {
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 16;
        c->cube = realloc(c->cube, c->cap * sizeof *c->cube);
        if (!c->cube) {
            perror("realloc");
            exit(1);
        }
    }
    c->cube[c->n++] = cube;
}

static uint64_t *am_random_cube(int vars) {
    uint64_t *q = am_alloc(am_words * sizeof *q);
    memset(q, 0, am_words * sizeof *q);
    for (int v = 0; v < vars; v++) {
        uint64_t r = am_rand() % 4;  // 01: x, 10: not x, 11: don't care (most)
        uint64_t bits = r == 0 ? 1 : r == 1 ? 2 : 3;
        q[v / 32] |= bits << (2 * (v % 32));
    }
    return q;
}

// The intersection of two cubes; NULL when some variable is empty in it.
static uint64_t *am_meet(const uint64_t *a, const uint64_t *b, int vars) {
    uint64_t *q = am_alloc(am_words * sizeof *q);
    for (size_t w = 0; w < am_words; w++) {
        q[w] = a[w] & b[w];
        int in_word = vars - (int)w * 32 < 32 ? vars - (int)w * 32 : 32;
        uint64_t lo = q[w] & 0x5555555555555555ULL, hi = (q[w] >> 1) & 0x5555555555555555ULL;
        uint64_t live = in_word == 32 ? 0x5555555555555555ULL : (1ULL << (2 * in_word)) / 3;
        if (((lo | hi) & live) != live) {
            free(q);
            return NULL;
        }
    }
    return q;
}

static uint64_t am_hash(const uint64_t *q) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t w = 0; w < am_words; w++) h = (h ^ q[w]) * 1099511628211ULL;
    return h;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: am_sets VARS CUBES ROUNDS [SEED]\n");
        return 2;
    }
    int vars = atoi(argv[1]), cubes = atoi(argv[2]), rounds = atoi(argv[3]);
    if (argc > 4) am_seed ^= strtoull(argv[4], NULL, 10) * 2654435761ULL;
    if (vars < 1 || cubes < 2 || rounds < 1) {
        fprintf(stderr, "am_sets: VARS >= 1, CUBES >= 2, ROUNDS >= 1\n");
        return 2;
    }
    am_words = ((size_t)vars + 31) / 32;
    size_t buckets = 1u << 16;
    am_entry **table = calloc(buckets, sizeof *table);
    if (!table) return 1;
    am_cover cover = {0, 0, NULL};
    uint64_t kept_total = 0;
    for (int r = 0; r < rounds; r++) {
        while (cover.n < (size_t)cubes) am_push(&cover, am_random_cube(vars));
        am_cover next = {0, 0, NULL};
        for (size_t i = 0; i < cover.n; i++)
            for (size_t j = i + 1; j < cover.n && j < i + 64; j++) {
                uint64_t *q = am_meet(cover.cube[i], cover.cube[j], vars);
                if (!q) continue;
                uint64_t h = am_hash(q);
                am_entry **slot = &table[h & (buckets - 1)], *e = *slot;
                while (e && !(e->hash == h && !memcmp(e->cube, q, am_words * 8))) e = e->next;
                if (e) {
                    free(q);
                    continue;
                }
                e = am_alloc(sizeof *e);
                *e = (am_entry){h, q, *slot};
                *slot = e;
                am_push(&next, q);
            }
        for (size_t i = 0; i < cover.n; i++) free(cover.cube[i]);
        free(cover.cube);
        for (size_t b = 0; b < buckets; b++)
            while (table[b]) {
                am_entry *e = table[b];
                table[b] = e->next;
                free(e);
            }
        // the next cover: every other survivor, the rest drawn anew at the round's start
        cover = (am_cover){0, 0, NULL};
        for (size_t i = 0; i < next.n; i++) {
            if (i % 2 == 0 && cover.n < (size_t)cubes / 2)
                am_push(&cover, next.cube[i]);
            else
                free(next.cube[i]);
        }
        kept_total += next.n;
        free(next.cube);
    }
    for (size_t i = 0; i < cover.n; i++) free(cover.cube[i]);
    free(cover.cube);
    free(table);
    printf("%llu\n", (unsigned long long)kept_total);
    return 0;
}
