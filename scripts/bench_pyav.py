#!/usr/bin/python3
"""bench_pyav.py: the PyAV peer of `vidtrain bench decode --mode clips` (scripts/bench-decode.sh).

For every file: open, build a frame index by demuxing (one pts per frame, sorted, like
vidtrain), then K clips at random positions: seek to the keyframe at or before the first
wanted pts (backward), decode forward, pick frames by pts, scale each with
frame.to_ndarray(width=, height=, format='rgb24') (swscale, bilinear like vidtrain).
Prints 'RESULT mode=clips ...' like vidtrain. Rotation metadata is ignored here (PyAV
does not apply it), which only makes PyAV's work lighter.
Run with /usr/bin/python3 (Debian's Python that has av).
"""
import argparse
import os
import random
import sys
import time

import av


def scaled_size(w, h, short):
    if short <= 0:
        return w, h
    if w <= h:
        return short, max(1, int(round(h * short / w)))
    return max(1, int(round(w * short / h))), short


def list_files(paths):
    skip = ('.txt', '.tsv', '.csv', '.json', '.md', '.log', '.html')
    out = []
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs.sort()
                for f in sorted(files):
                    if not f.startswith('.') and not f.endswith(skip):
                        out.append(os.path.join(root, f))
        else:
            out.append(p)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('paths', nargs='+')
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--short-side', type=int, default=128)
    ap.add_argument('--clip', type=int, default=16)
    ap.add_argument('--stride', type=int, default=2)
    ap.add_argument('--clips-per-video', type=int, default=4)
    ap.add_argument('--seed', type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    files = list_files(a.paths)
    nclips = nframes = bad = ok = 0
    t0 = time.perf_counter()
    for path in files:
        try:
            c = av.open(path)
            st = c.streams.video[0]
        except Exception:
            bad += 1
            continue
        try:
            st.thread_count = a.threads
            if a.threads != 1:
                st.thread_type = 'AUTO'
            pts = sorted(p.pts for p in c.demux(st) if p.pts is not None)
            if not pts:
                bad += 1
                continue
            ok += 1
            n = len(pts)
            ow, oh = scaled_size(st.codec_context.width, st.codec_context.height, a.short_side)
            span = (a.clip - 1) * a.stride + 1
            for _ in range(a.clips_per_video):
                start = rng.randrange(n - span + 1) if n > span else 0
                want = [pts[(start + i * a.stride) % n] for i in range(a.clip)]
                wanted = set(want)
                got = {}
                last = max(want)
                c.seek(min(want), stream=st, backward=True, any_frame=False)
                for fr in c.decode(st):
                    if fr.pts in wanted and fr.pts not in got:
                        got[fr.pts] = fr.to_ndarray(width=ow, height=oh, format='rgb24')
                    if fr.pts is not None and fr.pts >= last:
                        break
                clip = [got.get(p) for p in want]
                if any(x is None for x in clip):
                    continue
                nclips += 1
                nframes += a.clip
        except Exception as e:  # a bad file is skipped, like vidtrain does
            print(f'pyav: {path}: {e}', file=sys.stderr)
            bad += 1
        finally:
            c.close()
    dt = time.perf_counter() - t0
    print(f'pyav clips: {ok} videos ({bad} unreadable), {nclips} clips of {a.clip} frames '
          f'(stride {a.stride}) in {dt:.3f} s = {nclips / dt:.1f} clips/s, {nframes / dt:.1f} frames/s')
    print(f'RESULT mode=clips videos={ok} clips={nclips} frames={nframes} seconds={dt:.4f}')


if __name__ == '__main__':
    main()
