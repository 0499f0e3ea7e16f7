/*
 * test_input_norm.c: the statistics clips are normalised with (--input-norm) follow what
 * the weights learnt on, never silently another set:
 *   - auto's family for every zoo model torchvision publishes weights for equals the mean
 *     and std of torchvision's own Weights.transforms (the outside truth: torchvision's
 *     MViT weights keep pytorchvideo's 0.45/0.225, its R(2+1)D/R3D/MC3/S3D Kinetics');
 *   - train --init from a vidtrain run trained with --input-norm imagenet: the child keeps
 *     imagenet (the checkpoint's normalisation metadata), where auto would have picked
 *     tiny's family's Kinetics; an --input-norm given that differs is warned about; with no
 *     --clip the default clip that differs from the parent's is named in a note, and so is
 *     the clip of a zoo file given to --init by its name (SLOW_8x8_R50.pyth: 8x224 at
 *     stride 8, what --pretrained slow_r50 sets), and its model when --model is another;
 *   - --pretrained with an --input-norm other than its weights' is warned about (parsed
 *     before any download: the dataset is missing), the weights' own is not;
 *   - a run whose configuration names statistics this build does not know (a newer
 *     vidtrain's, or damaged: the checkpoints' own copy rewritten by Python) is refused by
 *     eval and export, which read it as Kinetics' and exported that as its metadata;
 * Without torchvision in $VT_PYTHON that part is reported skipped.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "models/net_types.h"
#include "pipeline/data/sample.h"
#include "tests/apputil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

static const char *cfg_str(const char *dir, const char *run, const char *key, char *buf, size_t n) {
    char p[4300];
    snprintf(p, sizeof p, "%s/%s/config.json", dir, run);
    cJSON *c = vt_test_read_json(p);
    const cJSON *v = c ? cJSON_GetObjectItem(c, key) : NULL;
    snprintf(buf, n, "%s", cJSON_IsString(v) ? v->valuestring : "(none)");
    cJSON_Delete(c);
    return buf;
}

/* RUN copied to NEW with input_norm NAME in config.json and in each checkpoint's own
 * copy of it (the safetensors header rewritten: plain json and struct). 0 on success. */
static int renamed_norm(const char *py, const char *dir, const char *run, const char *nw,
                        const char *name) {
    static const char *const prog =
        "import json, struct, sys\n"
        "src, dst, name = sys.argv[1:4]\n"
        "b = open(src, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]\n"
        "h = json.loads(b[8:8 + n]); m = h['__metadata__']\n"
        "c = json.loads(m['vidtrain_config']); c['input_norm'] = name\n"
        "m['vidtrain_config'] = json.dumps(c)\n"
        "hb = json.dumps(h).encode(); hb += b' ' * (-len(hb) % 8)\n"
        "open(dst, 'wb').write(struct.pack('<Q', len(hb)) + hb + b[8 + n:])\n";
    return vt_test_sh("cd '%s' && rm -rf '%s' && cp -r '%s' '%s' && sed -i 's/\\(\"input_norm\":"
                      "\t\"\\)[a-z]*/\\1%s/' '%s/config.json' && for f in '%s'/*.safetensors; do '%s' "
                      "-c \"%s\" \"$f\" \"$f\" %s || exit 1; done", dir, nw, run, nw, name, nw, nw,
                      py, prog, name);
}

static void unknown_norm(const char *bin, const char *py, const char *dir) {
    TCHECK(renamed_norm(py, dir, "parent", "future", "clipnorm") == 0, "rewrite the checkpoints");
    int rc = vt_test_sh("'%s' export '%s/future' --onnx '%s/future.onnx' > '%s/fx.log' 2>&1", bin,
                        dir, dir, dir);
    printf("export of a run normalised with 'clipnorm': exit %d\n", rc);
    TCHECK(rc == 1 && vt_test_file_has_in(dir, "fx.log", "input_norm 'clipnorm'"),
           "export of unknown statistics: exit %d, want 1 naming them", rc);
    char p[4300];
    snprintf(p, sizeof p, "%s/future.onnx", dir);
    TCHECK(access(p, F_OK) != 0, "an ONNX file was written with Kinetics' statistics in place of the unknown ones");
    rc = vt_test_sh("'%s' eval '%s/future' '%s/data' -q --devices cpu:1 > '%s/fe.log' 2>&1", bin,
                    dir, dir, dir);
    TCHECK(rc == 1 && vt_test_file_has_in(dir, "fe.log", "input_norm 'clipnorm'"),
           "eval of unknown statistics: exit %d, want 1 naming them", rc);
    /* the same rewrite with a known name is read: the refusal is the name's, not the copy's */
    TCHECK(renamed_norm(py, dir, "parent", "known", "pytorchvideo") == 0, "rewrite (known)");
    rc = vt_test_sh("'%s' export '%s/known' --onnx '%s/known.onnx' > '%s/kx.log' 2>&1", bin, dir,
                    dir, dir);
    TCHECK(rc == 0, "export of a rewritten run with known statistics: exit %d", rc);
}

static void init_keeps_norm(const char *bin, const char *dir) {
    const char *common = "--clip 4x32 --stride 2 --batch 6 --val-clips 1 --workers 1 --epochs 1 "
                         "--max-steps 1 --seed 5 -q --devices cpu:1";
    char b[64];
    int rc = vt_test_sh("'%s' train '%s/data' --out '%s/parent' %s --input-norm imagenet > "
                        "'%s/parent.log' 2>&1", bin, dir, dir, common, dir);
    TCHECK(rc == 0, "parent exit %d", rc);
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/child' %s --init '%s/parent/last.safetensors' "
                    "> '%s/child.log' 2>&1", bin, dir, dir, common, dir, dir);
    TCHECK(rc == 0, "child exit %d", rc);
    printf("--init from an imagenet run: the child's input_norm %s\n",
           cfg_str(dir, "child", "input_norm", b, sizeof b));
    TCHECK(!strcmp(cfg_str(dir, "child", "input_norm", b, sizeof b), "imagenet"),
           "the child of an imagenet run trains on %s's statistics", b);
    TCHECK(vt_test_file_has_in(dir, "child.log", "normalised with imagenet's statistics"),
           "the child does not say where its statistics come from");
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/given' %s --init '%s/parent/last.safetensors' "
                    "--input-norm kinetics > '%s/given.log' 2>&1", bin, dir, dir, common, dir, dir);
    TCHECK(rc == 0, "child with --input-norm exit %d", rc);
    TCHECK(!strcmp(cfg_str(dir, "given", "input_norm", b, sizeof b), "kinetics"),
           "--input-norm kinetics given: %s", b);
    TCHECK(vt_test_file_has_in(dir, "given.log", "warning: --input-norm kinetics, but"),
           "an --input-norm other than the checkpoint's is not warned about");
    TCHECK(!vt_test_file_has_in(dir, "child.log", "note:"), "a note though --clip was given");
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/noclip' --batch 6 --val-clips 1 --workers 1 "
                    "--epochs 1 --max-steps 1 -q --devices cpu:1 --init '%s/parent/last.safetensors' "
                    "> '%s/noclip.log' 2>&1", bin, dir, dir, dir, dir);
    TCHECK(rc == 0, "child without --clip exit %d", rc);
    TCHECK(vt_test_file_has_in(dir, "noclip.log", "learnt on 4x32 clips at stride 2") &&
               vt_test_file_has_in(dir, "noclip.log", "give --clip 4x32 --stride 2"),
           "the default clip that differs from the parent's is not named");
    /* a zoo file downloaded by hand, known by its name (its content does not matter: the
     * note comes before the load, which then refuses this one) */
    rc = vt_test_sh("printf 'not weights' > '%s/SLOW_8x8_R50.pyth' && '%s' train '%s/data' --out "
                    "'%s/zoo' --model slow_r50 --epochs 1 -q --devices cpu:1 --init "
                    "'%s/SLOW_8x8_R50.pyth' > '%s/zoo.log' 2>&1", dir, bin, dir, dir, dir, dir);
    TCHECK(rc != 0 && vt_test_file_has_in(dir, "zoo.log", "is --pretrained slow_r50's file") &&
               vt_test_file_has_in(dir, "zoo.log", "give --clip 8x224 --stride 8"),
           "--init with pytorchvideo's slow_r50 file: the weights' own clip is not named");
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/zoo2' --epochs 1 -q --devices cpu:1 --init "
                    "'%s/SLOW_8x8_R50.pyth' > '%s/zoo2.log' 2>&1", bin, dir, dir, dir, dir);
    TCHECK(rc != 0 && vt_test_file_has_in(dir, "zoo2.log", "give --model slow_r50"),
           "--init with slow_r50's file into the default model: --model slow_r50 not named");
}

/* Each line "MODEL m0 m1 m2 s0 s1 s2" of torchvision's weights' transforms checked
 * against vt_zoo_input_norm(MODEL)'s statistics. Returns the models compared. */
static int against_torchvision(const char *py) {
    static const char *const prog =
        "import torchvision.models.video as v\n"
        "from torchvision.transforms._presets import VideoClassification as VC\n"
        "import inspect\n"
        "d = inspect.signature(VC).parameters\n"
        "for name, w in [('r3d18', v.R3D_18_Weights), ('mc3_18', v.MC3_18_Weights),\n"
        "                ('r2plus1d18', v.R2Plus1D_18_Weights), ('s3d', v.S3D_Weights),\n"
        "                ('mvit_v2_s', v.MViT_V2_S_Weights), ('mvit_v1_b', v.MViT_V1_B_Weights)]:\n"
        "    kw = w.DEFAULT.transforms.keywords\n"
        "    m = kw.get('mean', d['mean'].default); s = kw.get('std', d['std'].default)\n"
        "    print(name, *m, *s)\n";
    char cmd[8400], line[512];
    snprintf(cmd, sizeof cmd, "'%s' -c \"%s\"", py, prog);
    FILE *f = popen(cmd, "r");
    TCHECK(f != NULL, "cannot run %s", py);
    if (!f)
        return 0;
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        char model[64];
        double m[3], s[3];
        if (sscanf(line, "%63s %lf %lf %lf %lf %lf %lf", model, &m[0], &m[1], &m[2], &s[0],
                   &s[1], &s[2]) != 7)
            continue;
        vt_clip_cfg c;
        vt_clip_cfg_default(&c);
        const char *fam = vt_zoo_input_norm(model);
        TCHECK(vt_clip_set_norm(&c, fam) == 0, "%s: auto names '%s'", model, fam);
        int same = 1;
        for (int k = 0; k < 3; k++) /* the same decimal constants, each rounded to float */
            same &= c.mean[k] == (float)m[k] && c.std[k] == (float)s[k];
        printf("%-11s torchvision mean %.6g %.6g %.6g std %.6g %.6g %.6g; auto: %s\n", model,
               m[0], m[1], m[2], s[0], s[1], s[2], fam);
        TCHECK(same, "%s: auto picks %s (mean %g, std %g), torchvision's weights want mean %g, "
               "std %g", model, fam, (double)c.mean[0], (double)c.std[0], m[0], s[0]);
        n++;
    }
    pclose(f);
    return n;
}

int main(void) {
    const char *py = vt_test_env("VT_PYTHON", "/usr/bin/python3");
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' -c 'import torchvision' >/dev/null 2>&1", py);
    if (system(cmd) != 0)
        printf("test_input_norm: SKIP torchvision's part: %s cannot import torchvision\n", py);
    else
        TCHECK(against_torchvision(py) == 6, "torchvision's six video models not all compared");
    const char *bin = vt_test_bin("test_input_norm");
    if (!bin)
        return VT_TEST_SKIP;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("input_norm"));
    TCHECK(vt_test_synth(bin, dir, "--classes 3 --train 4 --val 1 --test 1 --frames 16") == 0,
           "synth");
    init_keeps_norm(bin, dir);
    static const struct {
        const char *args;
        int warn;
    } pre[] = {{"--pretrained x3d_xs --input-norm kinetics", 1},
               {"--pretrained x3d_xs --input-norm pytorchvideo", 0},
               {"--pretrained mvit_v2_s --input-norm kinetics", 1}};
    for (size_t i = 0; i < sizeof pre / sizeof *pre; i++) {
        int rc = vt_test_sh("'%s' train '%s/nodata' --out '%s/pre' -q %s > '%s/pre.log' 2>&1", bin,
                            dir, dir, pre[i].args, dir);
        TCHECK(rc != 0 && vt_test_file_has_in(dir, "pre.log",
               "warning: --input-norm") == pre[i].warn,
               "%s: exit %d, warning %s", pre[i].args, rc, pre[i].warn ? "missing" : "not due");
    }
    unknown_norm(bin, py, dir);
    return vt_test_done("test_input_norm");
}
