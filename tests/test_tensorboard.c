/*
 * test_tensorboard.c: RUN/tb/ event files (app/eval/tensorboard.h), read back by a reader
 * written here from the record format (TensorBoard is not installed on the build machine):
 *   - every TFRecord's length and data carry a masked CRC32C that a bitwise CRC32C (not
 *     the writer's table; checked against the standard check value of "123456789") agrees
 *     with, and the file ends on a record boundary;
 *   - every record parses as an Event (wall_time, step, file_version, summary with values
 *     of tag and simple_value or image), the first says "brain.Event:2";
 *   - every number of every metrics.jsonl line is a scalar "<kind>/<key>" at the line's
 *     step with the same float value: the outside truth is the run's own JSON lines;
 *   - each validation left a confusion image per head, and --tb-clips 2 two clip strips
 *     per epoch: PNGs whose header has the Image's width and height, which ffprobe reads
 *     as png.
 */
#include <math.h>

#include "app/eval/tensorboard.h"
#include "base/common.h"
#include "tests/apputil.h"
#include "tests/jsonlines.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

/* CRC32C bit by bit (reflected Castagnoli polynomial): the reader's own. */
static uint32_t crc_bits(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
    }
    return ~c;
}
static uint32_t mask(uint32_t c) { return ((c >> 15) | (c << 17)) + 0xa282ead8u; }
static uint32_t le32(const uint8_t *p) {
    return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---- a protobuf reader, enough for Event ---- */
typedef struct rd { const uint8_t *p, *end; int bad; } rd;
static uint64_t varint(rd *r) {
    uint64_t v = 0;
    for (int s = 0; s < 64; s += 7) {
        if (r->p >= r->end) { r->bad = 1; return 0; }
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80))
            return v;
    }
    r->bad = 1;
    return 0;
}
/* Next field: its number, wire type, and for LEN fields the sub-range. 0 at the end. */
static int field(rd *r, int *wt, rd *sub, uint64_t *num, uint8_t fixed[8]) {
    if (r->p >= r->end || r->bad)
        return 0;
    uint64_t key = varint(r);
    *wt = (int)(key & 7);
    if (*wt == 0) {
        *num = varint(r);
    } else if (*wt == 1 || *wt == 5) {
        int n = *wt == 1 ? 8 : 4;
        if (r->end - r->p < n) { r->bad = 1; return 0; }
        memcpy(fixed, r->p, (size_t)n);
        r->p += n;
    } else if (*wt == 2) {
        uint64_t n = varint(r);
        if ((uint64_t)(r->end - r->p) < n) { r->bad = 1; return 0; }
        sub->p = r->p;
        sub->end = r->p + n;
        sub->bad = 0;
        r->p += n;
    } else {
        r->bad = 1;
        return 0;
    }
    return (int)(key >> 3);
}

#define MAXS 4096
typedef struct scalar { char tag[96]; int64_t step; float v; } scalar;
static scalar sc[MAXS];
static int nsc, nimg, nconf, nclips, nversion, nevents;

static void image_check(rd img, const char *tag, const char *dir) {
    int wt, f;
    rd sub;
    uint64_t num;
    uint8_t fx[8];
    int64_t w = -1, h = -1, cs = -1;
    rd png = {0};
    while ((f = field(&img, &wt, &sub, &num, fx)) != 0) {
        if (f == 1 && wt == 0) h = (int64_t)num;
        if (f == 2 && wt == 0) w = (int64_t)num;
        if (f == 3 && wt == 0) cs = (int64_t)num;
        if (f == 4 && wt == 2) png = sub;
    }
    size_t n = png.p ? (size_t)(png.end - png.p) : 0;
    TCHECK(n > 33 && !memcmp(png.p, "\x89PNG\r\n\x1a\n", 8) && !memcmp(png.p + 12, "IHDR", 4),
           "%s: a PNG", tag);
    if (n > 33) {
        int64_t pw = (int64_t)((uint32_t)png.p[16] << 24 | png.p[17] << 16 | png.p[18] << 8 | png.p[19]);
        int64_t ph = (int64_t)((uint32_t)png.p[20] << 24 | png.p[21] << 16 | png.p[22] << 8 | png.p[23]);
        TCHECK(pw == w && ph == h && cs == 3, "%s: PNG %lldx%lld, Image %lldx%lld colorspace %lld",
               tag, (long long)pw, (long long)ph, (long long)w, (long long)h, (long long)cs);
        char path[4400];
        snprintf(path, sizeof path, "%s/image%d.png", dir, nimg);
        FILE *fp = fopen(path, "wb");
        if (fp) {
            fwrite(png.p, 1, n, fp);
            fclose(fp);
        }
        TCHECK(vt_test_sh("ffprobe -v error -show_entries stream=codec_name,width -of csv=p=0 '%s' "
                          "| grep -q '^png,%lld$'", path, (long long)w) == 0, "ffprobe reads %s", path);
        if (!strncmp(tag, "clips/", 6)) /* --clip 4x32: 4 frames of 32x32 side by side */
            TCHECK(w == 128 && h == 32, "%s: %lldx%lld, want 128x32", tag, (long long)w, (long long)h);
        nconf += !strncmp(tag, "confusion/", 10);
        nclips += !strncmp(tag, "clips/", 6);
    }
    nimg++;
}

static void parse_event(rd ev, const char *dir) {
    int wt, f;
    rd sub;
    uint64_t num;
    uint8_t fx[8];
    int64_t step = 0;
    int have_time = 0;
    rd summary = {0};
    while ((f = field(&ev, &wt, &sub, &num, fx)) != 0) {
        if (f == 1 && wt == 1) have_time = 1;
        else if (f == 2 && wt == 0) step = (int64_t)num;
        else if (f == 3 && wt == 2) nversion += (size_t)(sub.end - sub.p) == 13 && !memcmp(sub.p, "brain.Event:2", 13);
        else if (f == 5 && wt == 2) summary = sub;
    }
    TCHECK(!ev.bad && have_time, "event %d parses (wall_time there)", nevents);
    if (nevents == 0)
        TCHECK(nversion == 1 && !summary.p, "the first event is the file version");
    nevents++;
    if (!summary.p)
        return;
    rd value;
    while ((f = field(&summary, &wt, &value, &num, fx)) != 0) {
        TCHECK(f == 1 && wt == 2, "Summary holds values");
        char tag[96] = "";
        float v = NAN;
        int kind = 0;
        rd img = {0};
        int g;
        while ((g = field(&value, &wt, &sub, &num, fx)) != 0) {
            if (g == 1 && wt == 2)
                snprintf(tag, sizeof tag, "%.*s", (int)(sub.end - sub.p), (const char *)sub.p);
            else if (g == 2 && wt == 5) { memcpy(&v, fx, 4); kind = 1; }
            else if (g == 4 && wt == 2) { img = sub; kind = 2; }
        }
        TCHECK(!value.bad && tag[0] && kind, "a value with a tag and a scalar or an image");
        if (kind == 1 && nsc < MAXS)
            sc[nsc++] = (scalar){.step = step, .v = v};
        if (kind == 1 && nsc <= MAXS)
            snprintf(sc[nsc - 1].tag, sizeof sc[0].tag, "%s", tag);
        if (kind == 2)
            image_check(img, tag, dir);
    }
    TCHECK(!summary.bad, "summary parses");
}

int main(void) {
    const char *bin = vt_test_bin("test_tensorboard");
    if (!bin)
        return VT_TEST_SKIP;
    TCHECK(crc_bits((const uint8_t *)"123456789", 9) == 0xE3069283u, "bitwise CRC32C check value");
    TCHECK(vt_crc32c("123456789", 9) == 0xE3069283u, "writer's CRC32C check value");
    char dir[4096], p[4400];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("tensorboard"));
    vt_test_sh("rm -rf '%s/data' '%s/run'", dir, dir);
    TCHECK(vt_test_synth(bin, dir, "--classes 3 --train 3 --val 2 --test 0 --frames 16") == 0, "synth");
    TCHECK(vt_test_sh("'%s' train '%s/data' --out '%s/run' --model tiny --clip 4x32 --batch 2 "
                      "--epochs 2 --eval-every 1 --log-every 1 --val-clips 1 --no-leak-check "
                      "--tb-clips 2 "
                      "> '%s/train.log' 2>&1", bin, dir, dir, dir) == 0, "train");
    TCHECK(vt_test_sh("ls '%s/run/tb/' | grep -c '^events.out.tfevents.' | grep -qx 1", dir) == 0,
           "one events file");
    TCHECK(vt_test_sh("cd '%s/run/tb' && cp events.out.tfevents.* ../ev.bin", dir) == 0, "copy");
    snprintf(p, sizeof p, "%s/run/ev.bin", dir);
    long len = 0;
    uint8_t *b = (uint8_t *)vt_test_slurp(p, &len);
    if (!b)
        return vt_test_done("test_tensorboard");
    long at = 0;
    int nrec = 0;
    while (at + 12 <= len) {
        uint64_t n = 0;
        for (int i = 0; i < 8; i++)
            n |= (uint64_t)b[at + i] << (8 * i);
        TCHECK(le32(b + at + 8) == mask(crc_bits(b + at, 8)), "record %d: length CRC", nrec);
        if ((uint64_t)(len - at - 16) < n) {
            TCHECK(0, "record %d: %llu bytes past the end", nrec, (unsigned long long)n);
            break;
        }
        TCHECK(le32(b + at + 12 + n) == mask(crc_bits(b + at + 12, n)), "record %d: data CRC", nrec);
        parse_event((rd){b + at + 12, b + at + 12 + n, 0}, dir);
        at += 16 + (long)n;
        nrec++;
    }
    TCHECK(at == len && nrec > 3, "%d records, the file ends on a record boundary (%ld of %ld)",
           nrec, at, len);
    free(b);

    /* every number of metrics.jsonl is a scalar at its step */
    snprintf(p, sizeof p, "%s/run/metrics.jsonl", dir);
    int nl = 0, nnum = 0, missing = 0;
    cJSON **lines = vt_read_lines(p, &nl);
    for (int i = 0; i < nl; i++) {
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(lines[i], "kind");
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(lines[i], "step");
        for (const cJSON *e = lines[i]->child; e && k && s; e = e->next) {
            if (!cJSON_IsNumber(e) || !strcmp(e->string, "step") || !isfinite(e->valuedouble))
                continue;
            char tag[128];
            snprintf(tag, sizeof tag, "%s/%s", k->valuestring, e->string);
            int found = 0;
            for (int j = 0; j < nsc && !found; j++)
                found = sc[j].step == (int64_t)s->valuedouble && !strcmp(sc[j].tag, tag) &&
                        sc[j].v == (float)e->valuedouble;
            missing += !found;
            if (!found && missing < 5)
                fprintf(stderr, "no scalar %s = %g at step %g\n", tag, e->valuedouble, s->valuedouble);
            nnum++;
        }
    }
    TCHECK(nl >= 3 && nnum > 10 && missing == 0, "%d of %d numbers of %d lines missing", missing,
           nnum, nl);
    TCHECK(nsc == nnum, "as many scalars (%d) as numbers (%d)", nsc, nnum);
    TCHECK(nconf == 2, "a confusion image per validation: %d, want 2", nconf);
    TCHECK(nclips == 4 && nimg == 6, "--tb-clips 2: 2 clips an epoch, %d (of %d images)", nclips,
           nimg);
    vt_free_lines(lines, nl);
    return vt_test_done("test_tensorboard");
}
