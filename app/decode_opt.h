/*
 * decode_opt.h: the `--decode cpu|nvdec|auto` option that train, eval, predict, prep and
 * bench decode share: where video frames decode (pipeline/data/video/video.h vt_decode_mode,
 * docs/decode.md). One parser, one help line, one error line, so every command reads
 * it the same way.
 *
 * It must never open a video or touch a GPU: it only sets the mode that later opens use.
 */
#ifndef VT_DECODE_OPT_H
#define VT_DECODE_OPT_H

/* The help line, in the layout of the commands' option lists. */
#define VT_DECODE_OPT_HELP                                                                     \
    "  --decode MODE         cpu (default), nvdec or auto: where videos decode; auto:\n"  \
    "                        NVDEC when a CUDA device and the codec allow, else the\n"     \
    "                        CPU (docs/decode.md)\n"                                  \
    "  --frame-rate R        frames per second of frame folders (numbered JPEG/PNG\n"   \
    "                        frames read as one video; default 30); refused where no\n" \
    "                        input is one\n"

/* If argv[*i] is --decode ("--decode V" or "--decode=V"): sets the process's decode mode
 * (vt_video_set_decode) and returns 1, *i past the value; --frame-rate R the same for
 * frame folders' rate (vt_video_set_frame_rate); 0 for another argument; -1
 * after printing one line to stderr for a missing or unknown value:
 *   "vidtrain CMD: --decode 'gpu': expected cpu, nvdec or auto (see docs/decode.md)". */
int vt_decode_opt_take(const char *cmd, int argc, char **argv, int *i);

/* 1 when --frame-rate was on the command line (else a run's config.json may set it). */
int vt_frame_rate_given(void);

/* --frame-rate times frame folders only: a video file's frames carry their own
 * timestamps, so beside inputs none of which is a frame folder it would change nothing.
 * 0 when --frame-rate was not given on the command line or one of the n paths (NULLs
 * skipped) is a frame folder; else 2 after printing why and what to do, WHY_NONE saying
 * where none is ("none of the inputs is one"):
 *   "vidtrain CMD: --frame-rate R times the frames of frame folders (...), and WHY_NONE:
 *    ...; leave it out".
 * It stats the paths (at most every one), only when the option was given. */
int vt_frame_rate_check(const char *cmd, const char *why_none, const char *const *paths,
                        int n);
/* The same over datasets' videos: ds's, and ds2's unless NULL (train's --val-dir folder),
 * the message naming their folders. */
struct vt_dataset;
int vt_frame_rate_check_data(const char *cmd, const struct vt_dataset *ds,
                             const struct vt_dataset *ds2);

#endif
