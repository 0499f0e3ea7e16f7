#!/usr/bin/python3
"""bench_pyav.py: the PyAV peer of `vidtrain bench decode --mode clips` (bench/bench-decode.sh).

The same work as vidtrain, per video: open the container once and keep it for all of the
video's clips; build a frame index by demuxing (one pts per frame, sorted, as vidtrain
does); then for each clip seek to the keyframe at or before the first wanted pts
(backward), decode forward, pick the wanted frames by pts and scale each with
frame.to_ndarray(width=W, height=H, format='rgb24') (swscale, bilinear like vidtrain).
With --starts FILE (written by `vidtrain bench decode --starts-out`) the files, their order,
the output sizes W x H and the clip starts are vidtrain's exactly; without it, starts are
drawn here. Decoder threads: codec thread_count N, thread_type AUTO (frame + slice, like
vidtrain) when N > 1. --workers W runs W processes over different videos (what a
DataLoader with W workers gives a PyAV user), each with N decoder threads.
Rotation metadata is not applied here (PyAV does not), which only makes PyAV's work lighter.
Prints 'RESULT mode=clips ...' like vidtrain. Run with /usr/bin/python3 (Debian's, has av).
"""
import argparse
import multiprocessing
import os
import random
import resource
import sys
import time

import av


def scaled_size(w, h, short):
    """vidtrain's vt_video_scaled_size (round half away from zero, like lround)."""
    if short <= 0:
        return w, h
    if w <= h:
        return short, max(1, int(h * short / w + 0.5))
    return max(1, int(w * short / h + 0.5)), short


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


def read_starts(path):
    """Lines 'path<TAB>W<TAB>H<TAB>start...' -> [(path, (W, H), [starts])]."""
    jobs = []
    with open(path) as f:
        for line in f:
            parts = line.rstrip('\n').split('\t')
            if len(parts) >= 4:
                jobs.append((parts[0], (int(parts[1]), int(parts[2])),
                             [int(x) for x in parts[3:]]))
    return jobs


def one_video(job):
    """(path, size or None, starts or None, args) -> (ok, clips, frames)."""
    path, size, starts, a = job
    try:
        c = av.open(path)
    except Exception:
        return 0, 0, 0
    nclips = nframes = 0
    try:
        st = c.streams.video[0]
        st.thread_count = a.threads
        if a.threads != 1:
            st.thread_type = 'AUTO'
        pts = sorted(p.pts for p in c.demux(st) if p.pts is not None)
        if not pts:
            return 0, 0, 0
        n = len(pts)
        ow, oh = size or scaled_size(st.codec_context.width, st.codec_context.height,
                                     a.short_side)
        span = (a.clip - 1) * a.stride + 1
        if starts is None:
            rng = random.Random(f'{a.seed}:{path}')
            starts = [rng.randrange(n - span + 1) if n > span else 0
                      for _ in range(a.clips_per_video)]
        for start in starts:
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
            if any(got.get(p) is None for p in want):
                continue
            nclips += 1
            nframes += a.clip
        return 1, nclips, nframes
    except Exception as e:  # a bad file is skipped, like vidtrain does
        print(f'pyav: {path}: {e}', file=sys.stderr)
        return 1, nclips, nframes
    finally:
        c.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('paths', nargs='*')
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--workers', type=int, default=1)
    ap.add_argument('--short-side', type=int, default=128)
    ap.add_argument('--clip', type=int, default=16)
    ap.add_argument('--stride', type=int, default=2)
    ap.add_argument('--clips-per-video', type=int, default=4)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--starts', help="vidtrain's --starts-out file: same files, sizes, clips")
    a = ap.parse_args()
    if a.starts:
        jobs = [(p, size, starts, a) for p, size, starts in read_starts(a.starts)]
    else:
        jobs = [(p, None, None, a) for p in list_files(a.paths)]
    def cpu():  # this process (all its threads) and the reaped worker processes
        s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
    t0, c0 = time.perf_counter(), cpu()
    if a.workers > 1:
        pool = multiprocessing.get_context('fork').Pool(a.workers)
        res = list(pool.imap(one_video, jobs, chunksize=1))
        pool.close()
        pool.join()  # reaped, so their CPU time counts
    else:
        res = [one_video(j) for j in jobs]
    dt, dcpu = time.perf_counter() - t0, cpu() - c0
    ok = sum(r[0] for r in res)
    nclips = sum(r[1] for r in res)
    nframes = sum(r[2] for r in res)
    print(f'pyav clips: {ok} videos ({len(jobs) - ok} unreadable), {nclips} clips of {a.clip} '
          f'frames (stride {a.stride}), {a.workers} workers x {a.threads} decoder threads, in '
          f'{dt:.3f} s (cpu {dcpu:.3f} s) = {nclips / dt:.1f} clips/s, {nframes / dt:.1f} frames/s')
    print(f'RESULT mode=clips videos={ok} clips={nclips} frames={nframes} seconds={dt:.4f} '
          f'cpu_seconds={dcpu:.4f} workers={a.workers}')


if __name__ == '__main__':
    main()
