/*
 * zoo.h: a model of the zoo (zoo.c: tiny, tiny_nobn, c3d, r3d18, mc3_18, r2plus1d18, s3d) as a
 * planned graph, private to models/: what net.c builds a replica from and memplan.c sizes.
 * The names of the zoo are public (vt_zoo_names in net.h).
 *
 * It must never be included by net_graph.c: the zoo builds graphs with net_graph.c's
 * builders, so a call back from there would make a circle.
 */
#ifndef VT_ZOO_H
#define VT_ZOO_H

#include <stddef.h>

#include "models/net_types.h" /* not net.h: net.c builds from here (no circle) */
#include "models/net_graph.h"

/* Build cfg->model's graph (nodes and state-dict tensors, heads included) and plan its
 * memory (vt_graph_plan). 0, or -1 with err and nothing left to free. */
int vt_graph_make(vt_graph *g, const vt_net_cfg *cfg, char *err, size_t errlen);

/* Private to zoo.c: the X3D family's trunk (zoo_x3d.c) for model x3d_xs, x3d_s, x3d_m or
 * x3d_l — every node up to the features the heads read; returns that node (-1 once the
 * graph failed), or -2 when `model` is not one of them. */
int vt_zoo_build_x3d(vt_graph *g, const char *model);

/* zoo_vit.c: the VideoMAE transformers (videomae_vit_s, videomae_vit_b, the test model
 * vit_test). is_vit: 1 if model is one; depth: its blocks (0 if not one); build: its
 * graph up to the features (fc_norm), the heads are zoo.c's. */
int vt_zoo_is_vit(const char *model);
int vt_zoo_vit_depth(const char *model);
int vt_zoo_build_vit(vt_graph *g, const vt_net_cfg *cfg);

/* zoo_mvit.c: MViTv2 (mvit_v2_s, the test model mvit_test): is_mvit 1 if model is one;
 * build: its graph up to the class token's row, the heads are zoo.c's. */
int vt_zoo_is_mvit(const char *model);
int vt_zoo_build_mvit(vt_graph *g, const vt_net_cfg *cfg);

#endif
