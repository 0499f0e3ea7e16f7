/*
 * zoo_pv.h: pytorchvideo's ResNet family (zoo_pv.c: slow_r50, i3d_r50, slowfast_r50,
 * r2plus1d_r50, csn_r101),
 * built into a graph for zoo.c, which adds the dropout and the heads. Private to models/.
 */
#ifndef VT_ZOO_PV_H
#define VT_ZOO_PV_H

#include "models/net_graph.h"

/* The names zoo.c gives the head: head 0's linear layer and the dropout before it. */
typedef struct vt_zoo_pv_head {
    const char *fc, *drop;
} vt_zoo_pv_head;

/* Builds `model`'s layers up to the features the heads read and sets g->init; returns
 * that node (-1 once the graph failed: g->err says why), or -2 when the model is not one
 * of this family. */
int vt_zoo_pv_build(vt_graph *g, const char *model, vt_zoo_pv_head *head);

#endif
