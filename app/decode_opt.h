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
    "                        frames read as one video; default 30)\n"

/* If argv[*i] is --decode ("--decode V" or "--decode=V"): sets the process's decode mode
 * (vt_video_set_decode) and returns 1, *i past the value; --frame-rate R the same for
 * frame folders' rate (vt_video_set_frame_rate); 0 for another argument; -1
 * after printing one line to stderr for a missing or unknown value:
 *   "vidtrain CMD: --decode 'gpu': expected cpu, nvdec or auto (see docs/decode.md)". */
int vt_decode_opt_take(const char *cmd, int argc, char **argv, int *i);

/* 1 when --frame-rate was on the command line (else a run's config.json may set it). */
int vt_frame_rate_given(void);

#endif
