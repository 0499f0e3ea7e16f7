/*
 * pth.h: PyTorch checkpoints (torch.save(model.state_dict(), path), torchvision's
 * Kinetics-400 downloads such as r3d_18-b3b3357e.pth) read without Python and without
 * ever running anything from the file (docs/design.md §3.7). Both formats of torch.save
 * are read: the zip archive of torch >= 1.6 (<prefix>/data.pkl, <prefix>/data/<key>
 * storages, <prefix>/byteorder) and the legacy stream (_use_new_zipfile_serialization=
 * False: five pickles, then the storages' bytes). The pickle goes through the restricted
 * unpickler of pickle.h: only what a state_dict needs is built; an object of any other
 * class is never built (skipped outside the weights, refused in them, see below) and
 * refusals name the file, the pickle offset and the global.
 *
 * It knows tensors and names only: matching them to a net is the caller's (names are kept
 * exactly as stored, "module." prefixes included). It must never abort on a bad file.
 *
 * The state_dict is the top-level dict when every value is a tensor, else the dict of
 * tensors under 'state_dict', 'model_state_dict', 'model' or 'model_state' (PySlowFast's
 * and pytorchvideo's .pyth files: beside it 'epoch', 'optimizer_state', a 'cfg' string).
 * Objects of classes outside the unpickler's allow-list elsewhere in the file are
 * skipped, never built (pickle.h), and named in `skipped`; one inside the state_dict, or
 * as the whole pickle, refuses the file.
 */
#ifndef VT_PTH_H
#define VT_PTH_H

#include <stddef.h>
#include <stdint.h>

typedef struct vt_pth_tensor {
    char *name;          /* state_dict key as found (prefixes such as "module." kept) */
    int ndim;            /* 0..8 */
    int64_t shape[8];
    int64_t numel;
    float *data;         /* numel floats, contiguous row-major, converted from the stored dtype */
    int was_int;         /* stored as an integer dtype (int64 num_batches_tracked) */
} vt_pth_tensor;

typedef struct vt_pth {
    int n;
    vt_pth_tensor *t;    /* (n) in the state_dict's order */
    char *container;     /* "" or the key the state_dict was nested under, e.g. "state_dict" */
    char *skipped;       /* "" or the classes / callables of the file's other entries that
                            were skipped unbuilt, e.g. "__main__.Extra, numpy.dtype" */
} vt_pth;

/* 1 if the file is a PyTorch checkpoint by its first bytes (a zip archive's magic, as
 * torch.save writes, or the legacy pickle magic), else 0 (also for anything that is not a
 * regular file). The magic alone decides, so that a truncated or damaged .pth is read as
 * one and reported as one (vt_pth_read says what is wrong with it). */
int vt_pth_sniff(const char *path);

/* Reads every tensor of the state_dict in `path`. 0, or -1 with err naming the path, the
 * byte offset in the pickle and the reason (e.g. "x.pth: data.pkl offset 57: global
 * 'os.system' is not allowed (a checkpoint may only hold tensors)"), *out left zeroed.
 * Never aborts on bad input; nothing in the file is ever executed. */
int vt_pth_read(vt_pth *out, const char *path, char *err, size_t errlen);

/* The same for a file already in memory (buf[0, len)); `name` stands for the path in
 * messages. The fuzz target's entry point. */
int vt_pth_read_mem(vt_pth *out, const void *buf, size_t len, const char *name, char *err,
                    size_t errlen);

void vt_pth_free(vt_pth *p);  /* takes zeroed/NULL-filled structs */

#endif
