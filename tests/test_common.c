/* test_common.c: the shared helpers — byte parsing, RNG determinism and range. */
#include "base/common.h"
#include "tests/testutil.h"

int main(void) {
    TCHECK(vt_parse_bytes("12G") == 12LL << 30, "12G");
    TCHECK(vt_parse_bytes("512M") == 512LL << 20, "512M");
    TCHECK(vt_parse_bytes("1.5GiB") == 3LL << 29, "1.5GiB");
    TCHECK(vt_parse_bytes("100") == 100, "100");
    TCHECK(vt_parse_bytes("x") == -1, "x");
    TCHECK(vt_parse_bytes("5Q") == -1, "5Q");
    vt_rng a, b;
    vt_rng_seed(&a, 42);
    vt_rng_seed(&b, 42);
    for (int i = 0; i < 1000; i++)
        TCHECK(vt_rng_u64(&a) == vt_rng_u64(&b), "same seed, same stream");
    double s = 0;
    for (int i = 0; i < 100000; i++) {
        uint32_t k = vt_rng_below(&a, 7);
        TCHECK(k < 7, "below 7: %u", k);
        s += vt_rng_uniform(&a);
    }
    /* mean of 1e5 uniforms: sd 0.29/sqrt(1e5) = 0.0009; 0.01 is > 10 sd */
    TCHECK(fabs(s / 100000 - 0.5) < 0.01, "uniform mean %f", s / 100000);
    return vt_test_done("test_common");
}
