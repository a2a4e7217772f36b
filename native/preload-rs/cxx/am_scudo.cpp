// scudo's C wrappers, compiled with an am_scudo_ prefix against the sources
// that scudo-sys bundles (the crate itself exports no C API). A second
// allocator instance of scudo's default config: the crate's own instance
// stays unused.
#include "platform.h"
#include "allocator_config.h"
#include "wrappers_c.h"
#include "wrappers_c_checks.h"

#include <stdint.h>
#include <stdio.h>

#define SCUDO_PREFIX(name) am_scudo_##name
#define SCUDO_ALLOCATOR am_scudo_allocator

extern "C" void SCUDO_PREFIX(malloc_postinit)();

SCUDO_REQUIRE_CONSTANT_INITIALIZATION
scudo::Allocator<scudo::Config, SCUDO_PREFIX(malloc_postinit)> SCUDO_ALLOCATOR;

#include "wrappers_c.inc"
