// am_bignum — arbitrary-precision arithmetic on the heap, as cfrac's is: every
// operation allocates its result's limbs and the operands it no longer needs are
// freed, so the allocator sees many short-lived blocks of growing, varied sizes.
// A calibration program of seconds (bench/calibration.py), written here: the
// peer's cfrac is not served by any registry this project may use.
//
// It takes N steps of Fibonacci numbers by heap bignum additions, starting over every
// RESET steps (numbers of up to RESET * 0.69 bits: allocation, not multiplication,
// is most of the work), keeping a ring of the last RING of them; every STRIDE-th
// step it multiplies two ring members and folds the product's limbs into a checksum.
// Prints the checksum (the work is real).
//
// usage: am_bignum N [RING] [STRIDE] [RESET]
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    size_t n;        // limbs in use
    uint32_t *limb;  // little-endian base 2^32
} am_num;

static am_num am_make(size_t n) {
    am_num r = {n, calloc(n ? n : 1, sizeof(uint32_t))};
    if (!r.limb) {
        perror("calloc");
        exit(1);
    }
    return r;
}

static void am_trim(am_num *a) {
    while (a->n > 1 && a->limb[a->n - 1] == 0) a->n--;
}

static am_num am_add(const am_num *a, const am_num *b) {
    size_t n = (a->n > b->n ? a->n : b->n) + 1;
    am_num r = am_make(n);
    uint64_t carry = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t s = carry;
        if (i < a->n) s += a->limb[i];
        if (i < b->n) s += b->limb[i];
        r.limb[i] = (uint32_t)s;
        carry = s >> 32;
    }
    am_trim(&r);
    return r;
}

static am_num am_mul(const am_num *a, const am_num *b) {
    am_num r = am_make(a->n + b->n);
    for (size_t i = 0; i < a->n; i++) {
        uint64_t carry = 0;
        for (size_t j = 0; j < b->n; j++) {
            uint64_t t = (uint64_t)a->limb[i] * b->limb[j] + r.limb[i + j] + carry;
            r.limb[i + j] = (uint32_t)t;
            carry = t >> 32;
        }
        r.limb[i + b->n] = (uint32_t)carry;
    }
    am_trim(&r);
    return r;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: am_bignum N [RING] [STRIDE] [RESET]\n");
        return 2;
    }
    long steps = atol(argv[1]);
    long ring_size = argc > 2 ? atol(argv[2]) : 64;
    long stride = argc > 3 ? atol(argv[3]) : 7;
    long reset = argc > 4 ? atol(argv[4]) : 3000;
    if (steps < 2 || ring_size < 2 || stride < 1 || reset < 2) {
        fprintf(stderr, "am_bignum: N >= 2, RING >= 2, STRIDE >= 1, RESET >= 2\n");
        return 2;
    }
    am_num *ring = calloc((size_t)ring_size, sizeof(am_num));
    if (!ring) return 1;
    am_num prev = am_make(1), cur = am_make(1);
    cur.limb[0] = 1;
    uint64_t sum = 0;
    for (long i = 1; i <= steps; i++) {
        if (i % reset == 0) {  // start over: 0, 1
            memset(prev.limb, 0, prev.n * sizeof(uint32_t));
            prev.n = 1;
            memset(cur.limb, 0, cur.n * sizeof(uint32_t));
            cur.n = 1;
            cur.limb[0] = 1;
        }
        am_num next = am_add(&prev, &cur);
        free(prev.limb);
        prev = cur;
        cur = next;
        am_num *slot = &ring[i % ring_size];
        free(slot->limb);
        *slot = am_make(cur.n);
        memcpy(slot->limb, cur.limb, cur.n * sizeof(uint32_t));
        if (i % stride == 0 && ring[(i / 2) % ring_size].limb) {
            am_num p = am_mul(slot, &ring[(i / 2) % ring_size]);
            for (size_t k = 0; k < p.n; k += 17) sum = sum * 31 + p.limb[k];
            free(p.limb);
        }
    }
    printf("%llu %zu\n", (unsigned long long)sum, cur.n);
    for (long i = 0; i < ring_size; i++) free(ring[i].limb);
    free(ring);
    free(prev.limb);
    free(cur.limb);
    return 0;
}
