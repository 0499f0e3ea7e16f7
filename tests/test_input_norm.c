/*
 * test_input_norm.c: the statistics clips are normalised with (--input-norm) follow what
 * the weights learnt on, never silently another set:
 *   - auto's family for every zoo model torchvision publishes weights for equals the mean
 *     and std of torchvision's own Weights.transforms (the outside truth: torchvision's
 *     MViT weights keep pytorchvideo's 0.45/0.225, its R(2+1)D/R3D/MC3/S3D Kinetics');
 * Without torchvision in $VT_PYTHON that part is reported skipped.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/net_types.h"
#include "pipeline/data/sample.h"
#include "tests/testutil.h"

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
    return vt_test_done("test_input_norm");
}
