// am_octree — a Barnes–Hut n-body step, as barnes's: every step builds an octree of
// the bodies (a heap node per cell, allocated as bodies are inserted), sums each
// cell's mass, walks the tree for every body's force and frees it. A calibration
// program of seconds (bench/calibration.py), written here: the peer's barnes is not
// served by any registry this project may use.
//
// usage: am_octree BODIES STEPS [SEED]
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct am_cell {
    double centre[3], half;   // the cube this cell covers
    double mass, com[3];      // its bodies' mass and centre of mass
    int body;                 // a leaf's one body, or -1
    struct am_cell *kid[8];
} am_cell;

typedef struct {
    double pos[3], vel[3], acc[3], mass;
} am_body;

static am_cell *am_new_cell(const double centre[3], double half) {
    am_cell *c = calloc(1, sizeof *c);
    if (!c) {
        perror("calloc");
        exit(1);
    }
    for (int k = 0; k < 3; k++) c->centre[k] = centre[k];
    c->half = half;
    c->body = -1;
    return c;
}

static int am_octant(const am_cell *c, const double p[3]) {
    return (p[0] > c->centre[0]) | (p[1] > c->centre[1]) << 1 | (p[2] > c->centre[2]) << 2;
}

static am_cell *am_child(am_cell *c, int o) {
    if (!c->kid[o]) {
        double centre[3], h = c->half / 2;
        for (int k = 0; k < 3; k++) centre[k] = c->centre[k] + ((o >> k) & 1 ? h : -h);
        c->kid[o] = am_new_cell(centre, h);
    }
    return c->kid[o];
}

static void am_insert(am_cell *c, const am_body *bodies, int b, int depth) {
    if (depth > 40) return;  // coincident bodies: the cell keeps the first
    int leaf = 1;
    for (int o = 0; o < 8; o++) leaf &= c->kid[o] == NULL;
    if (leaf && c->body < 0 && c->mass == 0) {
        c->body = b;
        c->mass = 1;  // marks it taken until the masses are summed
        return;
    }
    if (c->body >= 0) {
        int old = c->body;
        c->body = -1;
        am_insert(am_child(c, am_octant(c, bodies[old].pos)), bodies, old, depth + 1);
    }
    am_insert(am_child(c, am_octant(c, bodies[b].pos)), bodies, b, depth + 1);
}

static void am_sum(am_cell *c, const am_body *bodies) {
    c->mass = 0;
    for (int k = 0; k < 3; k++) c->com[k] = 0;
    if (c->body >= 0) {
        c->mass = bodies[c->body].mass;
        for (int k = 0; k < 3; k++) c->com[k] = bodies[c->body].pos[k];
        return;
    }
    for (int o = 0; o < 8; o++) {
        am_cell *kid = c->kid[o];
        if (!kid) continue;
        am_sum(kid, bodies);
        c->mass += kid->mass;
        for (int k = 0; k < 3; k++) c->com[k] += kid->mass * kid->com[k];
    }
    if (c->mass > 0)
        for (int k = 0; k < 3; k++) c->com[k] /= c->mass;
}

static void am_force(const am_cell *c, am_body *b, int self, const am_body *bodies) {
    if (!c || c->mass == 0 || c->body == self) return;
    double d[3], r2 = 1e-4;  // softened
    for (int k = 0; k < 3; k++) {
        d[k] = c->com[k] - b->pos[k];
        r2 += d[k] * d[k];
    }
    if (c->body >= 0 || (2 * c->half) * (2 * c->half) < 0.25 * r2) {  // theta = 0.5
        double f = c->mass / (r2 * sqrt(r2));
        for (int k = 0; k < 3; k++) b->acc[k] += f * d[k];
        return;
    }
    for (int o = 0; o < 8; o++) am_force(c->kid[o], b, self, bodies);
}

static void am_free_tree(am_cell *c) {
    if (!c) return;
    for (int o = 0; o < 8; o++) am_free_tree(c->kid[o]);
    free(c);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: am_octree BODIES STEPS [SEED]\n");
        return 2;
    }
    int n = atoi(argv[1]), steps = atoi(argv[2]);
    uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 10) : 1;
    if (n < 2 || steps < 1) {
        fprintf(stderr, "am_octree: BODIES >= 2, STEPS >= 1\n");
        return 2;
    }
    am_body *bodies = calloc((size_t)n, sizeof *bodies);
    if (!bodies) return 1;
    for (int i = 0; i < n; i++) {  // a Plummer-like ball from an xorshift generator
        for (int k = 0; k < 3; k++) {
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            bodies[i].pos[k] = (double)(seed >> 11) / 9007199254740992.0 - 0.5;
        }
        bodies[i].mass = 1.0 / n;
    }
    double dt = 1e-3, energy = 0;
    for (int s = 0; s < steps; s++) {
        double zero[3] = {0, 0, 0};
        am_cell *root = am_new_cell(zero, 4.0);
        for (int i = 0; i < n; i++) am_insert(root, bodies, i, 0);
        am_sum(root, bodies);
        for (int i = 0; i < n; i++) {
            for (int k = 0; k < 3; k++) bodies[i].acc[k] = 0;
            am_force(root, &bodies[i], i, bodies);
        }
        for (int i = 0; i < n; i++)
            for (int k = 0; k < 3; k++) {
                bodies[i].vel[k] += dt * bodies[i].acc[k];
                double p = bodies[i].pos[k] + dt * bodies[i].vel[k];
                bodies[i].pos[k] = p < -3.9 ? -3.9 : p > 3.9 ? 3.9 : p;  // stay in the root
            }
        am_free_tree(root);
    }
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) energy += bodies[i].mass * bodies[i].vel[k] * bodies[i].vel[k];
    printf("%.9g\n", energy / 2);
    free(bodies);
    return 0;
}
