/*
 * bench_conv.c: `vidtrain bench conv` — every convolution shape of R3D-18 at a clip and
 * batch, timed in cuDNN's three directions (forward, backward data = dgrad, backward
 * filter = wgrad) with PyTorch's NCDHW activations against channels-last NDHWC, in FP32,
 * TF32 and BF16, with the algorithm cuDNN's timed search finds fastest and the fastest
 * deterministic one (issue 45 step 1: whether NDHWC activations on CUDA towers are worth
 * >= 8%, and what the deterministic preference costs). The totals weigh each shape by
 * how often the network runs it in a training step (the stem's dgrad is not run: the
 * input needs no gradient). One line per precision, "conv total PREC: NCDHW X ms, NDHWC
 * Y ms, ...", is what scripts/gpu-perf.sh reads.
 *
 * The shapes are R3D-18's (torchvision r3d_18: stem 3->64 k3x7x7 s1x2x2, four stages of
 * two basic blocks, 1x1x1 stride-2 downsampling), computed here from the clip. Needs a
 * CUDA build and a GPU: a CPU-only build refuses with exit 1 and a hint (tested by
 * test_bench_gpu_cmds). It must never assert anything about speed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/opts.h"
#include "base/common.h"
#include "models/backend.h"
#ifdef VT_HAVE_CUDA
#include "models/cuda/cuda_convbench.h"
#include "models/cuda/cuda_info.h"
#endif

int vt_bench_conv(int argc, char **argv);

static void usage(FILE *f) {
    fprintf(f,
            "usage: vidtrain bench conv [options]   (needs a CUDA build and a GPU)\n\n"
            "Times every R3D-18 convolution shape: forward, dgrad and wgrad, NCDHW against\n"
            "NDHWC activations, the algorithms cuDNN chooses, per precision.\n\n"
            "  --clip TxS|TxHxW    clip (default 16x112)\n"
            "  --batch B           clips (default 32)\n"
            "  --small             a quick case: --clip 8x56 --batch 4 --reps 2 (not with them)\n"
            "  --precision LIST    comma-separated: fp32, tf32, bf16 (default all three)\n"
            "  --layout L          ncdhw, ndhwc or both (default both)\n"
            "  --device N          the GPU (default 0)\n"
            "  --reps R            timed calls per algorithm (default 5)\n"
            "  --workspace BYTES   most workspace an algorithm may use (default\n"
            "                      $VT_CUDA_WORKSPACE or 1G, as the backend)\n");
}

#ifdef VT_HAVE_CUDA
/* One convolution of R3D-18 and how many times a training step runs it. */
typedef struct cb_shape {
    vt_conv3d_p p;
    int thw[3];
    int count;
    int no_dgrad; /* the stem: its input needs no gradient */
} cb_shape;

static vt_conv3d_p cp(int cin, int cout, int k, int s, int pad) {
    vt_conv3d_p p = {.cin = cin, .cout = cout};
    for (int d = 0; d < 3; d++) {
        p.k[d] = k;
        p.s[d] = s;
        p.p[d] = pad;
    }
    return p;
}

/* R3D-18's shapes for clip (t, h, w); returns how many (at most 16). */
static int r3d18_shapes(int t, int h, int w, cb_shape *sh) {
    int n = 0;
    vt_conv3d_p stem = {.cin = 3, .cout = 64, .k = {3, 7, 7}, .s = {1, 2, 2}, .p = {1, 3, 3}};
    sh[n++] = (cb_shape){stem, {t, h, w}, 1, 1};
    int thw[3] = {t, vt_conv_out(h, 7, 2, 3), vt_conv_out(w, 7, 2, 3)};
    sh[n++] = (cb_shape){cp(64, 64, 3, 1, 1), {thw[0], thw[1], thw[2]}, 4, 0};
    for (int c = 64; c < 512; c *= 2) {
        sh[n++] = (cb_shape){cp(c, 2 * c, 3, 2, 1), {thw[0], thw[1], thw[2]}, 1, 0};
        sh[n++] = (cb_shape){cp(c, 2 * c, 1, 2, 0), {thw[0], thw[1], thw[2]}, 1, 0};
        for (int d = 0; d < 3; d++)
            thw[d] = vt_conv_out(thw[d], 3, 2, 1);
        sh[n++] = (cb_shape){cp(2 * c, 2 * c, 3, 1, 1), {thw[0], thw[1], thw[2]}, 3, 0};
    }
    return n;
}
#endif

int vt_bench_conv(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
    vt_clip_shape clip = {16, 112, 112};
    int batch = 32, reps = 5, device = 0, layouts = 3, nprec = 0;
    vt_precision prec[3];
    int64_t ws = 1 << 30;
    const char *wse = getenv("VT_CUDA_WORKSPACE");
    if (wse && *wse && vt_parse_bytes(wse) >= 0)
        ws = vt_parse_bytes(wse);
    vt_opts_given given = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        vt_opts_given_note(&given, a);
        if (!strcmp(a, "--small")) {
            clip = (vt_clip_shape){8, 56, 56};
            batch = 4;
            reps = 2;
            continue;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "vidtrain bench conv: %s needs a value (or unknown option)\n", a);
            usage(stderr);
            return 2;
        }
        int bad = 0;
        if (!strcmp(a, "--clip")) {
            if (vt_parse_clip(v, &clip)) {
                fprintf(stderr, "vidtrain bench conv: bad --clip '%s' (TxS or TxHxW)\n", v);
                bad = 1;
            }
        } else if (!strcmp(a, "--batch"))
            bad = vt_opt_int("bench conv", a, v, 1, 4096, &batch);
        else if (!strcmp(a, "--reps"))
            bad = vt_opt_int("bench conv", a, v, 1, 1000, &reps);
        else if (!strcmp(a, "--device"))
            bad = vt_opt_int("bench conv", a, v, 0, 1023, &device);
        else if (!strcmp(a, "--workspace")) {
            ws = vt_parse_bytes(v);
            if (ws < 0) {
                fprintf(stderr, "vidtrain bench conv: bad --workspace '%s' (e.g. 512M)\n", v);
                bad = 1;
            }
        } else if (!strcmp(a, "--layout")) {
            layouts = !strcmp(v, "ncdhw") ? 1 : !strcmp(v, "ndhwc") ? 2 : !strcmp(v, "both") ? 3 : 0;
            if (!layouts) {
                fprintf(stderr, "vidtrain bench conv: bad --layout '%s' (ncdhw, ndhwc, both)\n", v);
                bad = 1;
            }
        } else if (!strcmp(a, "--precision")) {
            char buf[64];
            snprintf(buf, sizeof buf, "%s", v);
            nprec = 0;
            for (char *sv = NULL, *tok = strtok_r(buf, ",", &sv); tok && !bad;
                 tok = strtok_r(NULL, ",", &sv)) {
                int pr = vt_precision_parse(tok);
                if (pr < 0 || nprec == 3) {
                    fprintf(stderr, "vidtrain bench conv: bad --precision '%s' (fp32, tf32, "
                            "bf16, comma-separated)\n", v);
                    bad = 1;
                } else
                    prec[nprec++] = (vt_precision)pr;
            }
        } else {
            fprintf(stderr, "vidtrain bench conv: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (bad)
            return 2;
        i++;
    }
    /* --small sets three values: whichever of it and one of them came later replaced
     * the other's without a word */
    static const char *const small_sets[] = {"--clip", "--batch", "--reps", NULL};
    const char *o = vt_opts_given_has(&given, "--small") ? vt_opts_given_any(&given, small_sets)
                                                         : NULL;
    if (o) {
        fprintf(stderr, "vidtrain bench conv: --small is --clip 8x56 --batch 4 --reps 2: not "
                "with %s; give --clip, --batch and --reps instead of --small\n", o);
        return 2;
    }
    if (!nprec) {
        prec[0] = VT_PREC_FP32;
        prec[1] = VT_PREC_TF32;
        prec[2] = VT_PREC_BF16;
        nprec = 3;
    }
#ifndef VT_HAVE_CUDA
    (void)layouts;
    (void)prec;
    (void)ws;
    fprintf(stderr, "vidtrain bench conv: needs a CUDA build and a GPU; this vidtrain was built "
            "without CUDA\n  hint: build with -DVT_CUDA=ON (docs/cuda.md), or run "
            "scripts/gpu-perf.sh on a GPU machine with scripts/build-static.sh's binaries\n");
    return 1;
#else
    vt_gpu_info gi;
    if (vt_cuda_device_query(device, &gi) != 0) {
        fprintf(stderr, "vidtrain bench conv: no CUDA device %d (%d found)\n  hint: `vidtrain "
                "devices` lists them; bench conv needs a GPU\n", device, vt_cuda_device_count());
        return 1;
    }
    vt_cuda_versions ver;
    vt_cuda_versions_get(&ver);
    cb_shape sh[16];
    const int nsh = r3d18_shapes(clip.t, clip.h, clip.w, sh);
    printf("R3D-18 convolutions, clip %dx%dx%d, batch %d, cuda:%d (%s), cuDNN %d, workspace "
           "<= %lld MiB, %d timed calls each\n", clip.t, clip.h, clip.w, batch, device, gi.name,
           ver.cudnn, (long long)(ws >> 20), reps);
    printf("ms per call of the fastest algorithm (its number; * = tensor cores); det: the "
           "fastest deterministic one\n");
    static const char *const dname[3] = {"fwd", "dgrad", "wgrad"};
    for (int q = 0; q < nprec; q++) {
        double tot[2] = {0, 0}, tot_det[2] = {0, 0}, both[2] = {0, 0};
        int complete[2] = {1, 1};
        printf("\n%-5s %-6s %-30s %3s", "prec", "layout", "conv (in T x H x W)", "x");
        for (int d = 0; d < 3; d++)
            printf(" %15s", dname[d]);
        printf("  | det: fwd/dgrad/wgrad ms\n");
        for (int s = 0; s < nsh; s++)
            for (int l = 0; l < 2; l++) {
                if (!(layouts & (1 << l)))
                    continue;
                vt_convbench_dir r[3];
                static vt_convbench_dir r_nc[3]; /* this shape's NCDHW results */
                char err[512];
                if (vt_cuda_convbench(device, batch, sh[s].thw, &sh[s].p, prec[q], l, (size_t)ws,
                                      reps, r, err, sizeof err)) {
                    fprintf(stderr, "vidtrain bench conv: %s\n", err);
                    return 1;
                }
                char nm[64];
                snprintf(nm, sizeof nm, "%d->%d k%d s%d (%dx%dx%d)", sh[s].p.cin, sh[s].p.cout,
                         sh[s].p.k[2], sh[s].p.s[2], sh[s].thw[0], sh[s].thw[1], sh[s].thw[2]);
                printf("%-5s %-6s %-30s %3d", vt_precision_name(prec[q]), l ? "NDHWC" : "NCDHW",
                       nm, sh[s].count);
                for (int d = 0; d < 3; d++) {
                    if (d == 1 && sh[s].no_dgrad) {
                        printf(" %15s", "-");
                        continue;
                    }
                    if (!r[d].ok) {
                        printf(" %15s", "n/a");
                        complete[l] = 0;
                        continue;
                    }
                    char cell[32];
                    snprintf(cell, sizeof cell, "%.3f (%d%s)", r[d].ms, r[d].algo,
                             r[d].tensor_ops ? "*" : "");
                    printf(" %15s", cell);
                    tot[l] += sh[s].count * r[d].ms;
                    /* the ratio compares the directions both layouts run */
                    if (l == 0)
                        r_nc[d] = r[d];
                    else if (layouts == 3 && r_nc[d].ok) {
                        both[0] += sh[s].count * r_nc[d].ms;
                        both[1] += sh[s].count * r[d].ms;
                    }
                    /* what the backend's "deterministic preferred" takes (cuda_conv.c) */
                    const double pick = r[d].det_ok && r[d].det_ms <= 1.10 * r[d].ms
                                            ? r[d].det_ms : r[d].ms;
                    tot_det[l] += sh[s].count * pick;
                }
                if (l == 0)
                    for (int d = 0; d < 3; d++)
                        r_nc[d].ok = r_nc[d].ok && r[d].ok && !(d == 1 && sh[s].no_dgrad);
                printf("  | ");
                for (int d = 0; d < 3; d++)
                    if (r[d].det_ok && !(d == 1 && sh[s].no_dgrad))
                        printf("%s%.3f (%d)", d ? " / " : "", r[d].det_ms, r[d].det_algo);
                    else
                        printf("%s-", d ? " / " : "");
                printf("\n");
                fflush(stdout);
            }
        printf("conv total %s:", vt_precision_name(prec[q]));
        for (int l = 0; l < 2; l++)
            if (layouts & (1 << l))
                printf(" %s %.2f ms%s (det preferred %.2f)%s", l ? "NDHWC" : "NCDHW", tot[l],
                       complete[l] ? "" : " incomplete", tot_det[l], l == 0 && layouts == 3 ? "," : "");
        if (layouts == 3 && both[0] > 0)
            printf(", NDHWC/NCDHW %.3f%s", both[1] / both[0],
                   complete[0] && complete[1] ? "" : " (over what both layouts run)");
        printf(" per step's convolutions\n");
    }
    return 0;
#endif
}
